/* SPDX-License-Identifier: MIT */
/*
 * ask-stacks: asks one rank for its stacks through its slot, as npuprofd does for a rank
 * that stalls, and waits for the answer.
 *
 *   ask-stacks --shm NAME --rank R [--timeout-ms MS]
 *
 * It maps the segment as a rank does (the rank table read-write), finds rank R's slot,
 * bumps its request word with npf_slot_ask_stacks() and waits, at most MS milliseconds
 * (10,000 by default), until the rank answers. Meanwhile it reads, every millisecond, each
 * file of <prof_dir>/stacks whose name does not start with a dot, as any reader would: each
 * must be whole (end with the line the rank writes last). It prints the path of the file
 * the rank wrote, <prof_dir>/stacks/rank<R>_pid<P>_<N>.txt, and exits 0; it exits 1 when
 * the rank answers with an error (said on stderr), 2 on a usage error, 3 when no answer
 * came in time, 4 when a reader saw a file cut short.
 */
#include "npuprof/shm.h"
#include "shm/slot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static uint64_t monotonic_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* Return: true if the file @name of directory @dir ends as a whole stacks file does. */
static bool whole(const char *dir, const char *name)
{
        static const char last[] = "\nend of the stacks of process ";
        char path[NPF_SHM_PATH_MAX + 300], tail[128];
        struct stat st;
        bool ok = false;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT;         /* renamed over meanwhile */
        if (fstat(fd, &st) == 0) {
                off_t at = st.st_size > (off_t) sizeof(tail) - 1 ? st.st_size - (off_t) sizeof(tail) + 1 : 0;
                ssize_t n = pread(fd, tail, sizeof(tail) - 1, at);
                if (n > 0) {
                        tail[n] = '\0';
                        const char *p = strstr(tail, last);
                        ok = p && tail[n - 1] == '\n' && !strchr(p + sizeof(last) - 1, '\n')[1];
                }
        }
        close(fd);
        return ok;
}

/* Read every file of @dir that a reader would: Return: the name of one cut short, or NULL. */
static const char *look(const char *dir, char *bad, size_t size)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        const char *r = NULL;

        if (!d)
                return NULL;
        while (!r && (e = readdir(d)))
                if (e->d_name[0] != '.' && !whole(dir, e->d_name)) {
                        snprintf(bad, size, "%s", e->d_name);
                        r = bad;
                }
        closedir(d);
        return r;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "shm", required_argument, NULL, 's' },
                { "rank", required_argument, NULL, 'r' },
                { "timeout-ms", required_argument, NULL, 't' },
                { 0 },
        };
        const char *name = NULL;
        long rank = -1, timeout_ms = 10000;
        char err[NPF_SHM_ERR_MAX], dir[NPF_SHM_PATH_MAX + 16], bad[256];
        npf_shm_t *shm;
        int c, error = 0, looks = 0;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 's': name = optarg; break;
                case 'r': rank = atol(optarg); break;
                case 't': timeout_ms = atol(optarg); break;
                default: return 2;
                }
        }
        if (!name || rank < 0 || rank >= (long) NPF_SHM_MAX_RANKS || timeout_ms <= 0) {
                fputs("Usage: ask-stacks --shm NAME --rank R [--timeout-ms MS]\n", stderr);
                return 2;
        }
        if (npf_shm_open(name, 0, &shm, err) < 0) {
                fprintf(stderr, "ask-stacks: %s: %s\n", name, err);
                return 1;
        }
        npf_shm_ranks_t *table = npf_shm_ranks(shm);
        uint32_t e = __atomic_load_n(&table->index[rank], __ATOMIC_ACQUIRE);
        uint32_t s = NPF_INDEX_SLOT(e);
        if (e == 0 || s >= NPF_SHM_SLOTS) {
                fprintf(stderr, "ask-stacks: rank %ld holds no slot\n", rank);
                return 1;
        }
        npf_shm_slot_t *slot = &table->slots[s];
        uint32_t pid = NPF_SLOT_PID(npf_slot_claim_word(slot));
        npf_shm_config_t *config = malloc(sizeof(*config));
        if (!config || npf_shm_read_config(npf_shm_ctl(shm), config) < 0) {
                fprintf(stderr, "ask-stacks: cannot read the configuration\n");
                return 1;
        }
        snprintf(dir, sizeof(dir), "%s/stacks", config->prof_dir);

        uint32_t asked;
        npf_slot_ask_stacks(slot, &asked);
        uint64_t until = monotonic_ms() + (uint64_t) timeout_ms;
        bool answered;
        do {
                looks++;
                if (look(dir, bad, sizeof(bad))) {
                        fprintf(stderr, "ask-stacks: %s/%s was seen cut short\n", dir, bad);
                        return 4;
                }
                answered = npf_slot_stacks_answered(slot, asked, &error);
                if (!answered)
                        nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        } while (!answered && monotonic_ms() < until);
        if (!answered) {
                fprintf(stderr, "ask-stacks: rank %ld did not answer request %u within %ld ms\n", rank, asked,
                        timeout_ms);
                return 3;
        }
        if (look(dir, bad, sizeof(bad))) {
                fprintf(stderr, "ask-stacks: %s/%s was seen cut short\n", dir, bad);
                return 4;
        }
        if (error) {
                fprintf(stderr, "ask-stacks: rank %ld could not write its stacks: %s\n", rank, strerror(error));
                return 1;
        }
        fprintf(stderr, "ask-stacks: request %u answered; the stacks directory read %d times, no file cut short\n",
                asked, looks);
        printf("%s/rank%ld_pid%" PRIu32 "_%" PRIu32 ".txt\n", dir, rank, pid, asked);
        free(config);
        npf_shm_close(shm);
        return 0;
}
