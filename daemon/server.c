/* SPDX-License-Identifier: MIT */
#include "daemon/server.h"
#include "daemon/request.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#define WRITE_QUEUE_MAX (4u << 20)      /* a client that does not read its replies is dropped */
#define REPLY_HINT_MIN 512u             /* bytes first allocated for a reply */
#define WRITE_BACKLOG   (64u << 10)     /* past this much unread, its next requests wait */
#define LINES_PER_TURN  8               /* a batch of requests is answered this many at a loop turn */
#define EVICT_SCAN      64              /* when full, how many of the longest idle are looked at */

typedef struct client client_t;
TAILQ_HEAD(client_list, client);

struct npf_request {
        client_t *client;               /* NULL once the client has gone */
        npf_command_t command;
        uint64_t asked_ns;              /* uv_hrtime() when it was handed to the daemon */
        size_t line_len;
        char line[];                    /* the request line */
};

/*
 * The last answer to each read (npf_command_is_read_only()). What it tells is newer than any request
 * that arrived before it was asked, so such a request, waiting in a buffer while the same
 * request was answered, gets that answer again: as true as a new one, and a client that
 * asks faster than the daemon answers costs it one answer per batch, not one per request.
 */
typedef struct shared_answer {
        char *request;                  /* the request line */
        size_t request_len;
        char *reply;                    /* the reply line, with its newline */
        size_t reply_len;
        uint64_t asked_ns;
} shared_answer_t;

struct client {
        uv_pipe_t pipe;
        uv_timer_t idle;
        npf_server_t *server;
        TAILQ_ENTRY(client) by_activity;        /* in the server's list, the most recently active first */
        TAILQ_ENTRY(client) ready_link;         /* in the server's ready list, while @ready */
        bool ready;                     /* holds requests to answer at the next turn */
        npf_peer_t peer;
        npf_linebuf_t in;
        npf_request_t *pending;         /* the request being answered */
        bool eof;                       /* the client sent all it will: answer, then close */
        uint64_t read_ns;               /* uv_hrtime() of the last read: what is buffered came before */
        bool reading;
        bool processing;
        bool closing;
        int open_handles;
};

struct npf_server {
        uv_loop_t *loop;
        uv_pipe_t listener;
        char *path;                     /* the file we bound, NULL when activated */
        bool activated;
        bool closing;
        unsigned clients;
        unsigned clients_max;
        uint64_t idle_ms;
        uint64_t evicted;
        struct client_list by_activity;
        uv_idle_t turn;                 /* runs while clients are ready */
        struct client_list ready;
        int open_handles;
        npf_server_request_cb cb;
        void *data;
        size_t reply_hint;              /* bytes to allocate for the next reply */
        shared_answer_t answers[NPF_COMMAND__COUNT];
        uint64_t shared;                /* requests answered with a shared answer */
        char rbuf[16384];
};

static void client_close(client_t *c);
static void client_process(client_t *c);
static void client_resume(client_t *c);

static void on_client_handle_closed(uv_handle_t *h)
{
        client_t *c = h->data;

        if (--c->open_handles > 0)
                return;
        npf_linebuf_clear(&c->in);
        free(c);
}

static void ready_remove(npf_server_t *s, client_t *c)
{
        if (!c->ready)
                return;
        TAILQ_REMOVE(&s->ready, c, ready_link);
        c->ready = false;
}

static void on_turn(uv_idle_t *h);

/* Queue @c to answer more of its requests at the next loop turn, after the other clients. */
static void ready_push(npf_server_t *s, client_t *c)
{
        if (c->ready)
                return;
        c->ready = true;
        TAILQ_INSERT_TAIL(&s->ready, c, ready_link);
        uv_idle_start(&s->turn, on_turn);
}

static void client_close(client_t *c)
{
        npf_server_t *s = c->server;

        if (c->closing)
                return;
        c->closing = true;
        ready_remove(s, c);
        if (c->pending)
                c->pending->client = NULL;
        TAILQ_REMOVE(&s->by_activity, c, by_activity);
        s->clients--;
        uv_timer_stop(&c->idle);
        uv_close((uv_handle_t *) &c->idle, on_client_handle_closed);
        uv_close((uv_handle_t *) &c->pipe, on_client_handle_closed);
}

