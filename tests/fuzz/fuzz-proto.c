/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the control socket's request path, the code daemon/server.c runs on
 * every connection (daemon/request.c): the input is what one client sent, delivered in
 * pieces as reads would deliver it; every complete line is parsed and dispatched to a
 * command or an error. Besides "no crash, no leak, no UB" it checks what the server relies
 * on: lines come out whole and in order, none longer than the cap, an oversized line is
 * refused exactly when there is one, a request is an object with a known command, and every
 * error message is text a reply can carry (valid UTF-8, not empty).
 */
#include "daemon/request.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether a line of @data (complete or the last, unfinished one) is longer than the cap. */
static bool has_oversized_line(const char *data, size_t size)
{
        size_t run = 0;

        for (size_t i = 0; i < size; i++) {
                run = data[i] == '\n' ? 0 : run + 1;
                if (run > NPF_PROTO_REQUEST_MAX)
                        return true;
        }
        return false;
}

static void check_request(const char *line, size_t len)
{
        char err[256];
        json_t *req = NULL;
        npf_command_t command = NPF_COMMAND__COUNT;
        int r = npf_request_parse(line, len, &req, &command, err, sizeof(err));

        if (r == 0) {
                if (!json_is_object(req) || command >= NPF_COMMAND__COUNT || !npf_command_name(command) ||
                    strcmp(json_string_value(json_object_get(req, "command")), npf_command_name(command)) != 0 ||
                    json_integer_value(json_object_get(req, "version")) != NPF_PROTO_VERSION)
                        abort();
                json_decref(req);
                return;
        }
        if ((r != -EPROTO && r != -EINVAL) || !memchr(err, '\0', sizeof(err)) || err[0] == '\0')
                abort();
        /* The server sends the message in a JSON string: it must be one. */
        json_t *s = json_string(err);
        if (!s)
                abort();
        json_decref(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        npf_linebuf_t b = { 0 };
        const char *in = (const char *) data;
        size_t off = 0, seen = 0, out = 0, piece = size ? (size_t) data[0] % 17 + 1 : 1;
        bool refused = false;
        char *line;
        size_t n;

        /* The pieces a socket's reads would deliver, each followed by what the server does. */
        while (off < size && !refused) {
                size_t take = size - off < piece ? size - off : piece;
                int r = npf_linebuf_append(&b, in + off, take);
                seen = off + take;
                if (r == -EMSGSIZE) {
                        refused = true;
                        break;
                }
                if (r < 0)
                        abort();
                off += take;
                while ((r = npf_linebuf_next(&b, &line, &n)) == 1) {
                        /* Lines come out in order, whole, without their newline; empty ones skipped. */
                        while (out < size && in[out] == '\n')
                                out++;
                        if (n == 0 || n > NPF_PROTO_REQUEST_MAX || memchr(line, '\n', n) || line[n] != '\0' ||
                            out + n >= size || memcmp(in + out, line, n) != 0 || in[out + n] != '\n')
                                abort();
                        out += n + 1;
                        check_request(line, n);
                        free(line);
                }
                if (r < 0)
                        abort();
        }
        /* Refused exactly when a line of what was offered is too long. */
        if (refused != has_oversized_line(in, seen))
                abort();
        /* What is left is the unfinished last line, and only it. */
        if (!refused) {
                while (out < size && in[out] == '\n')
                        out++;
                if (npf_linebuf_partial(&b) != (out < size) || memchr(in + out, '\n', size - out))
                        abort();
        }
        npf_linebuf_clear(&b);
        return 0;
}
