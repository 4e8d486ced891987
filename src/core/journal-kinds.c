/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What each journal may hold. An entry is replayed as root on restore: a planted or garbled one must not
 * become a write anywhere else than where its kind writes, so every entry is checked against its
 * journal's kinds and its kind's objects before it is kept. */
#include <limits.h>
#include <sys/stat.h>

#include "core/cgroupfs.h"
#include "core/journal-read.h"
#include "core/member-origin.h"
#include "core/resctrl.h"
#include "core/tracefs.h"
#include "shared/sysfs.h"

/* Every path component is a plain name: no "", "." or "..", nothing a person or a path walk reads two
 * ways. */
static bool path_plain(const char *path)
{
        const char *p = path;

        if (*p != '/')
                return false;
        while (*p == '/') {
                const char *name = p + 1, *end = strchrnul(name, '/');
                size_t len = (size_t)(end - name);

                if (len == 0 || (len == 1 && name[0] == '.') || (len == 2 && strneq(name, "..", 2)))
                        return false;
                for (const char *c = name; c < end; c++)
                        if ((unsigned char)*c < 0x20 || *c == 0x7f)
                                return false;
                p = end;
        }
        return true;
}

/* realpath() of the deepest existing ancestor of path (with the root prefix), the rest appended: where
 * a write to path would land. NULL when nothing of it resolves, or a part of it is a link that leads
 * nowhere (a write could create its target). What cannot be searched (a user's dry run reading debugfs)
 * counts as missing: only root writes, and root can. */
static char *landing(const char *path)
{
        _cleanup_free_ char *full = sys_path(path), *head = xstrdup(full);

        for (;;) {
                char buf[PATH_MAX];
                struct stat st;
                char *slash;

                if (realpath(head, buf))
                        return xasprintf("%s%s", buf, full + strlen(head));
                if (errno != EACCES && ((errno != ENOENT && errno != ENOTDIR) || lstat(head, &st) >= 0))
                        return NULL;
                slash = strrchr(head, '/');
                if (!slash || slash == head)
                        return NULL;
                *slash = 0;
        }
}

/* object lies in the tree at root (a kernel path) and, as far as it exists, resolves into it: no
 * symbolic link on the way leads out. */
static bool within(const char *object, const char *root)
{
        _cleanup_free_ char *where = NULL, *top = NULL;
        const char *rest = startswith(object, root);

        if (!rest || (*rest != '/' && *rest != 0) || !path_plain(object))
                return false;
        where = landing(object);
        top = landing(root);
        if (!where || !top)
                return false;
        rest = startswith(where, top);
        return rest && (*rest == '/' || *rest == 0);
}

bool journal_path_within(const char *object, const char *root)
{
        return within(object, root);
}

/* A key rtctl never writes (sys_path_denied()), named directly or through a link to it. */
static bool denied(const char *object)
{
        _cleanup_free_ char *where = NULL, *top = NULL;
        const char *rel;

        if (sys_path_denied(object))
                return true;
        where = landing(object);
        top = landing("/");
        if (!where || !top)
                return true;
        rel = streq(top, "/") ? where : startswith(where, top);
        return !rel || sys_path_denied(rel);
}

static bool digits(const char *s, size_t len)
{
        if (len == 0 || len > 10)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!g_ascii_isdigit(s[i]))
                        return false;
        return true;
}

/* "/proc/PID/NAME" or, with task, "/proc/PID/task/TID/NAME": one named attribute of one process or
 * thread. No "self": a PID of its own. */
static bool proc_object(const char *object, bool task, const char *const *names)
{
        const char *p = startswith(object, "/proc/"), *slash;

        if (!p || !(slash = strchr(p, '/')) || !digits(p, (size_t)(slash - p)))
                return false;
        p = slash + 1;
        if (task) {
                if (!(p = startswith(p, "task/")) || !(slash = strchr(p, '/')) ||
                    !digits(p, (size_t)(slash - p)))
                        return false;
                p = slash + 1;
        }
        for (; *names; names++)
                if (streq(p, *names))
                        return true;
        return false;
}

/* "systemd:UNIT" + suffix: a unit name systemd would take, and no more. */
static bool unit_object(const char *object, const char *unit_type, const char *suffix)
{
        const char *u = startswith(object, "systemd:");
        size_t len;

        if (!u || !endswith(u, suffix))
                return false;
        len = strlen(u) - strlen(suffix);
        if (len == 0 || len > 255 || u[0] == '.' || u[0] == '-')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!g_ascii_isalnum(u[i]) && !strchr("_.@\\-", u[i]))
                        return false;
        if (unit_type) {
                _cleanup_free_ char *unit = xstrndup(u, len);
                return endswith(unit, unit_type);
        }
        return memchr(u, '.', len) != NULL;
}

/* The cgroup tree rtctl writes in: under /sys/fs/cgroup, or where this system mounts its cpuset
 * hierarchy (a v1 cpuset mounted elsewhere). */
static bool in_cgroup(JournalCheck *c, const char *object)
{
        if (within(object, "/sys/fs/cgroup"))
                return true;
        if (!c->cgroup_known) {
                CgroupInfo info = {};

                c->cgroup_known = true;
                if (cgroup_discover(&info) >= 0 && info.mount && !startswith(info.mount, "/sys/fs/cgroup"))
                        c->cgroup_mount = TAKE_PTR(info.mount);
                cgroup_info_clear(&info);
        }
        return c->cgroup_mount && within(object, c->cgroup_mount);
}

#define RTCTL_SLICE "rtctl.slice" /* ISOLATED_SLICE of src/tuners/cpuset.c */

/* The services the conflict tuner stops (its rivals, src/tuners/conflict.c): restore unmasks and starts
 * them, so no other unit. */
