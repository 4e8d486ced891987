/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/uio.h>
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

/* A name from the kernel or a configuration file, fit for one line (text_escape()), so a newline in a
 * device or file name cannot start a line of its own that reads like another message. */
static void append_escaped(char *buf, size_t size, const char *s)
{
        _cleanup_free_ char *e = text_escape(s);

        strncat(buf, e, size - strlen(buf) - 1);
}

/* Each field is one iovec: sd_journal_sendv sends a value that holds a newline in the protocol's binary
 * form, so no value can end its field early and forge another. */
static void send_journal(int level, int error, const char *tuner, const char *object, const char *file,
                         int line, const char *func, const char *message)
{
        char priority[16], errno_field[32], codeline[32];
        _cleanup_free_ char *msg = xasprintf("MESSAGE=%s", message);
        _cleanup_free_ char *codefile = xasprintf("CODE_FILE=%s", file);
        _cleanup_free_ char *codefunc = xasprintf("CODE_FUNC=%s", func);
        _cleanup_free_ char *identifier = xasprintf("SYSLOG_IDENTIFIER=%s", ident);
        _cleanup_free_ char *tuner_field = tuner ? xasprintf("RTCTL_TUNER=%s", tuner) : NULL;
        _cleanup_free_ char *object_field = object ? xasprintf("RTCTL_OBJECT=%s", object) : NULL;
        struct iovec iov[9];
        int n = 0;

        snprintf(priority, sizeof priority, "PRIORITY=%d", level);
        snprintf(codeline, sizeof codeline, "CODE_LINE=%d", line);
        iov[n++] = (struct iovec){msg, strlen(msg)};
        iov[n++] = (struct iovec){priority, strlen(priority)};
        iov[n++] = (struct iovec){identifier, strlen(identifier)};
        iov[n++] = (struct iovec){codefile, strlen(codefile)};
        iov[n++] = (struct iovec){codeline, strlen(codeline)};
        iov[n++] = (struct iovec){codefunc, strlen(codefunc)};
        if (error) {
                /* As systemd's own daemons log it: the number, no name. */
                snprintf(errno_field, sizeof errno_field, "ERRNO=%d", error);
                iov[n++] = (struct iovec){errno_field, strlen(errno_field)};
        }
        /* sd_journal_sendv refuses a field with an empty value ("RTCTL_TUNER="): then it is left out. */
        if (!isempty(tuner))
                iov[n++] = (struct iovec){tuner_field, strlen(tuner_field)};
        if (!isempty(object))
                iov[n++] = (struct iovec){object_field, strlen(object_field)};
        (void)sd_journal_sendv(iov, n);
}

static char *escape_lines(const char *s)
{
        _cleanup_strv_free_ char **lines = strv_split(s, "\n");
        char *out = xstrdup("");

        for (size_t i = 0; lines && lines[i]; i++) {
                _cleanup_free_ char *e = text_escape_controls(lines[i]), *prev = out;
                out = xasprintf("%s%s%s", prev, i > 0 ? "\n" : "", e);
        }
        return out;
}

_printf_(8, 0) static int log_send(int level, int error, const char *tuner, const char *object,
                                   const char *file, int line, const char *func, const char *fmt, va_list ap)
{
        char buf[2048] = "";
        int saved = errno;

        if (error < 0)
                error = -error;
        if (level > max_level)
                return -error;

        /* The line says which tuner and object, on stderr and in the journal's MESSAGE= alike. */
        if (tuner) {
                append_escaped(buf, sizeof buf, tuner);
                strncat(buf, ": ", sizeof buf - strlen(buf) - 1);
        }
        if (object) {
                append_escaped(buf, sizeof buf, object);
                strncat(buf, ": ", sizeof buf - strlen(buf) - 1);
        }
        errno = error;
        vsnprintf(buf + strlen(buf), sizeof buf - strlen(buf), fmt, ap); /* glibc expands %m from errno */
        /* Messages quote names the kernel or a caller chose (a process's comm, a cgroup): no escape
         * sequence reaches a terminal. Lines stay lines: a profile's errors are one per line. */
        _cleanup_free_ char *shown = escape_lines(buf);

        if (to_journal)
                send_journal(level, error, tuner, object, file, line, func, shown);
        else
                fprintf(stderr, "%s%s\n", level <= LOG_WARNING && level > LOG_ERR ? "warning: " : "", shown);

        errno = saved;
        return -error;
}

int log_object_internal(int level, int error, const char *tuner, const char *object, const char *file,
                        int line, const char *func, const char *fmt, ...)
{
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = log_send(level, error, tuner, object, file, line, func, fmt, ap);
        va_end(ap);
        return r;
}