typedef struct write_req {
        uv_write_t req;
        client_t *client;
        bool close_after;
        char data[];
} write_req_t;

static void on_written(uv_write_t *req, int status)
{
        write_req_t *w = (write_req_t *) req;
        client_t *c = w->client;

        if ((status < 0 || w->close_after) && !c->closing)
                client_close(c);
        else if (!c->closing && !c->reading)
                client_resume(c);
        free(w);
}

static json_t *error_reply(const char *fmt, va_list ap)
{
        char msg[512];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        return json_pack("{s:i, s:b, s:s}", "version", NPF_PROTO_VERSION, "ok", 0, "error", msg);
}

/* A reply written straight into the write request that carries it, grown as needed. */
typedef struct reply_text {
        write_req_t *w;
        size_t len, cap;
} reply_text_t;

static int append_reply(const char *buf, size_t size, void *data)
{
        reply_text_t *t = data;

        if (t->len + size + 1 > t->cap) {       /* + 1: the newline that ends the line */
                size_t cap = 2 * (t->len + size + 1);
                write_req_t *w = realloc(t->w, sizeof(*w) + cap);
                if (!w)
                        return -1;
                t->w = w;
                t->cap = cap;
        }
        memcpy(t->w->data + t->len, buf, size);
        t->len += size;
        return 0;
}

/* @reply (the reference is taken) as one line in a write request, @t. Return: false if it cannot be. */
static bool render(npf_server_t *s, json_t *reply, reply_text_t *t)
{
        /* Sized as the last reply: a status is written without growing its buffer. */
        *t = (reply_text_t) { .w = malloc(sizeof(write_req_t) + s->reply_hint), .cap = s->reply_hint };
        /* 15 digits: a number such as an analysis's 0.037 s is written so, not 0.036999999999999998. */
        bool ok = t->w && reply &&
                  json_dump_callback(reply, append_reply, t, JSON_COMPACT | JSON_REAL_PRECISION(15)) == 0 &&
                  append_reply("\n", 1, t) == 0;
        json_decref(reply);
        if (!ok) {
                free(t->w);
                return false;
        }
        s->reply_hint = t->len > REPLY_HINT_MIN ? t->len + t->len / 8 : REPLY_HINT_MIN;
        return true;
}

/* Write the line in @t (its write request is taken); close the connection after it when @close_after. */
static void client_write(client_t *c, reply_text_t *t, bool close_after)
{
        if (c->closing) {
                free(t->w);
                return;
        }
        t->w->client = c;
        t->w->close_after = close_after;
        uv_buf_t buf = uv_buf_init(t->w->data, (unsigned) t->len);
        if (uv_write(&t->w->req, (uv_stream_t *) &c->pipe, &buf, 1, on_written) < 0) {
                free(t->w);
                client_close(c);
                return;
        }
        if (uv_stream_get_write_queue_size((uv_stream_t *) &c->pipe) > WRITE_QUEUE_MAX)
                client_close(c);
}

/* Send one reply line (taking the reference); close the connection after it when @close_after. */
static void client_send(client_t *c, json_t *reply, bool close_after)
{
        reply_text_t t;

        if (!render(c->server, reply, &t)) {
                client_close(c);
                return;
        }
        client_write(c, &t, close_after);
}

