/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "cli/cli.h"

static pid_t pager_pid = -1;

/* $RTCTL_PAGER, then $PAGER, then less; an empty or "cat" choice means no pager. */
static const char *pager_command(void)
{
        const char *p = getenv("RTCTL_PAGER");

        if (!p)
                p = getenv("PAGER");
        if (!p)
                return "less";
        if (!*p || streq(p, "cat"))
                return NULL;
        return p;
}

void cli_pager_open(void)
{
        const char *cmd = pager_command();
        int fd[2], r;

        if (!cmd || isatty(STDOUT_FILENO) <= 0 || pipe2(fd, O_CLOEXEC) < 0)
                return;
        fflush(stdout);
        pager_pid = fork();
        if (pager_pid < 0) {
                close(fd[0]);
                close(fd[1]);
                return;
        }
        if (pager_pid == 0) {
                if (dup2(fd[0], STDIN_FILENO) < 0)
                        _exit(EXIT_FAILED);
                /* Quit when it fits on one screen, keep colours, leave the screen as it was: git's and
                 * systemd's defaults. */
                setenv("LESS", "FRX", 0);
                /* rtctl runs as root: less must offer no way out of the pager (!command, v for an editor,
                 * |, saving to a file) and run no input preprocessor. */
                setenv("LESSSECURE", "1", 1);
                unsetenv("LESSOPEN");
                unsetenv("LESSCLOSE");
                /* Any other pager as root could run commands (vi's :!sh, more's !): as systemd does,
                 * root gets less in its secure mode unless RTCTL_PAGERSECURE=0 says otherwise. */
                if (geteuid() == 0 && !streq_ptr(getenv("RTCTL_PAGERSECURE"), "0"))
                        cmd = "less";
                if (streq(cmd, "less"))
                        execlp("less", "less", (char *)NULL);
                else
                        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
                fprintf(stderr, "Cannot run the pager '%s': %s\n", cmd, strerror(errno));
                _exit(EXIT_FAILED);
        }
        close(fd[0]);
        r = dup2(fd[1], STDOUT_FILENO);
        close(fd[1]); /* on failure the pager reads end-of-file and quits */
        if (r < 0) {
                (void)waitpid(pager_pid, NULL, 0);
                pager_pid = -1;
                return;
        }
        /* A pager quit early (q in less) must not kill rtctl before it has cleaned up. */
        signal(SIGPIPE, SIG_IGN);
}

void cli_pager_close(void)
{
        if (pager_pid <= 0)
                return;
        fflush(stdout);
        fclose(stdout);
        while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        pager_pid = -1;
}
