/* SPDX-License-Identifier: MIT */
#include "client/validate.h"
#include "conf/conf.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_diag(const char *path, const char *kind, const npf_conf_diag_t *d)
{
        if (d->line)
                printf("%s:%u:%u: %s: ", path, d->line, d->column, kind);
        else
                printf("%s: %s: ", path, kind);
        if (d->key[0])
                printf("%s: ", d->key);
        printf("%s\n", d->message);
}

static void print_diags(const char *path, const npf_conf_report_t *r)
{
        for (uint32_t i = 0; i < r->n_errors && i < NPF_CONF_DIAG_MAX; i++)
                print_diag(path, "error", &r->errors[i]);
        if (r->n_errors > NPF_CONF_DIAG_MAX)
                printf("%s: ... and %u more errors\n", path, r->n_errors - NPF_CONF_DIAG_MAX);
        for (uint32_t i = 0; i < r->n_warnings && i < NPF_CONF_DIAG_MAX; i++)
                print_diag(path, "warning", &r->warnings[i]);
        if (r->n_warnings > NPF_CONF_DIAG_MAX)
                printf("%s: ... and %u more warnings\n", path, r->n_warnings - NPF_CONF_DIAG_MAX);
}

/* Print the items of JSON list @a joined by ", ", or @none when it is empty. */
static void print_list(const json_t *a, const char *none)
{
        size_t i;
        json_t *e;

        if (json_array_size(a) == 0)
                fputs(none, stdout);
        json_array_foreach(a, i, e)
                printf("%s%s", i ? ", " : "", json_string_value(e));
}

static const char *plural(uint64_t n)
{
        return n == 1 ? "" : "s";
}

static void print_window(const npf_shm_args_t *a)
{
        if (!a->enabled) {
                printf("  window      none: profiling is off\n");
                return;
        }
        printf("  window      ");
        if (a->start_step == NPF_STEP_NEXT)
                printf("from the step after a rank reads it");
        else
                printf("from step %" PRId64, a->start_step);
        if (a->duration_ms)
                printf(", for %" PRIu64 " ms", a->duration_ms);
        else if (a->stop_step != NPF_STEP_NONE)
                printf(" to step %" PRId64 " (%" PRIu64 " step%s", a->stop_step, a->step_count, plural(a->step_count));
        else
                printf(", for %" PRIu64 " step%s", a->step_count, plural(a->step_count));
        if (a->warmup && a->duration_ms)
                printf(", the first %" PRIu64 " step%s warmup", a->warmup, plural(a->warmup));
        else if (a->warmup)
                printf(", %" PRIu64 " of them warmup", a->warmup);
        if (!a->duration_ms && a->stop_step != NPF_STEP_NONE)
                printf(")");
        if (a->start_at_multiple_of > 1)
                printf(", starting at a multiple of %" PRIu64, a->start_at_multiple_of);
        printf("\n");
}

static void print_config(const npf_shm_config_t *c)
{
        json_t *o = npf_conf_to_json(c), *v;
        const char *k;
        bool any = false;

        print_window(&c->args);
        printf("  ranks       %s\n", json_string_value(json_object_get(o, "ranks")));
        printf("  level       %s, AI Core metrics %s\n", npf_shm_level_name(c->args.level),
               npf_conf_aic_name(c->args.aic_metrics));
        printf("  activities  ");
        print_list(json_object_get(o, "activities"), "none");
        printf("\n  analyse     %s, export ", npf_conf_analyse_name(c->args.analyse_mode));
        print_list(json_object_get(o, "export_type"), "none");
        printf("\n  host_sys    ");
        print_list(json_object_get(o, "host_sys"), "none");
        printf("\n  switches    ");
        json_object_foreach(json_object_get(o, "switches"), k, v) {
                if (json_is_true(v)) {
                        printf("%s%s", any ? ", " : "", k);
                        any = true;
                }
        }
        printf("%s\n", any ? "" : "none");
        printf("  prof_dir    %s\n", c->args.prof_dir_len ? c->prof_dir : "(the daemon's default)");
        printf("  backend     %s\n", npf_shm_backend_name(c->args.backend));
        if (c->args.extra_len)
                printf("  extra       %s\n", c->extra);
        json_decref(o);
}

static int validate_one(const char *path, bool json, const char *root, npf_shm_config_t *c, npf_conf_report_t *r)
{
        int ret = npf_conf_load(path, root, c, r);

        if (json) {
                json_t *o = npf_conf_report_to_json(r);
                json_object_set_new(o, "file", json_string(path));
                if (ret == 0) {
                        json_t *cfg = npf_conf_to_json(c);
                        json_t *w = json_object_get(cfg, "window");
                        json_object_set_new(o, "window",
                                            json_pack("{s:O, s:O, s:O}", "start_step", json_object_get(w, "start_step"),
                                                      "stop_step", json_object_get(w, "stop_step"),
                                                      "warmup", json_object_get(w, "warmup")));
                        json_object_set_new(o, "config", cfg);
                } else {
                        json_object_set_new(o, "window", json_null());
                }
                char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
                if (s)
                        puts(s);
                free(s);
                json_decref(o);
                return ret == 0 ? 0 : 1;
        }

        if (ret == 0) {
                printf("%s: valid (%s dialect)\n", path, npf_shm_dialect_name(r->dialect));
                print_config(c);
                print_diags(path, r);
                return 0;
        }
        print_diags(path, r);
        printf("%s: invalid: %u error%s\n", path, r->n_errors, r->n_errors == 1 ? "" : "s");
        return 1;
}

int npf_cli_validate(char *const *paths, int n, bool json, const char *output_root)
{
        npf_shm_config_t *c = malloc(sizeof(*c));
        npf_conf_report_t *r = malloc(sizeof(*r));
        int status = 0;

        if (!c || !r) {
                fprintf(stderr, "npuprofctl: out of memory\n");
                free(c);
                free(r);
                return 1;
        }
        for (int i = 0; i < n; i++)
                status |= validate_one(paths[i], json, output_root, c, r);
        free(c);
        free(r);
        fflush(stdout);
        return status;
}
