/* SPDX-License-Identifier: MIT */
/*
 * npuprof-shmopen: the package's one privileged program. npuprofd runs as user npuprof with
 * no capability, and a MindSpore or torch_npu job makes its own hourly object mode 0600, its
 * own user's (root's, in most containers): this hands npuprofd a read-write descriptor of
 * such an object, and of nothing else, so that the daemon never holds a privilege itself.
 *
 * Started by npuprof-shmopen.socket (Accept=yes): one instance per connection, the connected
 * socket as its only passed descriptor, ending with the connection. Each request names one
 * object (lib/shmopen.h); a name that is not a framework's, a file that is not regular, is
 * larger than a framework's, or is a symbolic link is refused. Only root and --user may ask.
 */
#include "lib/shmopen.h"
#include "npuprof/protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npuprof-shmopen [--user NAME] [--shm-dir DIR]\n"
                "\n"
                "Example:\n"
                "  systemctl enable --now npuprof-shmopen.socket\n"
                "                  listen on /run/npuprof-shmopen.sock for npuprofd --legacy; each\n"
                "                  connection runs npuprof-shmopen --user npuprof (npuprof-shmopen@.service)\n"
                "\n"
                "Hands npuprofd a descriptor of a framework's shared-memory object of another user\n"
                "(DynamicProfileNpuShm<hour>, DynamicProfileShm<hour>), and of nothing else. Run by\n"
                "npuprof-shmopen.socket (Accept=yes) with the connection as its one descriptor.\n"
                "\n"
                "  --user NAME     the one user besides root that may ask (npuprofd's, npuprof)\n"
                "  --shm-dir DIR   where POSIX shared memory lives (default /dev/shm)\n"
                "  --help          this text\n"
                "  --version       the version\n"
                "\n"
                "See npuprof-shmopen(8).\n");
}

/* Open @name in @dir for a request: a positive errno, or 0 with *@ret_fd. */
static int open_object(int dir, const char *name, int *ret_fd, struct stat *st)
{
        int fd;

        if (!npf_shmopen_name_ok(name))
                return EINVAL;
        fd = openat(dir, name, O_RDWR | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? EINVAL : errno;
        /* A second name is a hard link to someone else's file (where fs.protected_hardlinks is off). */
        int e = fstat(fd, st) < 0 ? errno : !S_ISREG(st->st_mode) ? EINVAL : st->st_nlink != 1 ? EMLINK
                : st->st_size > (off_t) NPF_SHMOPEN_SIZE_MAX ? EFBIG : 0;
        if (e) {
                close(fd);
                return e;
        }
        *ret_fd = fd;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "user", required_argument, NULL, 'u' },
                { "shm-dir", required_argument, NULL, 'd' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                { 0 },
        };
        const char *shm_dir = "/dev/shm";
        uid_t allowed = 0;
        struct ucred peer;
        socklen_t len = sizeof(peer);
        char name[NPF_SHMOPEN_NAME_MAX + 1];
        int c, dir, sock, r;

        argv[0] = (char *) "npuprof-shmopen";  /* getopt's messages name it so */
        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
                switch (c) {
                case 'u': {
                        struct passwd *pw = getpwnam(optarg);
                        if (!pw) {
                                fprintf(stderr, "npuprof-shmopen: --user: no user '%s'\n", optarg);
                                return 2;
                        }
                        allowed = pw->pw_uid;
                        break;
                }
                case 'd':
                        shm_dir = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("npuprof-shmopen %s\n", NPUPROF_VERSION);
                        return 0;
                default:
                        fputs("see npuprof-shmopen --help\n", stderr);
                        return 2;
                }
        }
        if (optind < argc || sd_listen_fds(1) != 1 ||
            sd_is_socket(SD_LISTEN_FDS_START, AF_UNIX, SOCK_SEQPACKET, 0) <= 0) {
                fprintf(stderr, "npuprof-shmopen: run by npuprof-shmopen.socket (Accept=yes), with one connected "
                        "SOCK_SEQPACKET socket, not by hand: systemctl enable --now npuprof-shmopen.socket\n");
                return 2;
        }
        sock = SD_LISTEN_FDS_START;
        if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &peer, &len) < 0) {
                fprintf(stderr, "npuprof-shmopen: SO_PEERCRED: %s\n", strerror(errno));
                return 1;
        }
        if ((dir = open(shm_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                fprintf(stderr, "npuprof-shmopen: %s: %s\n", shm_dir, strerror(errno));
                return 1;
        }
        bool trusted = peer.uid == 0 || peer.uid == allowed;
        if (!trusted) {
                /* Answered once, and the instance ends: an untrusted peer holds nothing open. */
                fprintf(stderr, "npuprof-shmopen: pid %d uid %u may not ask (root and uid %u may)\n", (int) peer.pid,
                        (unsigned) peer.uid, (unsigned) allowed);
                if (npf_shmopen_read_request(sock, name) != 0)
                        (void) npf_shmopen_reply(sock, EPERM, -1);
                close(dir);
                return 0;
        }
        while ((r = npf_shmopen_read_request(sock, name)) != 0) {
                struct stat st;
                int fd = -1, e;
                if (r < 0 && r != -EMSGSIZE && r != -EINVAL)
                        break;
                e = r < 0 ? EINVAL : open_object(dir, name, &fd, &st);
                if (e == 0)
                        fprintf(stderr, "npuprof-shmopen: gave pid %d %s (uid %u, mode %04o, %lld bytes)\n",
                                (int) peer.pid, name, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777),
                                (long long) st.st_size);
                else
                        fprintf(stderr, "npuprof-shmopen: refused pid %d %s: %s\n", (int) peer.pid,
                                r < 0 ? "a request that is no name" : name, strerror(e));
                r = npf_shmopen_reply(sock, e, fd);
                if (fd >= 0)
                        close(fd);
                if (r < 0)
                        break;
        }
        close(dir);
        return 0;
}