static bool rival_service(const char *object)
{
        static const char *const units[] = {"systemd:irqbalance.service", "systemd:tuned.service",
                                            "systemd:power-profiles-daemon.service",
                                            "systemd:scx_loader.service", "systemd:scx.service"};

        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(object, units[i]))
                        return true;
        return false;
}

/* A cgroup below the mount as /proc/PID/cgroup names it: "/" or a plain path. */
static bool cgroup_name(const char *path)
{
        return streq(path, "/") || path_plain(path);
}

/* The cgroups an original names, which restore moves processes to or from. */
static bool runtime_original(JournalCheck *c, const SettingKind *kind, const char *original)
{
        if (kind == &setting_kind_procs) {
                const char *src = startswith(original, "all from ");
                return !src || in_cgroup(c, src);
        }
        if (kind == &setting_kind_member) {
                MemberOrigin o;
                bool ok;

                if (member_origin_parse(original, &o) < 0)
                        return cgroup_name(original);
                ok = cgroup_name(o.path);
                member_origin_clear(&o);
                return ok;
        }
        if (kind == &setting_kind_thread) { /* "CPUSET CPULIST" (v1), "CGROUP" (v2) */
                _cleanup_free_ char *cpuset = xstrndup(original, strcspn(original, " "));
                return cgroup_name(cpuset);
        }
        /* What rtctld made in tracefs is only ever taken away again. */
        if (kind == &setting_kind_tracefs_instance)
                return streq(original, "absent");
        if (kind == &setting_kind_tracefs_mount)
                return streq(original, "unmounted");
        return true;
}

static bool runtime_object(JournalCheck *c, const SettingKind *kind, const char *object)
{
        static const char *const member[] = {"cpuset", "cgroup", NULL},
                                 *const affinity[] = {"affinity", NULL}, *const sched[] = {"sched", NULL},
                                 *const thread[] = {"cpuset", "cgroup", NULL};

        if (kind == &setting_kind_file)
                return (within(object, "/proc/sys") || within(object, "/sys") || in_cgroup(c, object)) &&
                       !denied(object);
        if (kind == &setting_kind_choice)
                return within(object, "/sys") && !denied(object);
        if (kind == &setting_kind_cpumask) /* workqueues, and /proc/irq/default_smp_affinity */
                return (within(object, "/sys") || within(object, "/proc/irq")) && !denied(object);
        if (kind == &setting_kind_cpulist)
                return (within(object, "/proc/sys") || within(object, "/sys") || in_cgroup(c, object)) &&
                       !denied(object);
        if (kind == &setting_kind_irq_affinity)
                return within(object, "/proc/irq");
        if (kind == &setting_kind_cgroup || kind == &setting_kind_procs || kind == &setting_kind_subtree ||
            kind == &setting_kind_partition)
                return in_cgroup(c, object);
        if (kind == &setting_kind_member)
                return proc_object(object, false, member);
        if (kind == &setting_kind_affinity)
                return proc_object(object, false, affinity);
        if (kind == &setting_kind_sched)
                return proc_object(object, false, sched) || proc_object(object, true, sched);
        if (kind == &setting_kind_thread)
                return proc_object(object, true, thread);
        /* The cpuset tuner gives every top-level slice and scope the housekeeping CPUs, and makes its own
         * rtctl.slice the isolated partition; the conflict tuner stops the rival services. */
        if (kind == &setting_kind_unit_cpus)
                return unit_object(object, ".slice", ":AllowedCPUs") ||
                       unit_object(object, ".scope", ":AllowedCPUs");
        if (kind == &setting_kind_unit_partition)
                return streq(object, "systemd:" RTCTL_SLICE ":CPUSetPartition");
        if (kind == &setting_kind_slice)
                return streq(object, "systemd:" RTCTL_SLICE);
        if (kind == &setting_kind_service)
                return rival_service(object);
        if (kind == &setting_kind_pmqos)
                return streq(object, "/dev/cpu_dma_latency");
        if (kind == &setting_kind_sched_feature)
                return within(object, "/sys/kernel/debug/sched/features");
        if (kind == &setting_kind_resctrl_group || kind == &setting_kind_schemata)
                return within(object, RESCTRL_ROOT);
        if (kind == &setting_kind_tracefs_instance || kind == &setting_kind_tracefs_mount)
                return tracefs_journal_object(kind, object);
        return false;
}

static bool kind_of_scope(JournalScope scope, const SettingKind *kind)
{
        bool boot = kind->boot_object != NULL;

        return scope == JOURNAL_BOOTARGS ? boot : !boot;
}

static const char *scope_name(JournalScope scope)
{
        return scope == JOURNAL_BOOTARGS ? "the boot arguments journal" : "the runtime journal";
}

char *journal_check_entry(JournalCheck *c, const SettingKind *kind, const char *object)
{
        assert(c);

        if (!kind_of_scope(c->scope, kind))
                return xasprintf("kind '%s' does not belong in %s", kind->name, scope_name(c->scope));
        if (c->scope == JOURNAL_BOOTARGS ? !kind->boot_object(object) : !runtime_object(c, kind, object))
                return xasprintf("'%.64s' is not an object kind '%s' writes", object, kind->name);
        return NULL;
}

char *journal_check_original(JournalCheck *c, const SettingKind *kind, const char *original)
{
        assert(c);

        if (c->scope == JOURNAL_RUNTIME && !runtime_original(c, kind, original))
                return xasprintf("'%.64s' is not a value kind '%s' restores", original, kind->name);
        return NULL;
}

void journal_check_clear(JournalCheck *c)
{
        assert(c);

        free(c->cgroup_mount);
        c->cgroup_mount = NULL;
        c->cgroup_known = false;
}
