/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Processes attached to the isolated CPUs (AttachProcess, `rtctl attach`), kept in the runtime directory
 * so that a restarted daemon keeps them there. */
#include <poll.h>
#include <unistd.h>

#include "core/tasks.h"
#include "daemon/manager.h"
#include "shared/log.h"

static void save_attached(Manager *m)
{
        _cleanup_free_ char *path = xasprintf("%s/attached", m->runtime_dir);
        g_autoptr(GString) content = g_string_new(NULL);
        int r;

        for (size_t i = 0; i < m->n_attached; i++)
                g_string_append_printf(content, "%u %llu %u\n", m->attached[i].pid, m->attached[i].starttime,
                                       (unsigned)m->attached[i].uid);
        r = m->n_attached ? write_file_atomic(path, content->str, false)
                          : (unlink(path) < 0 && errno != ENOENT ? -errno : 0);
        if (r < 0)
                log_warning_errno(r, "Failed to save the attached processes to %s: %m, ignoring", path);
}

static void add_attached(Manager *m, Attached a)
{
        GREEDY_REALLOC(m->attached, m->attached_allocated, m->n_attached + 1);
        m->attached[m->n_attached++] = a;
}

void manager_prune_attached(Manager *m)
{
        size_t w = 0;

        assert(m);

        for (size_t i = 0; i < m->n_attached; i++) {
                TaskInfo t;
                if (task_info(m->attached[i].pid, &t) >= 0 && t.starttime == m->attached[i].starttime)
                        m->attached[w++] = m->attached[i];
                else
                        log_info("Attached process %u is gone.", m->attached[i].pid);
        }
        if (w != m->n_attached) {
                m->n_attached = w;
                save_attached(m);
        }
}

void manager_load_attached(Manager *m)
{
        assert(m);

        _cleanup_free_ char *path = xasprintf("%s/attached", m->runtime_dir), *s = NULL;
        _cleanup_strv_free_ char **lines = NULL;

        if (read_full_file(path, &s, NULL) < 0)
                return;
        lines = strv_split(s, "\n");
        for (char **l = lines; *l; l++) {
                Attached a = {};
                unsigned uid = 0; /* an earlier version's file names no user: root's, so no share */
                if (sscanf(*l, "%u %llu %u", &a.pid, &a.starttime, &uid) >= 2 &&
                    m->n_attached < ATTACHED_MAX) {
                        a.uid = (uid_t)uid;
                        add_attached(m, a);
                }
        }
        manager_prune_attached(m);
        if (m->n_attached)
                log_info("%zu processes stay attached to the isolated CPUs from an earlier run.",
                         m->n_attached);
}

TaskId *manager_attached_pids(const Manager *m)
{
        assert(m);

        TaskId *pids = xmalloc0(sizeof(TaskId) * (m->n_attached + 1));

        for (size_t i = 0; i < m->n_attached; i++)
                pids[i] = (TaskId){m->attached[i].pid, m->attached[i].starttime};
        return pids;
}

static int attach_task(Manager *m, unsigned pid, uid_t uid, const TaskInfo *task)
{
        const TaskInfo t = *task;
        size_t theirs = 0;

        if (pid == 1 || (t.flags & PF_KTHREAD))
                return -EPERM;
        for (size_t i = 0; i < m->n_attached; i++) {
                if (m->attached[i].pid == pid)
                        return -EEXIST;
                if (m->attached[i].uid == uid)
                        theirs++;
        }
        if (!m->status.isolated || cpuset_empty(m->status.isolated))
                return -ENXIO;
        /* Those gone no longer count. */
        if (m->n_attached >= ATTACHED_MAX || (uid != 0 && theirs >= ATTACHED_PER_USER_MAX)) {
                manager_prune_attached(m);
                theirs = 0;
                for (size_t i = 0; i < m->n_attached; i++)
                        if (m->attached[i].uid == uid)
                                theirs++;
        }
        if (uid != 0 && theirs >= ATTACHED_PER_USER_MAX)
                return -EDQUOT;
        if (m->n_attached >= ATTACHED_MAX)
                return -EUSERS;
        add_attached(m, (Attached){.pid = pid, .starttime = t.starttime, .uid = uid});
        save_attached(m);
        _cleanup_free_ char *comm = text_escape(t.comm);
        log_info("Attaching process %u (%s) to the isolated CPUs.", pid, comm);
        manager_mark_cpu_tuners(m);
        manager_schedule_pass(m, "attach");
        return 0;
}

int manager_attach(Manager *m, unsigned pid, uid_t uid)
{
        TaskInfo t;

        assert(m);

        /* A zombie has exited: there is nothing left to place. */
        if (pid == 0 || task_info(pid, &t) < 0 || (t.flags & PF_EXITING))
                return -ESRCH;
        return attach_task(m, pid, uid, &t);
}

int manager_attach_pidfd(Manager *m, int fd, uid_t uid, unsigned *ret_pid)
{
        TaskInfo t;
        int pid = pidfd_get_pid(fd);

        assert(m);

        if (pid < 0)
                return pid;
        if (pid == 0 || task_info((unsigned)pid, &t) < 0)
                return -ESRCH;
        /* Still alive after its start time was read: the PID is still the pidfd's process, so the
         * start time is its own, and AttachProcess's (PID, start time) check takes over from here. A
         * pidfd polls readable once its process has exited; unlike a signal 0 this needs no CAP_KILL
         * for another user's process, so the unit does without that capability. */
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 0) != 0)
                return -ESRCH;
        *ret_pid = (unsigned)pid;
        return attach_task(m, (unsigned)pid, uid, &t);
}

int manager_detach(Manager *m, unsigned pid)
{
        assert(m);

        for (size_t i = 0; i < m->n_attached; i++)
                if (m->attached[i].pid == pid) {
                        memmove(&m->attached[i], &m->attached[i + 1],
                                sizeof(Attached) * (m->n_attached - i - 1));
                        m->n_attached--;
                        save_attached(m);
                        log_info("Detaching process %u.", pid);
                        manager_mark_cpu_tuners(m);
                        manager_schedule_pass(m, "detach");
                        return 0;
                }
        return -ENOENT;
}
