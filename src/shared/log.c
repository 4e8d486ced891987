/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

#include "shared/log.h"

static int max_level = LOG_INFO;
static bool to_journal;
static const char *ident = "rtctl";

static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        struct stat st;
        unsigned long dev, ino;

        if (!e || sscanf(e, "%lu:%lu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == dev && st.st_ino == ino;
}

void log_setup(const char *name)
{
        const char *e = getenv("RTCTL_LOG_LEVEL");

        ident = name;
        to_journal = stderr_is_journal();
        if (e) {
                if (streq(e, "debug"))
                        max_level = LOG_DEBUG;
                else if (streq(e, "info"))
                        max_level = LOG_INFO;
                else if (streq(e, "notice"))
                        max_level = LOG_NOTICE;
                else if (streq(e, "warning"))
                        max_level = LOG_WARNING;
                else if (streq(e, "err"))
                        max_level = LOG_ERR;
        }
}

void log_set_max_level(int level)
{
        max_level = level;
}

int log_internal(int level, int error, const char *file, int line, const char *fmt, ...)
{
        char buf[2048];
        va_list ap;
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        errno = error;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap); /* glibc expands %m from errno */
        va_end(ap);

        if (to_journal) {
                char codefile[256], codeline[32];
                snprintf(codefile, sizeof codefile, "CODE_FILE=%s", file);
                snprintf(codeline, sizeof codeline, "CODE_LINE=%d", line);
                sd_journal_print_with_location(level, codefile, codeline, ident, "%s", buf);
        } else
                fprintf(stderr, "%s%s\n", level <= LOG_WARNING && level > LOG_ERR ? "warning: " : "", buf);

        errno = saved;
        return -error;
}
