/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tasks.h"
#include "shared/sysfs.h"

int task_info(unsigned pid, TaskInfo *ret)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/stat", pid), *s = NULL;
        char *open, *close, state;
        unsigned long long field[23] = {};
        int r, n;

        assert(ret);

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        /* "pid (comm) state ppid ..." and comm may hold spaces and parentheses. */
        open = strchr(s, '(');
        close = strrchr(s, ')');
        if (!open || !close || close < open || close[1] != ' ')
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

bool task_exited(unsigned pid)
{
        TaskInfo t;

        return task_info(pid, &t) < 0 || (t.flags & PF_EXITING);
}

int task_uids(unsigned pid, uid_t *ret_uid, uid_t *ret_euid)
{
        _cleanup_free_ char *path = xasprintf("/proc/%u/status", pid), *s = NULL;
        const char *line;
        unsigned uid, euid;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        line = strstr(s, "\nUid:");
        if (!line || sscanf(line + 5, "%u %u", &uid, &euid) != 2)
                return -EBADMSG;
        *ret_uid = uid;
        *ret_euid = euid;
        return 0;
}

int pidfd_get_pid(int fd)
{
        _cleanup_free_ char *path = xasprintf("/proc/self/fdinfo/%d", fd), *s = NULL;
        const char *line;
        int pid;

        if (read_full_file(path, &s, NULL) < 0)
                return -EBADF;
        line = strstr(s, "\nPid:");
        if (!line || sscanf(line + 5, "%d", &pid) != 1)
                return -EBADF;
        return MAX(pid, 0);
}

static int cmp_pid(const void *a, const void *b)
{
        unsigned x = ((const TaskInfo *)a)->pid, y = ((const TaskInfo *)b)->pid;
        return x < y ? -1 : x > y;
}

static void load(TaskScan *s)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/proc");
        size_t alloc = 0;
        struct dirent *de;

        s->loaded = true;
        while (d && (de = readdir(d))) {
                TaskInfo t;
                unsigned pid;

                if (safe_atou(de->d_name, &pid) < 0 || task_info(pid, &t) < 0)
                        continue; /* not a process, or it exited meanwhile */
                GREEDY_REALLOC(s->tasks, alloc, s->n + 1);
                s->tasks[s->n++] = t;
        }
        /* readdir(/proc) lists PIDs in order already; a sort keeps lookups right if it ever does not. */
        if (s->n > 1)
                qsort(s->tasks, s->n, sizeof(TaskInfo), cmp_pid);
}

const TaskInfo *task_scan_all(TaskScan *s, size_t *ret_n)
{
        assert(s);

        if (!s->loaded)
                load(s);
        *ret_n = s->n;
        return s->tasks;
}

const TaskInfo *task_scan_find(TaskScan *s, unsigned pid, TaskInfo *buf)
{
        TaskInfo key = {.pid = pid};
        const TaskInfo *t;

        assert(s);

        if (!s->loaded)
                load(s);
        t = bsearch(&key, s->tasks, s->n, sizeof(TaskInfo), cmp_pid);
        if (t)
                return t;
        return task_info(pid, buf) >= 0 ? buf : NULL;
}

unsigned task_scan_find_comm(TaskScan *s, const char *comm)
{
        assert(s);
        assert(comm);

        char want[16];
        size_t n;
        const TaskInfo *t = task_scan_all(s, &n);

        snprintf(want, sizeof want, "%s", comm);
        for (size_t i = 0; i < n; i++)
                if (streq(t[i].comm, want))
                        return t[i].pid;
        return 0;
}

void task_scan_clear(TaskScan *s)
{
        assert(s);

        free(s->tasks);
        *s = (TaskScan){};
}

bool irq_thread_parse(const char *comm, unsigned *ret_irq, const char **ret_name)
{
        assert(comm);

        const char *p = startswith(comm, "irq/");
        char *end;
        unsigned long n;

        if (!p || *p < '0' || *p > '9')
                return false;
        n = strtoul(p, &end, 10);
        if ((*end != '-' && *end != 0) || n > UINT32_MAX)
                return false;
        *ret_irq = (unsigned)n;
        if (ret_name)
                *ret_name = *end == '-' ? end + 1 : end;
        return true;
}
