/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <stdio.h>

#include "core/cgroupfs.h"
#include "shared/sysfs.h"

void cgroup_info_clear(CgroupInfo *c)
{
        free(c->mount);
        *c = (CgroupInfo){};
}

int cgroup_discover(CgroupInfo *ret)
{
        _cleanup_free_ char *mounts = NULL, *controllers = NULL, *v2 = NULL;
        _cleanup_strv_free_ char **lines = NULL;
        int r;

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

int cgroup_procs(const char *dir, unsigned **ret, size_t *ret_n)
{
        _cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir), *s = NULL;
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

int cgroup_move(const char *dir, unsigned pid)
{
        _cleanup_free_ char *path = xasprintf("%s/cgroup.procs", dir);
        char buf[16];

        snprintf(buf, sizeof buf, "%u", pid);
        return sys_write(path, buf);
}

int task_info(unsigned pid, TaskInfo *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/stat", pid), *s = NULL;
        char *open, *close, state;
        (void)state;
        unsigned long long field[23] = {};
        int r, n;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        /* "pid (comm) state ppid ..." and comm may hold spaces and parentheses. */
        open = strchr(s, '(');
        close = strrchr(s, ')');
        if (!open || !close || close < open)
                return -EBADMSG;
        *ret = (TaskInfo){.pid = pid};
        snprintf(ret->comm, sizeof ret->comm, "%.*s",
                 (int)MIN((size_t)(close - open - 1), sizeof ret->comm - 1), open + 1);
        /* fields 4.. : ppid pgrp session tty_nr tpgid flags ... starttime is field 22 */
        n = sscanf(close + 2,
                   "%c %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
                   "%llu %llu",
                   &state, &field[4], &field[5], &field[6], &field[7], &field[8], &field[9], &field[10],
                   &field[11], &field[12], &field[13], &field[14], &field[15], &field[16], &field[17],
                   &field[18], &field[19], &field[20], &field[21], &field[22]);
        if (n < 20)
                return -EBADMSG;
        ret->ppid = (unsigned)field[4];
        ret->flags = (unsigned)field[9];
        ret->starttime = field[22];
        return 0;
}

bool task_irq_thread(const TaskInfo *t, unsigned *ret_irq)
{
        const char *p = startswith(t->comm, "irq/");
        char *end;
        unsigned long n;

        if (!(t->flags & PF_KTHREAD) || !p || *p < '0' || *p > '9')
                return false;
        n = strtoul(p, &end, 10);
        if (*end != '-' && *end != 0)
                return false;
        if (ret_irq)
                *ret_irq = (unsigned)n;
        return true;
}

/* The comm of every process, read at most once per pass: several tuners look for their rivals on
 * every pass, and CPU hotplug passes must stay short. */
static struct {
        uint64_t stamp;
        char **comms; /* "PID comm" */
} scan;

unsigned process_find_in(uint64_t stamp, const char *comm)
{
        char want[16];

        if (!stamp || stamp != scan.stamp || !scan.comms) {
                _cleanup_closedir_ DIR *d = sys_opendir("/proc");
                struct dirent *de;
                unsigned pid;

                strv_free(scan.comms);
                scan.comms = NULL;
                scan.stamp = stamp;
                while (d && (de = readdir(d))) {
                        _cleanup_free_ char *p = NULL, *c = NULL;
                        if (safe_atou(de->d_name, &pid) < 0)
                                continue;
                        p = xasprintf("/proc/%u/comm", pid);
                        if (sys_read(p, &c) >= 0)
                                strv_push(&scan.comms, xasprintf("%u %s", pid, c));
                }
                if (!scan.comms)
                        strv_push(&scan.comms, xstrdup("0 "));
        }
        snprintf(want, sizeof want, "%s", comm);
        for (char **l = scan.comms; *l; l++) {
                const char *space = strchr(*l, ' ');
                unsigned pid;
                if (space && streq(space + 1, want) && sscanf(*l, "%u", &pid) == 1)
                        return pid;
        }
        return 0;
}

unsigned process_find(const char *comm)
{
        return process_find_in(0, comm);
}
