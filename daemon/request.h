/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's request path, without sockets: the line framing of one
 * connection's bytes, the parsing of a line into a request, and the table of commands.
 * daemon/server.c runs its connections through it and tests/fuzz/fuzz-proto.c fuzzes it,
 * so both run the same code. Pure: no I/O, no logging, nothing global.
 */
#ifndef NPUPROF_DAEMON_REQUEST_H
#define NPUPROF_DAEMON_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The bytes a connection sent that are not answered yet. Zero-initialized is empty. */
typedef struct npf_linebuf {
        char *buf;                      /* grows as a line does, up to NPF_PROTO_REQUEST_MAX + 1 */
        size_t start;                   /* where the first line not taken out begins */
        size_t len;                     /* where the bytes held end */
        size_t size;                    /* bytes allocated */
        size_t tail;                    /* bytes of the last line, whose newline has not come */
} npf_linebuf_t;

/*
 * npf_linebuf_append() - add @n received bytes.
 * Return: 0; -EMSGSIZE when the line they belong to would exceed NPF_PROTO_REQUEST_MAX
 * bytes before its newline (nothing is added); -ENOMEM.
 */
int npf_linebuf_append(npf_linebuf_t *b, const char *data, size_t n);

/*
 * npf_linebuf_next() - take the next complete line out of @b, without its newline. Empty
 * lines are skipped. The line is NUL-terminated and owned by the caller (free()).
 * Return: 1 with the line, 0 when no complete line is held, -ENOMEM.
 */
int npf_linebuf_next(npf_linebuf_t *b, char **ret_line, size_t *ret_len);

/* Whether @b holds the start of a line whose newline has not come. */
bool npf_linebuf_partial(const npf_linebuf_t *b);

/* Free what @b holds; it is empty again afterwards. */
void npf_linebuf_clear(npf_linebuf_t *b);

/* The commands, in the order `unknown command` lists them. */
typedef enum npf_command {
        NPF_COMMAND_STATUS,
        NPF_COMMAND_RANKS,
        NPF_COMMAND_WINDOWS,
        NPF_COMMAND_CONFIG,
        NPF_COMMAND_RELOAD,
        NPF_COMMAND_METRICS,
        NPF_COMMAND__COUNT,
} npf_command_t;

/*
 * npf_request_parse() - one request line (without its newline) to a request.
 * On success *@ret_request is the parsed object (the caller's reference) and
 * *@ret_command its command.
 * Return: 0; -EPROTO when the connection must be closed after the error (not JSON, not an
 * object, no or another protocol version); -EINVAL when the error is answered and the
 * connection stays open (no command, unknown command). @err (at least 256 bytes) says why.
 */
int npf_request_parse(const char *line, size_t len, json_t **ret_request, npf_command_t *ret_command, char *err,
                      size_t err_size);

/* The name of @c, as a request spells it. */
const char *npf_command_name(npf_command_t c);

/* Whether @c is only for root and the daemon's own user. */
bool npf_command_privileged(npf_command_t c);

/*
 * Whether @c only reads: its answer depends on the daemon's state alone (not on who asks,
 * and it changes nothing), so one answer serves every such request made before it was
 * computed.
 */
bool npf_command_is_read_only(npf_command_t c);

#endif /* NPUPROF_DAEMON_REQUEST_H */
