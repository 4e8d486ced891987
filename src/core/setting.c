/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <sys/stat.h>

#include "core/setting.h"
#include "core/systemd.h"
#include "core/tracefs.h"
#include "shared/sysfs.h"

void setting_context_init(SettingContext *c, sd_event *event)
{
        assert(c);

        *c = (SettingContext){.refused = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL),
                              .queued_restores = g_hash_table_new_full(g_str_hash, g_str_equal, free, NULL),
                              .pmqos_fd = -EBADF,
                              .systemd = systemd_client_new(event)};
}

void setting_context_clear(SettingContext *c)
{
        assert(c);

        if (c->refused)
                g_hash_table_destroy(c->refused);
        if (c->queued_restores)
                g_hash_table_destroy(c->queued_restores);
        if (c->pmqos_fd >= 0)
                close(c->pmqos_fd);
        systemd_client_free(c->systemd);
        *c = (SettingContext){.pmqos_fd = -EBADF};
}

static char *refusal_key(const TaskInfo *t)
{
        return xasprintf("%u:%llu", t->pid, t->starttime);
}

bool setting_context_refused(const SettingContext *c, const TaskInfo *t)
{
        _cleanup_free_ char *key = refusal_key(t);

        assert(c);

        return g_hash_table_contains(c->refused, key);
}

void setting_context_refuse(SettingContext *c, const TaskInfo *t)
{
        assert(c);

        if (g_hash_table_size(c->refused) >= REFUSED_MAX)
                (void)setting_context_prune_refused(c);
        if (g_hash_table_size(c->refused) < REFUSED_MAX)
                g_hash_table_add(c->refused, refusal_key(t));
}

static gboolean refusal_gone(gpointer key, gpointer value, gpointer userdata)
{
        unsigned pid;
        unsigned long long starttime;
        TaskInfo t;

        return sscanf(key, "%u:%llu", &pid, &starttime) != 2 || task_info(pid, &t) < 0 ||
               t.starttime != starttime;
}

unsigned setting_context_prune_refused(SettingContext *c)
{
        assert(c);

        return g_hash_table_foreach_remove(c->refused, refusal_gone, NULL);
}

bool setting_equal_folded(const char *a, const char *b)
{
        if (!a || !b)
                return a == b;
        /* "4096\t16384  4194304" equals "4096 16384 4194304" */
        for (;;) {
                while (isspace((unsigned char)*a) && isspace((unsigned char)a[1]))
                        a++;
                while (isspace((unsigned char)*b) && isspace((unsigned char)b[1]))
                        b++;
                if (isspace((unsigned char)*a) && isspace((unsigned char)*b)) {
                        a++;
                        b++;
                        continue;
                }
                if (*a != *b)
                        return false;
                if (!*a)
                        return true;
                a++;
                b++;
        }
}

int setting_file_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        int r;

        assert(object);
        assert(ret);

        r = sys_read(object, &s);
        if (r < 0)
                return r;
        *ret = xstrdup(strstrip(s));
        return 0;
}

int setting_file_write(SettingContext *ctx, const char *object, const char *value)
{
        return sys_write(object, value);
}

int setting_dir_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        assert(object);
        assert(ret);

        _cleanup_free_ char *p = sys_path(object);
        struct stat st;

        *ret = xstrdup(stat(p, &st) >= 0 && S_ISDIR(st.st_mode) ? "present" : "absent");
        return 0;
}

int setting_dir_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *p = sys_path(object);

        assert(value);

        if (streq(value, "present"))
                return mkdir(p, 0755) < 0 && errno != EEXIST ? -errno : 0;
        if (!streq(value, "absent"))
                return -EINVAL;
        if (rmdir(p) < 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
                return -errno;
        return 0;
}

const SettingKind setting_kind_file = {
    .name = "file",
    .read = setting_file_read,
    .write = setting_file_write,
    .equal = setting_equal_folded,
};

static int choice_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        char *open, *close;
        int r;

        r = sys_read(object, &s);
        if (r < 0)
                return r;
        open = strchr(s, '[');
        close = open ? strchr(open, ']') : NULL;
        if (!open || !close)
                /* A single choice is printed without brackets: "none". */
                *ret = xstrdup(strstrip(s));
        else
                *ret = xstrndup(open + 1, (size_t)(close - open - 1));
        return 0;
}

const SettingKind setting_kind_choice = {
    .name = "choice",
    .read = choice_read,
    .write = setting_file_write,
    .equal = setting_equal_folded,
};

static const SettingKind *const *registered_kinds;
static size_t n_registered_kinds;

void setting_kinds_register(const SettingKind *const *kinds, size_t n)
{
        registered_kinds = kinds;
        n_registered_kinds = n;
}

const SettingKind *setting_kind_from_name(const char *name)
{
        static const SettingKind *const kinds[] = {
            &setting_kind_file,           &setting_kind_choice,
            &setting_kind_cpulist,        &setting_kind_cpumask,
            &setting_kind_cgroup,         &setting_kind_procs,
            &setting_kind_member,         &setting_kind_affinity,
            &setting_kind_unit_cpus,      &setting_kind_slice,
            &setting_kind_partition,      &setting_kind_subtree,
            &setting_kind_sched,          &setting_kind_service,
            &setting_kind_pmqos,          &setting_kind_irq_affinity,
            &setting_kind_thread,         &setting_kind_sched_feature,
            &setting_kind_unit_partition, &setting_kind_resctrl_group,
            &setting_kind_schemata,       &setting_kind_tracefs_instance,
            &setting_kind_tracefs_mount,
        };

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (streq(kinds[i]->name, name))
                        return kinds[i];
        for (size_t i = 0; i < n_registered_kinds; i++)
                if (streq(registered_kinds[i]->name, name))
                        return registered_kinds[i];
        return NULL;
}

void plan_clear(Plan *p)
{
        assert(p);

        for (size_t i = 0; i < p->n; i++) {
                free(p->settings[i].object);
                free(p->settings[i].desired);
                free(p->settings[i].current);
                free(p->settings[i].message);
        }
        free(p->settings);
        *p = (Plan){};
}

Setting *plan_add(Plan *p, const SettingKind *kind, const char *tuner, unsigned phase, char *object,
                  char *desired)
{
        Setting *s;

        assert(p);
        assert(kind);
        assert(object);

        GREEDY_REALLOC(p->settings, p->alloc, p->n + 1);
        s = &p->settings[p->n++];
        *s = (Setting){.kind = kind, .tuner = tuner, .phase = phase, .object = object, .desired = desired};
        return s;
}
