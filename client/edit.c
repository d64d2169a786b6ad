/* SPDX-License-Identifier: MIT */
#include "client/edit.h"
#include "lib/atomicfile.h"
#include "lib/outroot.h"
#include "client/ipc.h"
#include "client/status.h"
#include "conf/conf.h"
#include "npuprof/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>


/*
 * @root as the file's new text, two-space indented, keys in their order, with a final
 * newline. Reals are written short when that reads back the same, else exactly.
 * Return: a malloc'd string, or NULL if out of memory.
 */
static char *dump(const json_t *root)
{
        const size_t flags = JSON_INDENT(2) | JSON_PRESERVE_ORDER;
        char *s = json_dumps(root, flags | JSON_REAL_PRECISION(15)), *out = NULL;
        json_t *back = s ? json_loads(s, 0, NULL) : NULL;

        if (!back || !json_equal(back, root)) {
                free(s);
                s = json_dumps(root, flags);
        }
        json_decref(back);
        if (s && asprintf(&out, "%s\n", s) < 0)
                out = NULL;
        free(s);
        return out;
}

int npf_edit_replace(const char *path, const char *text, size_t len, unsigned mode, unsigned uid, unsigned gid,
                     char *err)
{
        char *dcopy = strdup(path), *bcopy = strdup(path);
        npf_atomicfile_t f;
        int dfd = -1, r;

        if (!dcopy || !bcopy) {
                r = -ENOMEM;
                snprintf(err, NPF_EDIT_ERR_MAX, "out of memory");
                goto out;
        }
        const char *dir = dirname(dcopy), *base = basename(bcopy);
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) {
                r = -errno;
                snprintf(err, NPF_EDIT_ERR_MAX, "cannot open the directory %s: %s", dir, strerror(errno));
                goto out;
        }
        /* Another npuprofctl may save the same file at once: each write has a temporary of its own. */
        r = npf_atomicfile_begin(&f, dfd, base, NULL, 0600, 0);
        if (r < 0) {
                snprintf(err, NPF_EDIT_ERR_MAX, "cannot create a temporary file in %s: %s", dir, strerror(-r));
                goto out;
        }
        /* The file's owner and mode stay. The owner first: changing it may clear set-id bits that
         * the mode restores. Who may not give it its owner may still keep its group (a member of
         * it); who may do neither makes the file theirs, as any editor would. */
        if ((uid != (unsigned) getuid() || gid != (unsigned) getgid()) && fchown(f.fd, uid, gid) < 0 &&
            fchown(f.fd, (uid_t) -1, gid) < 0) {
                /* the file becomes ours: nothing else to do */
        }
        if (fchmod(f.fd, mode & 07777) < 0) {
                r = -errno;
                snprintf(err, NPF_EDIT_ERR_MAX, "cannot set the mode of %s/%s: %s", dir, f.tmp, strerror(errno));
                npf_atomicfile_abort(&f);
                goto out;
        }
        r = npf_atomicfile_append(&f, text, len);
        if (r < 0)
                npf_atomicfile_abort(&f);
        else
                r = npf_atomicfile_commit(&f, 0);
        if (r < 0 && strcmp(f.step, "sync the directory") == 0)
                snprintf(err, NPF_EDIT_ERR_MAX, "%s was replaced, but syncing %s failed: %s", path, dir, strerror(-r));
        else if (r < 0)
                snprintf(err, NPF_EDIT_ERR_MAX, "cannot %s %s/%s: %s", f.step, dir, npf_atomicfile_failed_name(&f),
                         strerror(-r));
out:
        if (dfd >= 0)
                close(dfd);
        free(dcopy);
        free(bcopy);
        return r;
}

/* --- the command --------------------------------------------------------------------- */

typedef struct edit_cmd {
        const char *name;               /* "start" or "stop" */
        bool json;
        json_t *out;                    /* the JSON object printed at the end */
        char output_root[NPF_SHM_PATH_MAX];     /* the daemon's, when it was asked; "" if unknown */
} edit_cmd_t;

static void print_json(json_t *o)
{
        char *s = json_dumps(o, JSON_COMPACT);

        if (s)
                puts(s);
        free(s);
}

