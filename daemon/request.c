/* SPDX-License-Identifier: MIT */
#include "daemon/request.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
        const char *name;
        bool privileged;
        bool read;
} commands[NPF_COMMAND__COUNT] = {
        [NPF_COMMAND_STATUS] = { "status", false, true },
        [NPF_COMMAND_RANKS] = { "ranks", false, true },
        [NPF_COMMAND_WINDOWS] = { "windows", false, true },
        [NPF_COMMAND_CONFIG] = { "config", false, true },
        [NPF_COMMAND_RELOAD] = { "reload", true, false },
        [NPF_COMMAND_METRICS] = { "metrics", false, true },
};

int npf_linebuf_append(npf_linebuf_t *b, const char *data, size_t n)
{
        size_t tail = b->tail;

        /* Every line, complete or not, is checked before anything is kept. */
        for (const char *p = data, *end = data + n; p < end;) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                size_t piece = (size_t) ((nl ? nl : end) - p);
                if (tail + piece > NPF_PROTO_REQUEST_MAX)
                        return -EMSGSIZE;
                tail = nl ? 0 : tail + piece;
                p = nl ? nl + 1 : end;
        }
        if (b->start > 0) {
                memmove(b->buf, b->buf + b->start, b->len - b->start);
                b->len -= b->start;
                b->start = 0;
        }
        if (b->len + n + 1 > b->size) {
                size_t size = b->size ? b->size : 512;
                while (size < b->len + n + 1)
                        size *= 2;
                char *buf = realloc(b->buf, size);
                if (!buf)
                        return -ENOMEM;
                b->buf = buf;
                b->size = size;
        }
        if (n > 0)
                memcpy(b->buf + b->len, data, n);
        b->len += n;
        b->tail = tail;
        return 0;
}

int npf_linebuf_next(npf_linebuf_t *b, char **ret_line, size_t *ret_len)
{
        /* [start, len - tail) holds complete lines only. */
        while (b->start < b->len - b->tail) {
                char *line = b->buf + b->start;
                char *nl = memchr(line, '\n', b->len - b->tail - b->start);
                size_t n = (size_t) (nl - line);
                b->start += n + 1;
                if (n == 0)
                        continue;
                char *copy = malloc(n + 1);
                if (!copy)
                        return -ENOMEM;
                memcpy(copy, line, n);
                copy[n] = '\0';
                *ret_line = copy;
                *ret_len = n;
                return 1;
        }
        /* Nothing but a partial line left: a large buffer that held a burst is given back. */
        if (b->tail == 0 && b->size > 4096)
                npf_linebuf_clear(b);
        return 0;
}

bool npf_linebuf_partial(const npf_linebuf_t *b)
{
        return b->tail > 0;
}

void npf_linebuf_clear(npf_linebuf_t *b)
{
        free(b->buf);
        *b = (npf_linebuf_t) { 0 };
}

/* The length of the valid UTF-8 sequence at @p (at most @n bytes), or 0 if there is none. */
static size_t utf8_sequence(const unsigned char *p, size_t n)
{
        size_t len;
        uint32_t cp;

        if (p[0] < 0x80)
                return 1;
        if (p[0] >= 0xc2 && p[0] <= 0xdf)
                len = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                len = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                len = 4, cp = p[0] & 0x07;
        else
                return 0;
        if (len > n)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        return len;
}

/*
 * Make @s valid UTF-8 in place, each byte that is not part of a valid sequence becoming
 * '?': jansson quotes the bytes near a syntax error, and a cut can split a character, but
 * a reply's error must be a JSON string.
 */
static void utf8_scrub(char *s)
{
        unsigned char *p = (unsigned char *) s;
        size_t n = strlen(s);

        for (size_t i = 0; i < n;) {
                size_t len = utf8_sequence(p + i, n - i);
                if (len == 0) {
                        p[i++] = '?';
                        continue;
                }
                i += len;
        }
}

int npf_request_parse(const char *line, size_t len, json_t **ret_request, npf_command_t *ret_command, char *err,
                      size_t err_size)
{
        json_error_t jerr;
        json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        json_t *version, *command;
        const char *name;
        int r = -EPROTO;

        if (!req) {
                snprintf(err, err_size, "the request is not a JSON object: %s", jerr.text);
                utf8_scrub(err);
                return -EPROTO;
        }
        if (!json_is_object(req)) {
                snprintf(err, err_size, "the request is not a JSON object");
                goto fail;
        }
        version = json_object_get(req, "version");
        if (version && !json_is_integer(version)) {
                snprintf(err, err_size, "the protocol version must be an integer: this daemon speaks version %d",
                         NPF_PROTO_VERSION);
                goto fail;
        }
        if (!version) {
                snprintf(err, err_size, "the request has no protocol version: this daemon speaks version %d",
                         NPF_PROTO_VERSION);
                goto fail;
        }
        if (json_integer_value(version) != NPF_PROTO_VERSION) {
                snprintf(err, err_size, "protocol version %" JSON_INTEGER_FORMAT " is not supported: this daemon speaks "
                         "version %d", json_integer_value(version), NPF_PROTO_VERSION);
                goto fail;
        }
        r = -EINVAL;
        command = json_object_get(req, "command");
        if (!json_is_string(command)) {
                snprintf(err, err_size, "the request has no command");
                goto fail;
        }
        name = json_string_value(command);
        for (npf_command_t c = 0; c < NPF_COMMAND__COUNT; c++)
                /* json_string_length(): a name with a NUL inside is no command's name. */
                if (strlen(commands[c].name) == json_string_length(command) && strcmp(commands[c].name, name) == 0) {
                        *ret_request = req;
                        *ret_command = c;
                        return 0;
                }
        /* %.64s stops at a NUL inside the name, and cuts a long one. */
        snprintf(err, err_size, "unknown command '%.64s': known are status, ranks, windows, config, reload, metrics",
                 name);
        utf8_scrub(err);
fail:
        json_decref(req);
        return r;
}

const char *npf_command_name(npf_command_t c)
{
        return c < NPF_COMMAND__COUNT ? commands[c].name : NULL;
}

bool npf_command_privileged(npf_command_t c)
{
        return c < NPF_COMMAND__COUNT && commands[c].privileged;
}

bool npf_command_is_read_only(npf_command_t c)
{
        return c < NPF_COMMAND__COUNT && commands[c].read;
}
