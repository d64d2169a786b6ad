/* SPDX-License-Identifier: MIT */
/*
 * A monitoring agent asking npuprofd for `status` RATE times a second over one connection,
 * as an open loop: each request is due at an absolute deadline and is sent whether or not
 * the one before was answered (the protocol answers in order), so a slow answer cannot slow
 * the asking and hide itself. A latency runs from the moment a request was sent whole to the
 * moment its answer was read; how late this client's own timer sent it is counted apart,
 * being this machine's and not the daemon's. Every answer is checked in full: ok, and the
 * whole rank table, every row as wide as the columns (an answer the same to the byte as the
 * one before is the same answer). The answers are kept and checked after the run: parsing
 * a thousand tables a second would take this client most of a core, which on a small
 * machine is taken from the daemon it measures.
 *
 * It asks until the file DONE exists (or for at most 120 s), waits for the last answers and
 * prints two lines:
 *
 *   sent N answered N bad N seconds S rate R p50 MS p99 MS max MS late-p50 MS late-p99 MS
 *   P99-OF-SECOND-0 P99-OF-SECOND-1 ...
 *
 * An answer to no request, or a last one cut short, counts as bad. It exits 1 when the run
 * ended early (the connection closed, a send or receive failed, answers stopped coming for
 * 5 s), saying why on stderr, 2 on bad usage.
 *
 * Usage: status-load SOCKET DONE RATE
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REQUEST "{\"version\": 2, \"command\": \"status\"}\n"
#define MAX_SECONDS 120
#define MAX_RATE 20000
#define MAX_REQUESTS (MAX_SECONDS * MAX_RATE)

static const size_t request_len = sizeof(REQUEST) - 1;

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
        double x = *(const double *) a, y = *(const double *) b;

        return (x > y) - (x < y);
}

/* The @p quantile of @n values (sorted here), in milliseconds. */
static double quantile_ms(double *v, size_t n, double p)
{
        if (n == 0)
                return 0.0 / 0.0;
        qsort(v, n, sizeof(*v), by_value);
        size_t i = (size_t) (p * (double) n);
        return v[i < n ? i : n - 1] * 1000;
}

/* An answer as a monitoring agent needs it: ok, and the rank table whole. */
static bool answer_good(const char *line, size_t len)
{
        json_t *o = json_loadb(line, len, 0, NULL);
        json_t *t = json_object_get(json_object_get(o, "result"), "ranks");
        json_t *columns = json_object_get(t, "columns"), *rows = json_object_get(t, "rows"), *row;
        bool good = json_is_true(json_object_get(o, "ok")) && json_is_array(columns) && json_is_array(rows);
        size_t i;

        json_array_foreach (rows, i, row)
                good &= json_is_array(row) && json_array_size(row) == json_array_size(columns);
        json_decref(o);
        return good;
}

/* Out of memory in a test client: said, and the run fails. */
static void *need(void *p)
{
        if (!p) {
                fprintf(stderr, "status-load: out of memory\n");
                exit(1);
        }
        return p;
}

static int connect_to(const char *path)
{
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "status-load: %s: the path is too long for a socket\n", path);
                exit(2);
        }
        memcpy(sa.sun_path, path, strlen(path) + 1);
        /* Connected blocking, then never blocked: sends must not wait while answers do. */
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ||
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
                perror("status-load: connect");
                exit(1);
        }
        return fd;
}