/* Say why nothing was written. Return: @status. */
static int refuse(edit_cmd_t *c, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(edit_cmd_t *c, int status, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        fprintf(stderr, "npuprofctl %s: %s\n", c->name, msg);
        if (c->json) {
                json_object_set_new(c->out, "written", json_false());
                json_object_set_new(c->out, "error", json_string(msg));
                print_json(c->out);
        }
        return status;
}

/*
 * The file the daemon watches, from its status. A relative path is the daemon's: it is
 * taken from the daemon's working directory. Return: 0 and a malloc'd path, or the exit
 * status after saying why.
 */
static int daemon_config_path(edit_cmd_t *c, const char *socket_path, char **ret_path)
{
        char err[256], cwd[PATH_MAX], link[64];
        json_t *reply = NULL;
        int r = npf_ipc_call(socket_path, "status", NPF_IPC_TIMEOUT_MS, &reply, err);

        if (r < 0) {
                char fix[NPF_IPC_FIX_MAX];
                const char *how = npf_ipc_fix(r, socket_path, fix);
                return refuse(c, NPF_EXIT_UNREACHABLE, "the daemon is not reachable, so the file it watches is "
                              "unknown (give --config PATH): %s%s%s", err, how ? "; " : "", how ? how : "");
        }
        json_t *res = json_object_get(reply, "result");
        const char *path = json_string_value(json_object_get(json_object_get(res, "config"), "path"));
        const char *root = json_string_value(json_object_get(json_object_get(res, "daemon"), "output_root"));
        snprintf(c->output_root, sizeof(c->output_root), "%s", root ? root : "");
        json_int_t pid = json_integer_value(json_object_get(json_object_get(res, "daemon"), "pid"));
        if (!json_is_true(json_object_get(reply, "ok")) || !path || !*path) {
                const char *why = json_string_value(json_object_get(reply, "error"));
                r = refuse(c, 1, "the daemon did not say which file it watches: %s",
                           why ? why : "no config.path in its status");
                json_decref(reply);
                return r;
        }
        char *full = NULL;
        if (path[0] == '/') {
                full = strdup(path);
        } else {
                snprintf(link, sizeof(link), "/proc/%lld/cwd", (long long) pid);
                ssize_t n = readlink(link, cwd, sizeof(cwd) - 1);
                if (n <= 0) {
                        r = refuse(c, 1, "the daemon watches %s relative to its working directory, which cannot be "
                                   "read (%s); give --config PATH", path, strerror(errno));
                        json_decref(reply);
                        return r;
                }
                cwd[n] = '\0';
                if (asprintf(&full, "%s/%s", cwd, path) < 0)
                        full = NULL;
        }
        json_decref(reply);
        if (!full)
                return refuse(c, 1, "out of memory");
        *ret_path = full;
        return 0;
}

static void print_errors(const edit_cmd_t *c, const char *path, const npf_conf_report_t *rep)
{
        fprintf(stderr, "npuprofctl %s: the result would be invalid; %s is unchanged:\n", c->name, path);
        for (uint32_t i = 0; i < rep->n_errors && i < NPF_CONF_DIAG_MAX; i++)
                fprintf(stderr, "  error: %s%s%s\n", rep->errors[i].key, rep->errors[i].key[0] ? ": " : "",
                        rep->errors[i].message);
}

/* The diagnostics of a text that is not on disk: where in it means nothing to anybody. */
static json_t *diags_json(const npf_conf_diag_t *d, uint32_t n)
{
        json_t *a = json_array();

        for (uint32_t i = 0; a && i < n && i < NPF_CONF_DIAG_MAX; i++)
                json_array_append_new(a, json_pack("{s:o, s:s}", "key", d[i].key[0] ? json_string(d[i].key) : json_null(),
                                                   "message", d[i].message));
        return a;
}

/* The window and settings just written, in words. */
static void print_summary(const edit_cmd_t *c, const char *path, const npf_shm_config_t *cfg)
{
        const npf_shm_args_t *a = &cfg->args;

        printf("%s: wrote %s (%s dialect): ", c->name, path, npf_shm_dialect_name(a->dialect));
        if (!a->enabled) {
                printf("profiling off\n");
                return;
        }
        if (a->start_step == NPF_STEP_NEXT)
                printf("a window of %" PRIu64 " steps from the next step", a->step_count);
        else
                printf("window steps %" PRId64 "..%" PRId64, a->start_step, a->stop_step);
        if (a->warmup)
                printf(" (the first %" PRIu64 " warmup)", a->warmup);
        printf(", level %s, backend %s, ", npf_shm_level_name(a->level), npf_shm_backend_name(a->backend));
        if (a->rank_filter == NPF_RANKS_ALL)
                printf("every rank\n");
        else
                printf("%u rank%s\n", a->rank_count, a->rank_count == 1 ? "" : "s");
}

int npf_cli_edit(const char *socket_path, const char *config_path, const npf_conf_window_t *a, bool json)
{
        edit_cmd_t c = { .name = a ? "start" : "stop", .json = json, .out = json_object() };
        npf_conf_report_t *rep = calloc(1, sizeof(*rep));
        npf_shm_config_t *cfg = malloc(sizeof(*cfg));
        char *given = NULL, *path = NULL, *text = NULL, *newtext = NULL, err[NPF_EDIT_ERR_MAX];
        json_t *root = NULL;
        struct stat st = { 0 }, now;
        bool exists;
        size_t len = 0;
        int status;

        if (!c.out || !rep || !cfg) {
                fprintf(stderr, "npuprofctl %s: out of memory\n", c.name);
                status = 1;
                goto out;
        }
        json_object_set_new(c.out, "command", json_string(c.name));
        if (!config_path) {
                status = daemon_config_path(&c, socket_path, &given);
                if (status != 0)
                        goto out;
                config_path = given;
        }
        /* Edit what a symbolic link points to; the link stays. */
        path = realpath(config_path, NULL);
        if (!path && errno != ENOENT) {
                status = refuse(&c, 1, "cannot resolve %s: %s", config_path, strerror(errno));
                goto out;
        }
        if (!path)
                path = strdup(config_path);
        json_object_set_new(c.out, "path", json_string(path));

        exists = stat(path, &st) == 0;
        if (!exists && errno != ENOENT) {
                status = refuse(&c, 1, "cannot stat %s: %s", path, strerror(errno));
                goto out;
        }
        uint32_t dialect = NPF_DIALECT_NATIVE;
        if (exists) {
                if (npf_conf_read(path, &text, &len, NULL, rep) < 0) {
                        status = refuse(&c, 1, "%s", rep->n_errors ? rep->errors[0].message : "cannot read the file");
                        goto out;
                }
                json_error_t jerr;
                root = json_loadb(text, len, 0, &jerr);
                if (!json_is_object(root)) {
                        status = refuse(&c, 1, "%s:%d:%d: %s; fix the file or write it anew", path, jerr.line,
                                        jerr.column, root ? "not a JSON object" : jerr.text);
                        goto out;
                }
                memset(rep, 0, sizeof(*rep));
                npf_conf_parse(text, len, cfg, rep);
                if (rep->dialect == 0) {
                        status = refuse(&c, 1, "cannot tell which dialect %s is written in: %s", path,
                                        rep->n_errors ? rep->errors[0].message : "no key says");
                        goto out;
                }
                dialect = rep->dialect;
        } else {
                /* A file to be: npuprof's own dialect, readable by all as an editor would create it. */
                root = json_object();
                mode_t mask = umask(0);
                umask(mask);
                st.st_mode = 0666 & ~mask;
                st.st_uid = getuid();
                st.st_gid = getgid();
        }
        json_object_set_new(c.out, "dialect", json_string(npf_shm_dialect_name(dialect)));

        if (a) {
                if (npf_conf_write_window(root, dialect, a, err) < 0) {
                        status = refuse(&c, 1, "%s; %s is unchanged", err, path);
                        goto out;
                }
        } else {
                npf_conf_write_off(root, dialect);
        }
        newtext = dump(root);
        if (!newtext) {
                status = refuse(&c, 1, "out of memory");
                goto out;
        }
        memset(rep, 0, sizeof(*rep));
        if (npf_conf_parse(newtext, strlen(newtext), cfg, rep) < 0) {
                print_errors(&c, path, rep);
                if (json) {
                        json_object_set_new(c.out, "written", json_false());
                        json_object_set_new(c.out, "errors", diags_json(rep->errors, rep->n_errors));
                        print_json(c.out);
                }
                status = 1;
                goto out;
        }
        if (rep->dialect != dialect) {
                status = refuse(&c, 1, "the edit would turn the %s file into a %s one; %s is unchanged",
                                npf_shm_dialect_name(dialect), npf_shm_dialect_name(rep->dialect), path);
                goto out;
        }
        /* What the daemon would refuse is not written either: its output directory must be under its root. */
        if (c.output_root[0]) {
                const char *key = dialect == NPF_DIALECT_TORCH_NPU ? "prof_dir"
                                  : dialect == NPF_DIALECT_MINDSPORE ? "prof_path" : "output_dir";
                char resolved[NPF_SHM_PATH_MAX], why[NPF_OUTROOT_ERR_MAX];
                if (npf_outroot_resolve(c.output_root, cfg->prof_dir, key, resolved, sizeof(resolved), why) < 0) {
                        status = refuse(&c, 1, "the daemon would refuse the result: %s; %s is unchanged", why, path);
                        goto out;
                }
        }
        /* Somebody else's save between our read and our rename would be lost: refuse instead. */
        bool now_exists = stat(path, &now) == 0;
        if (now_exists != exists ||
            (exists && (now.st_ino != st.st_ino || now.st_size != st.st_size ||
                        now.st_mtim.tv_sec != st.st_mtim.tv_sec || now.st_mtim.tv_nsec != st.st_mtim.tv_nsec))) {
                status = refuse(&c, 1, "%s changed while it was being edited; nothing was written, try again", path);
                goto out;
        }
        if (npf_edit_replace(path, newtext, strlen(newtext), st.st_mode, st.st_uid, st.st_gid, err) < 0) {
                status = refuse(&c, 1, "%s", err);
                goto out;
        }
        for (uint32_t i = 0; i < rep->n_warnings && i < NPF_CONF_DIAG_MAX; i++)
                fprintf(stderr, "npuprofctl %s: warning: %s%s%s\n", c.name, rep->warnings[i].key,
                        rep->warnings[i].key[0] ? ": " : "", rep->warnings[i].message);
        if (json) {
                json_object_set_new(c.out, "written", json_true());
                json_object_set_new(c.out, "created", json_boolean(!exists));
                json_object_set_new(c.out, "config", npf_conf_to_json(cfg));
                json_object_set_new(c.out, "warnings", diags_json(rep->warnings, rep->n_warnings));
                print_json(c.out);
        } else {
                print_summary(&c, path, cfg);
        }
        status = 0;
out:
        json_decref(root);
        json_decref(c.out);
        free(newtext);
        free(text);
        free(path);
        free(given);
        free(cfg);
        free(rep);
        return status;
}
