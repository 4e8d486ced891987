/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Kernel parameters under /proc/sys, from the [Sysctl] section: kernel.timer_migration=0. */
#include <ctype.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"

typedef struct SysctlConfig {
        char **paths; /* "/proc/sys/kernel/timer_migration" */
        char **values;
        size_t n;
} SysctlConfig;

static void sysctl_free_config(void *p)
{
        SysctlConfig *c = p;

        strv_free(c->paths);
        strv_free(c->values);
        free(c);
}

/* "kernel.timer_migration" or "kernel/timer_migration"; dots inside a path component (net.ipv4.conf.
 * eth0.1) cannot be told apart and are not supported in the dotted form. */
static char *sysctl_path(const char *key)
{
        char *p = xasprintf("/proc/sys/%s", key);

        if (!strchr(key, '/'))
                for (char *c = p + strlen("/proc/sys/"); *c; c++)
                        if (*c == '.')
                                *c = '/';
        return p;
}

static bool sysctl_key_valid(const char *key)
{
        if (isempty(key) || key[0] == '.' || key[0] == '/' || strstr(key, ".."))
                return false;
        for (const char *c = key; *c; c++)
                if (!isalnum((unsigned char)*c) && !strchr("._-/", *c))
                        return false;
        return true;
}

static void *sysctl_parse(Conf *conf, char ***errors)
{
        ConfSection *s = conf_section(conf, "Sysctl");
        SysctlConfig *c;

        if (!s || s->n_keys == 0)
                return NULL;
        c = xmalloc0(sizeof(SysctlConfig));
        for (size_t i = 0; i < s->n_keys; i++) {
                ConfKey *k = &s->keys[i];

                k->used = true;
                if (!sysctl_key_valid(k->key)) {
                        strv_push(errors, conf_key_error(k, "not a sysctl name"));
                        continue;
                }
                _cleanup_free_ char *path = sysctl_path(k->key);
                const char *why = sys_path_denied(path);
                if (why) {
                        strv_push(errors, conf_key_error(k, "rtctl never writes it: %s", why));
                        continue;
                }
                size_t n = c->n;
                strv_append(&c->paths, &n, TAKE_PTR(path));
                strv_append(&c->values, &c->n, xstrdup(k->value));
        }
        return c;
}

static int sysctl_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                       PlanNotes *notes)
{
        const SysctlConfig *c = config;

        for (size_t i = 0; c->paths && c->paths[i]; i++) {
                if (!sys_exists(c->paths[i])) {
                        plan_notes_add(notes, "sysctl", xstrdup(c->paths[i]),
                                       xstrdup("this kernel does not have it"));
                        continue;
                }
                plan_add(plan, &setting_kind_file, "sysctl", 0, xstrdup(c->paths[i]), xstrdup(c->values[i]));
        }
        return 0;
}

const Tuner tuner_sysctl = {
    .name = "sysctl",
    .sections = (const char *const[]){"Sysctl", NULL},
    .parse = sysctl_parse,
    .free_config = sysctl_free_config,
    .plan = sysctl_plan,
};