int main(int argc, char **argv)
{
        int rate = argc == 4 ? atoi(argv[3]) : 0;

        if (rate <= 0 || rate > MAX_RATE) {
                fprintf(stderr, "usage: status-load SOCKET DONE RATE (1 to %d a second)\n", MAX_RATE);
                return 2;
        }
        const char *done = argv[2], *broken = NULL;     /* broken: why the run ended early */
        double period = 1.0 / rate;
        int fd = connect_to(argv[1]);
        /* Per request: its deadline, when it was sent whole, its latency, where its answer ends. */
        double *due = need(calloc(MAX_REQUESTS, sizeof(double))), *sent_at = need(calloc(MAX_REQUESTS, sizeof(double)));
        double *lat = need(calloc(MAX_REQUESTS, sizeof(double))), *late = need(calloc(MAX_REQUESTS, sizeof(double)));
        size_t *ends = need(calloc(MAX_REQUESTS, sizeof(size_t)));
        size_t in_cap = 1 << 20, in_len = 0, kept_cap = 64 << 20, kept_len = 0;
        char *in = need(malloc(in_cap)), *kept = need(malloc(kept_cap));
        size_t queued = 0, sent = 0, answered = 0, surplus = 0, out_off = 0;   /* out_off: bytes of request #sent out */
        double t0 = now_s(), next = t0;
        bool asking = true;

        for (;;) {
                double now = now_s();
                if (asking && (access(done, F_OK) == 0 || now - t0 > MAX_SECONDS))
                        asking = false;
                if (!asking && answered == sent && sent == queued)
                        break;
                while (asking && now >= next && queued < MAX_REQUESTS) {
                        due[queued++] = next;
                        next += period;
                }
                /* Send what is due, whole requests counted as sent the moment they are. */
                while (sent < queued) {
                        ssize_t n = send(fd, REQUEST + out_off, request_len - out_off, MSG_NOSIGNAL);
                        if (n < 0 && errno != EAGAIN && errno != EINTR)
                                broken = "a send failed";
                        if (n < 0)
                                break;
                        out_off += (size_t) n;
                        if (out_off < request_len)
                                break;
                        now = now_s();
                        late[sent] = now - due[sent];
                        sent_at[sent++] = now;
                        out_off = 0;
                }
                if (broken)
                        break;
                double wait_s = asking ? next - now_s() : 5.0;
                struct timespec ts = { 0 };
                if (wait_s > 0) {
                        ts.tv_sec = (time_t) wait_s;
                        ts.tv_nsec = (long) ((wait_s - (double) ts.tv_sec) * 1e9);
                }
                struct pollfd p = { .fd = fd, .events = POLLIN | (sent < queued ? POLLOUT : 0) };
                int k = ppoll(&p, 1, &ts, NULL);
                if (k < 0 && errno != EINTR) {
                        perror("status-load: ppoll");
                        return 1;
                }
                if (k == 0 && !asking) {
                        broken = "answers stopped coming for 5 s";
                        break;
                }
                if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
                        continue;
                if (in_cap - in_len < 65536)
                        in = need(realloc(in, in_cap *= 2));
                ssize_t n = recv(fd, in + in_len, in_cap - in_len, 0);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        continue;
                if (n <= 0) {
                        broken = n == 0 ? "the daemon closed the connection" : "a receive failed";
                        break;
                }
                now = now_s();
                in_len += (size_t) n;
                char *line = in, *nl;
                while ((nl = memchr(line, '\n', in_len - (size_t) (line - in)))) {
                        size_t len = (size_t) (nl - line);
                        line = nl + 1;
                        if (answered == sent) {         /* an answer to no request */
                                surplus++;
                                continue;
                        }
                        lat[answered] = now - sent_at[answered];
                        while (kept_cap - kept_len < len)
                                kept = need(realloc(kept, kept_cap *= 2));
                        memcpy(kept + kept_len, nl - len, len);
                        ends[answered++] = kept_len += len;
                }
                in_len -= (size_t) (line - in);
                memmove(in, line, in_len);
        }
        double elapsed = now_s() - t0;
        /* Every answer checked; one the same to the byte as the one before is the same answer. */
        size_t bad = surplus + (in_len > 0);
        bool last_good = false;
        for (size_t i = 0, at = 0, last_at = 0, last_len = 0; i < answered; at = ends[i++]) {
                size_t len = ends[i] - at;
                if (i == 0 || len != last_len || memcmp(kept + at, kept + last_at, len) != 0)
                        last_good = answer_good(kept + at, len);
                bad += !last_good;
                last_at = at;
                last_len = len;
        }
        /* The p99 of the requests sent in each second ("-": none was), before the whole is sorted. */
        char seconds[8 * (MAX_SECONDS + 2)] = "";
        for (size_t i = 0, off = 0, s = 0; i < answered && off < sizeof(seconds); s++) {
                size_t j = i;
                while (j < answered && (size_t) (sent_at[j] - t0) == s)
                        j++;
                if (j > i)
                        off += (size_t) snprintf(seconds + off, sizeof(seconds) - off, "%s%.1f", s ? " " : "",
                                                 quantile_ms(lat + i, j - i, 0.99));
                else
                        off += (size_t) snprintf(seconds + off, sizeof(seconds) - off, "%s-", s ? " " : "");
                i = j;
        }
        double p50 = quantile_ms(lat, answered, 0.5), p99 = quantile_ms(lat, answered, 0.99);
        double max = quantile_ms(lat, answered, 1.0);
        double late50 = quantile_ms(late, sent, 0.5), late99 = quantile_ms(late, sent, 0.99);
        printf("sent %zu answered %zu bad %zu seconds %.2f rate %.0f p50 %.2f p99 %.2f max %.2f late-p50 %.2f "
               "late-p99 %.2f\n%s\n",
               sent, answered, bad, elapsed, (double) answered / elapsed, p50, p99, max, late50, late99, seconds);
        if (broken)
                fprintf(stderr, "status-load: %s (%zu sent, %zu answered, %zu queued)\n", broken, sent, answered,
                        queued);
        close(fd);
        free(due);
        free(sent_at);
        free(lat);
        free(late);
        free(ends);
        free(in);
        free(kept);
        return broken ? 1 : 0;
}
