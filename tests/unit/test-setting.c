/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What setting kinds keep between passes (src/core/setting.c): the table of processes the kernel refused
 * to move is bounded and forgets the gone ones. On this machine's /proc. */
#include <sys/wait.h>

#include "core/setting.h"
#include "test.h"

/* A process that has exited and been reaped: its TaskInfo as it was while it lived. */
static TaskInfo gone_process(void)
{
        TaskInfo t = {};
        int p[2];
        pid_t pid;

        if (pipe(p) < 0)
                abort();
        pid = fork();
        if (pid == 0) {
                char c;
                close(p[1]);
                (void)!read(p[0], &c, 1); /* until the parent read this process's stat */
                _exit(0);
        }
        CHECK_INTEQ(task_info((unsigned)pid, &t), 0);
        close(p[1]);
        close(p[0]);
        (void)waitpid(pid, NULL, 0);
        return t;
}

TEST(refused_processes_that_are_gone_are_forgotten)
{
        SettingContext c;
        TaskInfo self, reused, gone = gone_process();

        setting_context_init(&c, NULL);
        CHECK_INTEQ(task_info((unsigned)getpid(), &self), 0);
        reused = self;
        reused.starttime++; /* this PID, but an older process's: that one is gone */
        setting_context_refuse(&c, &self);
        setting_context_refuse(&c, &gone);
        setting_context_refuse(&c, &reused);
        CHECK(setting_context_refused(&c, &gone));
        CHECK_INTEQ(setting_context_prune_refused(&c), 2);
        CHECK(setting_context_refused(&c, &self));
        CHECK(!setting_context_refused(&c, &gone));
        CHECK(!setting_context_refused(&c, &reused));
        setting_context_clear(&c);
}

TEST(refused_table_is_bounded)
{
        SettingContext c;
        TaskInfo self, t = gone_process();

        setting_context_init(&c, NULL);
        CHECK_INTEQ(task_info((unsigned)getpid(), &self), 0);
        /* Never more than REFUSED_MAX, and once full the gone ones make room for new ones. */
        for (unsigned i = 0; i < REFUSED_MAX; i++, t.starttime++)
                setting_context_refuse(&c, &t);
        CHECK_INTEQ(g_hash_table_size(c.refused), REFUSED_MAX);
        setting_context_refuse(&c, &self);
        CHECK_INTEQ(g_hash_table_size(c.refused), 1);
        CHECK(setting_context_refused(&c, &self));
        setting_context_clear(&c);
}

TEST_MAIN(T(refused_processes_that_are_gone_are_forgotten), T(refused_table_is_bounded))
