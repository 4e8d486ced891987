/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>

#include "core/cgroupfs.h"
#include "shared/log.h"
#include "shared/sysfs.h"

void cgroup_info_clear(CgroupInfo *c)
{
        assert(c);

        free(c->mount);
        *c = (CgroupInfo){};
}

int cgroup_discover(CgroupInfo *ret)
{
        _cleanup_free_ char *mounts = NULL, *controllers = NULL, *v2 = NULL;
        _cleanup_strv_free_ char **lines = NULL;
        int r;

        assert(ret);

        *ret = (CgroupInfo){.systemd = sys_exists("/run/systemd/system")};
        r = sys_read("/proc/self/mounts", &mounts);
        if (r < 0)
                return r;
        lines = strv_split(mounts, "\n");
        for (char **l = lines; *l; l++) {
                char dev[256], dir[512], type[64], opts[1024];

                if (sscanf(*l, "%255s %511s %63s %1023s", dev, dir, type, opts) != 4)
                        continue;
                if (streq(type, "cgroup")) {
                        _cleanup_strv_free_ char **o = strv_split(opts, ",");
                        if (strv_contains(o, "cpuset") && ret->mode != CGROUP_V1) {
                                free(ret->mount);
                                ret->mount = xstrdup(dir);
                                ret->mode = CGROUP_V1;
                        }
                } else if (streq(type, "cgroup2") && !v2)
                        v2 = xstrdup(dir);
        }
        /* A v1 cpuset hierarchy binds the controller: v2 cannot have it then. */
        if (ret->mode == CGROUP_V1 || !v2)
                return 0;
        _cleanup_free_ char *path = xasprintf("%s/cgroup.controllers", v2);
        if (sys_read(path, &controllers) >= 0) {
                _cleanup_strv_free_ char **c = strv_split(controllers, " \n");
                if (strv_contains(c, "cpuset")) {
                        ret->mode = CGROUP_V2;
                        ret->mount = TAKE_PTR(v2);
                }
        }
        return 0;
}

static int read_ids(const char *dir, const char *file, unsigned **ret, size_t *ret_n);

int cgroup_procs(const char *dir, unsigned **ret, size_t *ret_n)
{
        return read_ids(dir, "cgroup.procs", ret, ret_n);
}

int cgroup_threads(const char *dir, unsigned **ret, size_t *ret_n)
{
        return read_ids(dir, "cgroup.threads", ret, ret_n);
}

static int read_ids(const char *dir, const char *file, unsigned **ret, size_t *ret_n)
{
        assert(dir);
        assert(ret);
        assert(ret_n);

        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file), *s = NULL;
        _cleanup_strv_free_ char **l = NULL;
        unsigned *pids;
        size_t n = 0;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        l = strv_split(s, "\n");
        pids = xmalloc0(sizeof(unsigned) * (strv_length(l) + 1));
        for (char **i = l; *i; i++)
                if (safe_atou(*i, &pids[n]) >= 0)
                        n++;
        *ret = pids;
        *ret_n = n;
        return 0;
}

static int write_id(const char *dir, const char *file, unsigned id)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        char buf[16];

        snprintf(buf, sizeof buf, "%u", id);
        return sys_write(path, buf);
}

int cgroup_move(const char *dir, unsigned pid)
{
        assert(dir);

        return write_id(dir, "cgroup.procs", pid);
}

int cgroup_move_thread(const char *dir, unsigned tid)
{
        assert(dir);

        return write_id(dir, "tasks", tid);
}

int cgroup_move_thread_v2(const char *dir, unsigned tid)
{
        assert(dir);

        return write_id(dir, "cgroup.threads", tid);
}

int cgroup_read_unified(const char *path, char **ret)
{
        _cleanup_free_ char *s = NULL;
        int r;

        assert(path);
        assert(ret);

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
                if (startswith(line, "0::")) {
                        *ret = xstrdup(line + 3);
                        return 0;
                }
        return -ENODATA;
}

static int thread_cgroup(unsigned pid, unsigned tid, char **ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/task/%u/cgroup", pid, tid);

        return cgroup_read_unified(path, ret);
}

int cgroup_gather_threads(const char *mount, unsigned pid)
{
        _cleanup_free_ char *dir = xasprintf("/proc/%u/task", pid), *leader = NULL, *to = NULL;
        _cleanup_free_ unsigned *tids = NULL;
        _cleanup_strv_free_ char **where = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        size_t n = 0, allocated = 0, moved = 0;
        struct dirent *de;
        bool split = false;

        assert(mount);

        if (thread_cgroup(pid, pid, &leader) < 0 || !(d = sys_opendir(dir)))
                return 0; /* gone, or no unified hierarchy: nothing to gather */
        while ((de = readdir(d))) {
                char *cg = NULL;
                unsigned tid;

                if (safe_atou(de->d_name, &tid) < 0 || thread_cgroup(pid, tid, &cg) < 0)
                        continue; /* ended meanwhile */
                GREEDY_REALLOC(tids, allocated, n + 1);
                (void)strv_push(&where, cg);
                tids[n++] = tid;
                split = split || !streq(cg, leader);
        }
        if (!split)
                return 0;
        to = xstrdup(leader);
        if (endswith(to, "/isolated")) {
                _cleanup_free_ char *hk = xasprintf("%.*s/housekeeping", (int)(strlen(to) - 9), to),
                                    *full = xasprintf("%s%s", mount, hk);
                if (sys_exists(full)) {
                        free(to);
                        to = TAKE_PTR(hk);
                }
        }
        _cleanup_free_ char *target = xasprintf("%s%s", mount, to);
        for (size_t i = 0; i < n; i++) {
                int r;

                if (streq(where[i], to))
                        continue;
                r = cgroup_move_thread_v2(target, tids[i]);
                if (r < 0 && r != -ESRCH && r != -ENOENT)
                        return log_debug_errno(r, "Process %u: thread %u not gathered into %s: %m", pid,
                                               tids[i], to);
                moved++;
        }
        log_debug("Process %u: %zu threads gathered into %s before it moves as one.", pid, moved, to);
        return 0;
}

bool cgroup_slice_populated(const char *unit)
{
        assert(unit);

        _cleanup_free_ char *path = xstrdup(""), *object = NULL, *s = NULL;
        size_t n = strlen(unit);

        if (!endswith(unit, ".slice") || n <= 6)
                return false;
        n -= 6;
        for (size_t i = 1; i <= n; i++)
                if (i == n || unit[i] == '-') {
                        char *longer = xasprintf("%s/%.*s.slice", path, (int)i, unit);
                        free(path);
                        path = longer;
                }
        object = xasprintf("/sys/fs/cgroup%s/cgroup.events", path);
        if (sys_read(object, &s) < 0 || !strstr(s, "populated 1"))
                return false;
        log_warning(
            "Not stopping %s: processes are still in it (their way back out failed), and stopping it "
            "would kill them.",
            unit);
        return true;
}