static void client_error(client_t *c, bool close_after, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void client_error(client_t *c, bool close_after, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        client_send(c, error_reply(fmt, ap), close_after);
        va_end(ap);
}

/*
 * Close @c at once, telling it why if its socket takes the line now: a client that does
 * not read must not keep its descriptor through a queued write.
 */
static void client_drop(client_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void client_drop(client_t *c, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        json_t *reply = error_reply(fmt, ap);
        va_end(ap);
        char *text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
        json_decref(reply);
        if (text && uv_stream_get_write_queue_size((uv_stream_t *) &c->pipe) == 0) {
                size_t n = strlen(text);
                text[n] = '\n';         /* over the NUL: the line is sent by its length */
                uv_buf_t buf = uv_buf_init(text, (unsigned) n + 1);
                (void) uv_try_write((uv_stream_t *) &c->pipe, &buf, 1);
        }
        free(text);
        client_close(c);
}

/* Whether the answer now being sent to @c is its last: it half-closed after its last request. */
static bool client_last_answer(const client_t *c)
{
        return c->eof && c->in.start == c->in.len;
}

/* Keep the answer @t to the read @req, unless a newer one is kept. */
static void keep_answer(npf_server_t *s, const npf_request_t *req, const reply_text_t *t)
{
        shared_answer_t *a = &s->answers[req->command];
        char *request, *reply;

        if (a->reply && a->asked_ns > req->asked_ns)
                return;
        request = realloc(a->request, req->line_len ? req->line_len : 1);
        if (request)
                a->request = request;
        reply = realloc(a->reply, t->len);
        if (reply)
                a->reply = reply;
        if (!request || !reply) {
                a->asked_ns = 0;        /* shared with nobody */
                return;
        }
        memcpy(a->request, req->line, req->line_len);
        a->request_len = req->line_len;
        memcpy(a->reply, t->w->data, t->len);
        a->reply_len = t->len;
        a->asked_ns = req->asked_ns;
}

/* Answer the request @line with the same request's kept answer, if it was asked after this one came. */
static bool share_answer(client_t *c, npf_command_t command, const char *line, size_t len)
{
        npf_server_t *s = c->server;
        const shared_answer_t *a = &s->answers[command];

        if (!npf_command_is_read_only(command) || !a->reply || c->read_ns >= a->asked_ns || len != a->request_len ||
            memcmp(line, a->request, len) != 0)
                return false;
        reply_text_t t = { .w = malloc(sizeof(write_req_t) + a->reply_len), .len = a->reply_len };
        if (!t.w)
                return false;
        memcpy(t.w->data, a->reply, a->reply_len);
        s->shared++;
        client_write(c, &t, client_last_answer(c));
        return true;
}

static void finish_request(npf_request_t *req, json_t *reply, bool ok)
{
        client_t *c = req->client;
        reply_text_t t;

        if (!c) {
                free(req);
                json_decref(reply);
                return;
        }
        c->pending = NULL;
        if (!render(c->server, reply, &t)) {
                free(req);
                client_close(c);
                return;
        }
        if (ok && npf_command_is_read_only(req->command))
                keep_answer(c->server, req, &t);
        free(req);
        /* A client that half-closed after its last request still gets the answer. */
        client_write(c, &t, client_last_answer(c));
        client_resume(c);
}

void npf_server_reply(npf_request_t *req, json_t *result)
{
        finish_request(req, json_pack("{s:i, s:b, s:o}", "version", NPF_PROTO_VERSION, "ok", 1, "result",
                                      result ? result : json_null()), true);
}

void npf_server_reply_error(npf_request_t *req, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        json_t *reply = error_reply(fmt, ap);
        va_end(ap);
        finish_request(req, reply, false);
}

/* Handle one request line; errors that end the conversation close the connection. */
static void handle_line(client_t *c, const char *line, size_t len)
{
        npf_server_t *s = c->server;
        char err[256];
        json_t *req;
        npf_command_t command;
        int r = npf_request_parse(line, len, &req, &command, err, sizeof(err));

        /* A complete request is activity: the idle clock restarts, and it is the last to be evicted. */
        uv_timer_again(&c->idle);
        TAILQ_REMOVE(&s->by_activity, c, by_activity);
        TAILQ_INSERT_HEAD(&s->by_activity, c, by_activity);
        if (r < 0) {
                client_error(c, r == -EPROTO, "%s", err);
                return;
        }
        if (share_answer(c, command, line, len)) {
                json_decref(req);
                return;
        }
        npf_request_t *rq = calloc(1, sizeof(*rq) + len);
        if (!rq) {
                client_error(c, true, "out of memory");
                json_decref(req);
                return;
        }
        rq->client = c;
        rq->command = command;
        memcpy(rq->line, line, len);
        rq->line_len = len;
        rq->asked_ns = uv_hrtime();
        c->pending = rq;
        s->cb(rq, command, req, &c->peer, s->data);
        json_decref(req);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
        client_t *c = h->data;

        (void) suggested;
        *buf = uv_buf_init(c->server->rbuf, sizeof(c->server->rbuf));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

/* Stop or start reading: only while nothing is pending and the replies are being read. */
static void client_set_reading(client_t *c, bool on)
{
        if (c->closing || c->reading == on)
                return;
        c->reading = on;
        if (on)
                uv_read_start((uv_stream_t *) &c->pipe, on_alloc, on_read);
        else
                uv_read_stop((uv_stream_t *) &c->pipe);
}

static bool client_backlogged(client_t *c)
{
        return uv_stream_get_write_queue_size((uv_stream_t *) &c->pipe) > WRITE_BACKLOG;
}

/*
 * Answer the complete lines in the buffer, one at a time, while nothing is pending and the
 * client reads its replies; after LINES_PER_TURN of them the rest waits for the next loop
 * turn, so that a batch of requests does not hold up other clients. A reply given from
 * inside the callback lands back here; the flag keeps that from recursing.
 */
static void client_process(client_t *c)
{
        char *line;
        size_t n;
        int handled = 0;

        if (c->processing || c->ready)
                return;
        c->processing = true;
        while (!c->closing && !c->pending && !client_backlogged(c)) {
                if (handled == LINES_PER_TURN) {
                        if (c->in.start < c->in.len - c->in.tail)
                                ready_push(c->server, c);
                        break;
                }
                int r = npf_linebuf_next(&c->in, &line, &n);
                if (r < 0)
                        client_close(c);
                if (r <= 0)
                        break;
                handle_line(c, line, n);
                free(line);
                handled++;
        }
        c->processing = false;
}

/* After a reply or a drained write queue: answer what waits, then read on or finish. */
static void client_resume(client_t *c)
{
        if (c->processing)
                return;         /* a reply given while answering: the loop answering goes on */
        client_process(c);
        if (c->closing || c->pending || c->ready || client_backlogged(c))
                return;
        if (c->eof) {
                if (c->in.start == c->in.len && uv_stream_get_write_queue_size((uv_stream_t *) &c->pipe) == 0)
                        client_close(c);
                return;
        }
        client_set_reading(c, true);
}

/* A loop turn: each client that was ready answers its next requests, in the order queued. */
static void on_turn(uv_idle_t *h)
{
        npf_server_t *s = h->data;
        client_t *last = TAILQ_LAST(&s->ready, client_list), *c;

        while ((c = TAILQ_FIRST(&s->ready))) {
                ready_remove(s, c);
                client_resume(c);
                if (c == last)
                        break;
        }
        if (TAILQ_EMPTY(&s->ready))
                uv_idle_stop(&s->turn);
}

static void on_idle(uv_timer_t *t)
{
        client_t *c = t->data;

        if (c->pending)
                return;         /* the daemon is still answering: not the client's silence */
        client_drop(c, npf_linebuf_partial(&c->in) ? "closed: the request line was not finished within %" PRIu64 " ms"
                                                   : "closed: no request for %" PRIu64 " ms", c->server->idle_ms);
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
        client_t *c = stream->data;

        if (nread == UV_EOF) {
                c->eof = true;
                client_set_reading(c, false);
                if (npf_linebuf_partial(&c->in)) {
                        client_error(c, true, "the connection was shut down in the middle of a request line "
                                     "(a request ends with a newline)");
                        return;
                }
                client_resume(c);
                return;
        }
        if (nread < 0) {
                client_close(c);
                return;
        }
        if (nread == 0)
                return;
        c->read_ns = uv_hrtime();
        int r = npf_linebuf_append(&c->in, buf->base, (size_t) nread);
        if (r == -EMSGSIZE) {
                client_set_reading(c, false);
                client_error(c, true, "a request line may be at most %d bytes", NPF_PROTO_REQUEST_MAX);
                return;
        }
        if (r < 0) {
                client_close(c);
                return;
        }
        client_process(c);
        /* Deferred, queued or backlogged: read nothing more for now; the socket buffer holds the rest. */
        if (!c->closing && (c->pending || c->ready || client_backlogged(c)))
                client_set_reading(c, false);
}

/* Whether @c waits for nothing from us: no request of it is being answered or written, and none is
 * waiting unread in its socket (accepting a burst of connections runs before their first reads). */
static bool client_idle(client_t *c)
{
        uv_os_fd_t fd;
        int unread = 0;

        if (c->pending || c->ready || uv_stream_get_write_queue_size((uv_stream_t *) &c->pipe) > 0)
                return false;
        return uv_fileno((uv_handle_t *) &c->pipe, &fd) == 0 && ioctl(fd, FIONREAD, &unread) == 0 &&
               unread == 0;
}

/* The connection to close for @newest when the table is full: the longest without a request that
 * is idle, among the EVICT_SCAN longest; NULL if all of those are busy. */
static client_t *idlest_client(npf_server_t *s, client_t *newest)
{
        client_t *c = TAILQ_LAST(&s->by_activity, client_list);

        for (unsigned i = 0; c && c != newest && i < EVICT_SCAN; i++, c = TAILQ_PREV(c, client_list, by_activity))
                if (client_idle(c))
                        return c;
        return NULL;
}

static void on_connection(uv_stream_t *listener, int status)
{
        npf_server_t *s = listener->data;
        client_t *c;

        if (status < 0 || s->closing)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return;
        c->server = s;
        uv_pipe_init(s->loop, &c->pipe, 0);
        uv_timer_init(s->loop, &c->idle);
        c->pipe.data = c->idle.data = c;
        c->open_handles = 2;
        TAILQ_INSERT_HEAD(&s->by_activity, c, by_activity);
        s->clients++;
        if (uv_accept(listener, (uv_stream_t *) &c->pipe) < 0) {
                client_close(c);
                return;
        }
        uv_os_fd_t fd;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (uv_fileno((uv_handle_t *) &c->pipe, &fd) == 0 &&
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
                c->peer = (npf_peer_t) { .pid = cred.pid, .uid = cred.uid, .gid = cred.gid };
        else
                c->peer = (npf_peer_t) { .pid = 0, .uid = (uid_t) -1, .gid = (gid_t) -1 };
        /* Full: the connection that has gone longest without a request makes room, or this one goes. */
        if (s->clients > s->clients_max) {
                client_t *idlest = idlest_client(s, c);
                if (idlest) {
                        s->evicted++;
                        client_drop(idlest, "closed to admit a new connection: %u are open, the most at once, "
                                    "and this one had been idle longest", s->clients_max);
                } else {
                        client_drop(c, "closed: %u connections are open, the most at once, and every one "
                                    "of the longest idle is being answered", s->clients_max);
                        return;
                }
        }
        uv_timer_start(&c->idle, on_idle, s->idle_ms, s->idle_ms);
        client_set_reading(c, true);
}

/* Remove @path if it is a socket nobody answers on. Return: 0, or -EADDRINUSE / -ENOTSOCK. */
static int clear_stale_socket(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct stat st;
        int fd, r;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        r = connect(fd, (struct sockaddr *) &sa, sizeof(sa));
        close(fd);
        if (r == 0)
                return -EADDRINUSE;
        return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

int npf_server_start(uv_loop_t *loop, const char *path, const char *group, const npf_server_limits_t *limits,
                     npf_server_request_cb cb, void *data, npf_server_t **ret_server, char *err)
{
        npf_server_t *s = calloc(1, sizeof(*s));
        int r, n;

        if (!s)
                return -ENOMEM;
        s->loop = loop;
        TAILQ_INIT(&s->by_activity);
        TAILQ_INIT(&s->ready);
        s->clients_max = limits->clients_max ? limits->clients_max : 1;
        s->idle_ms = limits->idle_ms ? limits->idle_ms : NPF_PROTO_IDLE_MS;
        s->reply_hint = REPLY_HINT_MIN;
        s->cb = cb;
        s->data = data;
        uv_pipe_init(loop, &s->listener, 0);
        uv_idle_init(loop, &s->turn);
        s->listener.data = s->turn.data = s;
        s->open_handles = 2;

        n = sd_listen_fds(1);
        if (n > 0) {
                if (n != 1 || sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
                        snprintf(err, 256, "systemd passed %d sockets; expected one listening Unix stream socket", n);
                        r = -EINVAL;
                        goto fail;
                }
                r = uv_pipe_open(&s->listener, SD_LISTEN_FDS_START);
                if (r < 0) {
                        snprintf(err, 256, "cannot use the socket systemd passed: %s", uv_strerror(r));
                        goto fail;
                }
                s->activated = true;
        } else {
                r = clear_stale_socket(path);
                if (r < 0) {
                        if (r == -EADDRINUSE)
                                snprintf(err, 256, "another daemon answers on %s: stop it first (systemctl stop "
                                         "npuprofd.socket npuprofd.service), or give this one another --socket PATH",
                                         path);
                        else if (r == -ENOTSOCK)
                                snprintf(err, 256, "%s exists and is not a socket: remove it, or give --socket "
                                         "another path", path);
                        else
                                snprintf(err, 256, "cannot replace %s: %s", path, strerror(-r));
                        goto fail;
                }
                r = uv_pipe_bind(&s->listener, path);
                if (r < 0) {
                        struct stat dst;
                        char *dir = strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
                        if (slash && slash != dir)
                                *slash = '\0';
                        if (slash && slash != dir && stat(dir, &dst) < 0)
                                snprintf(err, 256, "cannot bind %s: the directory %s does not exist: create it, "
                                         "or give --socket a path in another", path, dir);
                        else if (r == UV_EACCES)
                                snprintf(err, 256, "cannot bind %s: permission denied: run as a user who may "
                                         "write its directory, or give --socket a path in one you may write", path);
                        else
                                snprintf(err, 256, "cannot bind %s: %s", path, uv_strerror(r));
                        free(dir);
                        goto fail;
                }
                s->path = strdup(path);
                gid_t gid = (gid_t) -1;
                if (group) {
                        struct group *g = getgrnam(group);
                        if (!g) {
                                snprintf(err, 256, "no such group '%s' for the socket", group);
                                r = -ENOENT;
                                goto fail;
                        }
                        gid = g->gr_gid;
                }
                if (chmod(path, 0660) < 0 || (gid != (gid_t) -1 && chown(path, (uid_t) -1, gid) < 0)) {
                        r = -errno;
                        snprintf(err, 256, "cannot set the mode or group of %s: %s", path, strerror(errno));
                        goto fail;
                }
        }
        /* A burst of connections waits in the kernel's queue rather than being refused. */
        r = uv_listen((uv_stream_t *) &s->listener, SOMAXCONN, on_connection);
        if (r < 0) {
                snprintf(err, 256, "cannot listen: %s", uv_strerror(r));
                goto fail;
        }
        *ret_server = s;
        return 0;
fail:
        npf_server_close(s);
        return r;
}

static void on_listener_closed(uv_handle_t *h)
{
        npf_server_t *s = h->data;

        if (--s->open_handles > 0)
                return;
        for (size_t i = 0; i < NPF_COMMAND__COUNT; i++) {
                free(s->answers[i].request);
                free(s->answers[i].reply);
        }
        free(s->path);
        free(s);
}

void npf_server_close(npf_server_t *s)
{
        if (!s || s->closing)
                return;
        s->closing = true;
        while (!TAILQ_EMPTY(&s->by_activity))
                client_close(TAILQ_FIRST(&s->by_activity));
        if (s->path)
                unlink(s->path);
        uv_close((uv_handle_t *) &s->turn, on_listener_closed);
        uv_close((uv_handle_t *) &s->listener, on_listener_closed);
}

bool npf_server_activated(const npf_server_t *s)
{
        return s->activated;
}

unsigned npf_server_clients(const npf_server_t *s)
{
        return s->clients;
}

unsigned npf_server_clients_max(const npf_server_t *s)
{
        return s->clients_max;
}

uint64_t npf_server_shared(const npf_server_t *s)
{
        return s->shared;
}

uint64_t npf_server_evicted(const npf_server_t *s)
{
        return s->evicted;
}
