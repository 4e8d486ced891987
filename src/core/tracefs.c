/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/journal-read.h"
#include "core/tracefs.h"
#include "shared/sysfs.h"

#define TRACEFS_MAGIC 0x74726163

int tracefs_find(char **ret_dir)
{
        _cleanup_free_ char *mounts = NULL;
        _cleanup_strv_free_ char **lines = NULL;

        if (sys_read("/proc/mounts", &mounts) >= 0) {
                lines = strv_split(mounts, "\n");
                for (char **l = lines; l && *l; l++) {
                        char dev[256], dir[4096], type[64];
                        if (sscanf(*l, "%255s %4095s %63s", dev, dir, type) == 3 && streq(type, "tracefs")) {
                                *ret_dir = xstrdup(dir);
                                return 0;
                        }
                }
        }
        if (sys_exists("/sys/kernel/tracing/available_tracers")) {
                *ret_dir = xstrdup("/sys/kernel/tracing");
                return 0;
        }
        return -ENOENT;
}

/* ---- the journal's kinds ------------------------------------------------------------------------- */

static int instance_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *p = sys_path(object);

        if (streq(value, "present"))
                return mkdir(p, 0700) < 0 && errno != EEXIST ? -errno : 0;
        if (!streq(value, "absent"))
                return -EINVAL;
        /* The kernel refuses (EBUSY) while a file of it is open; the daemon closes its own first. */
        return rmdir(p) < 0 && errno != ENOENT ? -errno : 0;
}

const SettingKind setting_kind_tracefs_instance = {
    .name = "tracefs-instance",
    .read = setting_dir_read,
    .write = instance_write,
    .equal = setting_equal_folded,
    .owns_children = true,
};

static bool is_tracefs(const char *path)
{
        _cleanup_free_ char *p = sys_path(path);
        struct statfs sf;

        return statfs(p, &sf) >= 0 && sf.f_type == TRACEFS_MAGIC;
}

static int mount_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        *ret = xstrdup(is_tracefs(object) ? "mounted" : "unmounted");
        return 0;
}

static int mount_write(SettingContext *ctx, const char *object, const char *value)
{
        if (!isempty(sysroot()))
                return -EOPNOTSUPP; /* a fixture tree is no place to mount */
        if (streq(value, "mounted"))
                return is_tracefs(object) || mount("tracefs", object, "tracefs",
                                                   MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700") >= 0
                           ? 0
                           : -errno;
        if (!streq(value, "unmounted"))
                return -EINVAL;
        /* Only tracefs is ever taken down, and lazily: a shell of someone's inside it keeps nothing. */
        return !is_tracefs(object) || umount2(object, MNT_DETACH | UMOUNT_NOFOLLOW) >= 0 ? 0 : -errno;
}

const SettingKind setting_kind_tracefs_mount = {
    .name = "tracefs-mount",
    .read = mount_read,
    .write = mount_write,
    .equal = setting_equal_folded,
};

static const char *const tracefs_dirs[] = {TRACEFS_MOUNT, "/sys/kernel/debug/tracing"};

/* The instances rtctl makes: rtctld's, and rtctl xruns's recording. */
static const char *const instance_names[] = {SCHED_TRACE_INSTANCE, XRUNS_TRACE_INSTANCE};

bool tracefs_journal_object(const SettingKind *kind, const char *object)
{
        if (kind == &setting_kind_tracefs_mount)
                return streq(object, TRACEFS_MOUNT);
        for (size_t i = 0; kind == &setting_kind_tracefs_instance && i < ELEMENTSOF(tracefs_dirs); i++)
                for (size_t n = 0; n < ELEMENTSOF(instance_names); n++) {
                        _cleanup_free_ char *want =
                            xasprintf("%s/instances/%s", tracefs_dirs[i], instance_names[n]);
                        if (streq(object, want))
                                return true;
                }
        return false;
}

/* ---- the instance ---------------------------------------------------------------------------------- */

static const char *const events[] = {
    "sys_enter_sched_setscheduler",
    "sys_exit_sched_setscheduler",
    "sys_enter_sched_setattr",
    "sys_exit_sched_setattr",
};

/* One of the usual directories with tracefs in it, or NULL. */
static const char *usual_tracefs(void)
{
        _cleanup_free_ char *found = NULL;

        if (tracefs_find(&found) >= 0)
                for (size_t i = 0; i < ELEMENTSOF(tracefs_dirs); i++)
                        if (streq(found, tracefs_dirs[i]) && is_tracefs(found))
                                return tracefs_dirs[i];
        return NULL;
}

/* Journals object's original before kind writes value. */
static int journalled_write(Journal *j, const char *owner, const SettingKind *kind, const char *object,
                            const char *original, const char *value)
{
        int r;

        journal_remember(j, kind, owner, object, original);
        r = journal_save(j);
        if (r < 0)
                return r;
        return kind->write(NULL, object, value);
}

int tracefs_instance_create(Journal *j, const char *owner, const char *name, char **ret_dir, char **ret_inst,
                            char **ret_why)
{
        _cleanup_free_ char *inst = NULL;
        const char *dir = usual_tracefs();
        int r;

        assert(j);
        assert(name);
        assert(ret_inst);
        assert(ret_why);

        if (!dir) {
                if (!sys_exists(TRACEFS_MOUNT)) {
                        *ret_why = xstrdup("this kernel has no tracefs (" TRACEFS_MOUNT " is missing)");
                        return -EOPNOTSUPP;
                }
                r = journalled_write(j, owner, &setting_kind_tracefs_mount, TRACEFS_MOUNT, "unmounted",
                                     "mounted");
                if (r < 0) {
                        *ret_why = xasprintf("cannot mount tracefs on " TRACEFS_MOUNT ": %s", strerror(-r));
                        (void)sched_trace_restore(j, -EBADF);
                        return -EOPNOTSUPP;
                }
                dir = TRACEFS_MOUNT;
        }
        inst = xasprintf("%s/instances/%s", dir, name);
        /* One left by a process killed before it journalled it is ours all the same. */
        (void)instance_write(NULL, inst, "absent");
        /* An instance takes record-cmd from the top level when it is made, and cannot change it after.
         * With it on, enabling an event starts the kernel's comm recording, which hooks sched_switch and
         * sched_wakeup: code patched on every CPU each time the rules come and go, and a probe on every
         * context switch, for names rtctl never reads (it reads /proc, or the events' own fields). So the
         * top level's is off while the instance is made, and back at once; journalled, in case of a kill
         * in between. */
        _cleanup_free_ char *record_cmd = xasprintf("%s/options/record-cmd", dir), *was = NULL;
        bool cmd_off = false;
        if (sys_read(record_cmd, &was) >= 0 && streq(strstrip(was), "1"))
                cmd_off = journalled_write(j, owner, &setting_kind_file, record_cmd, "1", "0") >= 0;
        r = journalled_write(j, owner, &setting_kind_tracefs_instance, inst, "absent", "present");
        if (cmd_off && setting_kind_file.write(NULL, record_cmd, "1") >= 0) {
                g_autoptr(GHashTable) back = g_hash_table_new(g_str_hash, g_str_equal);
                g_hash_table_add(back, record_cmd);
                journal_forget_set(j, back);
                (void)journal_save(j);
        }
        if (r < 0) {
                *ret_why = xasprintf("cannot make %s: %s", inst, strerror(-r));
                (void)sched_trace_restore(j, -EBADF);
                return -EOPNOTSUPP;
        }
        if (ret_dir)
                *ret_dir = xstrdup(dir);
        *ret_inst = TAKE_PTR(inst);
        return 0;
}

/* -EOPNOTSUPP with a sentence when tracefs at dir lacks one of the syscall events. */
static int check_events(const char *dir, char **ret_why)
{
        for (size_t i = 0; i < ELEMENTSOF(events); i++) {
                _cleanup_free_ char *p = xasprintf("%s/events/syscalls/%s/enable", dir, events[i]);
                if (!sys_exists(p)) {
                        *ret_why = xasprintf("this kernel has no %s tracepoint (CONFIG_FTRACE_SYSCALLS)",
                                             events[i]);
                        return -EOPNOTSUPP;
                }
        }
        return 0;
}

int sched_trace_start(Journal *j, int *ret_fd, char **ret_why)
{
        _cleanup_free_ char *dir = NULL, *inst = NULL, *pipe = NULL;
        const char *found = usual_tracefs();
        int r, fd;

        assert(j);
        assert(ret_fd);
        assert(ret_why);

        /* Where tracefs is there already, a kernel without the events is told before anything is made;
         * where it had to be mounted, once it is. */
        if (found && (r = check_events(found, ret_why)) < 0)
                return r;
        r = tracefs_instance_create(j, "rtctld", SCHED_TRACE_INSTANCE, &dir, &inst, ret_why);
        if (r < 0)
                return r;
        if (!found && (r = check_events(dir, ret_why)) < 0) {
                (void)sched_trace_restore(j, -EBADF);
                return r;
        }
        /* Small and woken on every event: buffer_percent 0 wakes the reader at the first byte. */
        {
                _cleanup_free_ char *size = xasprintf("%s/buffer_size_kb", inst);
                _cleanup_free_ char *percent = xasprintf("%s/buffer_percent", inst);
                (void)sys_write(size, "64");
                if (sys_exists(percent))
                        r = sys_write(percent, "0");
        }
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(events); i++) {
                _cleanup_free_ char *p = xasprintf("%s/events/syscalls/%s/enable", inst, events[i]);
                r = sys_write(p, "1");
        }
        if (r < 0) {
                *ret_why = xasprintf("cannot set up %s: %s", inst, strerror(-r));
                (void)sched_trace_restore(j, -EBADF);
                return -EOPNOTSUPP;
        }
        pipe = xasprintf("%s/trace_pipe", inst);
        {
                _cleanup_free_ char *p = sys_path(pipe);
                fd = open(p, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        }
        if (fd < 0) {
                r = -errno;
                *ret_why = xasprintf("cannot open %s: %s", pipe, strerror(-r));
                (void)sched_trace_restore(j, -EBADF);
                return -EOPNOTSUPP;
        }
        *ret_fd = fd;
        return 0;
}

int sched_trace_restore(Journal *j, int fd)
{
        g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);
        int ret = 0;

        assert(j);

        if (fd >= 0)
                close(fd);
        /* Newest first: the instance inside the mount before the mount. */
        for (size_t i = journal_size(j); i-- > 0;) {
                const JournalEntry *e = journal_entry(j, i);
                int r;

                /* This journal holds tracefs alone (its mount, rtctld's instance, the top level's
                 * record-cmd while the instance is made): anything else in it was planted, never
                 * replayed. */
                bool record_cmd = e->kind == &setting_kind_file &&
                                  endswith(e->object, "/options/record-cmd") && streq(e->original, "1");
                if (e->kind != &setting_kind_tracefs_instance && e->kind != &setting_kind_tracefs_mount &&
                    !record_cmd) {
                        g_hash_table_add(done, e->object);
                        if (ret == 0)
                                ret = -EBADMSG;
                        continue;
                }
                r = e->kind->write(NULL, e->object, e->original);
                if (r < 0 && ret == 0)
                        ret = r;
                if (r >= 0)
                        g_hash_table_add(done, e->object);
        }
        journal_forget_set(j, done);
        (void)journal_save(j);
        return ret;
}

int sched_trace_restore_dir(const char *runtime_dir, char **ret_error)
{
        _cleanup_free_ char *path = xasprintf("%s/" SCHED_TRACE_JOURNAL, runtime_dir);
        _cleanup_journal_ Journal *j = NULL;
        int r;

        r = journal_open(path, JOURNAL_RUNTIME, &j, ret_error);
        if (r < 0)
                return r;
        r = sched_trace_restore(j, -EBADF);
        if (r < 0)
                *ret_error = xasprintf("cannot put tracefs back as it was: %s", strerror(-r));
        return r;
}

/* ---- trace_pipe's lines ---------------------------------------------------------------------------- */

static bool parse_uint(const char **p, const char *end, unsigned long long *ret)
{
        unsigned long long v = 0;
        const char *s = *p;

        if (s >= end || !isdigit((unsigned char)*s))
                return false;
        for (; s < end && isdigit((unsigned char)*s); s++) {
                if (v > (ULLONG_MAX - 9) / 10)
                        return false;
                v = v * 10 + (unsigned)(*s - '0');
        }
        *p = s;
        *ret = v;
        return true;
}

/* Hex digits without a prefix ("14b"), as kernels up to 6.17 print an argument. */
static bool parse_bare_hex(const char **p, const char *end, unsigned long long *ret)
{
        unsigned long long v = 0;
        const char *s = *p;
        size_t n = 0;

        for (; s < end && isxdigit((unsigned char)*s); s++, n++) {
                if (n >= 16)
                        return false;
                v = v * 16 + (unsigned)(isdigit((unsigned char)*s)
                                            ? *s - '0'
                                            : (tolower((unsigned char)*s) - 'a' + 10));
        }
        if (n == 0)
                return false;
        *p = s;
        *ret = v;
        return true;
}

/* "0x" and hex digits. */
static bool parse_hex(const char **p, const char *end, unsigned long long *ret)
{
        const char *s = *p + 2;

        if (end - *p < 3 || !strneq(*p, "0x", 2) || !parse_bare_hex(&s, end, ret))
                return false;
        *p = s;
        return true;
}

/* A number as the kernel prints a syscall's argument or result: "0x1f" (older kernels, and pointers) or
 * "31"; "-22" sets *ret_negative. */
static bool parse_number(const char **p, const char *end, unsigned long long *ret, bool *ret_negative)
{
        *ret_negative = *p < end && **p == '-';
        if (*ret_negative)
                (*p)++;
        if (end - *p >= 2 && strneq(*p, "0x", 2))
                return parse_hex(p, end, ret);
        return parse_uint(p, end, ret);
}

static const char *find(const char *s, const char *end, const char *what)
{
        size_t n = strlen(what);

        for (; (size_t)(end - s) >= n; s++)
                if (memcmp(s, what, n) == 0)
                        return s;
        return NULL;
}

/* "<comm>-<TID> [CPU] FLAGS TIMESTAMP: sys_sched_setscheduler(pid: 0x..., ...)" or "... -> 0x0". The
 * comm may hold anything, so the header is read backwards from the "[CPU]" nearest the event. */
int sched_trace_parse_line(const char *line, size_t len, unsigned *ret_caller, unsigned *ret_target,
                           long long *ret_ret)
{
        return sched_trace_parse_line_radix(line, len, 10, ret_caller, ret_target, ret_ret);
}

int sched_trace_parse_line_radix(const char *line, size_t len, int radix, unsigned *ret_caller,
                                 unsigned *ret_target, long long *ret_ret)
{
        const char *end = line + len, *ev = NULL, *p, *bracket, *dash;
        unsigned long long tid, v;
        bool negative;

        assert(line);
        assert(ret_caller);
        assert(ret_target);
        assert(ret_ret);

        if (len == 0 || line[0] == '#')
                return 0;
        for (p = line; (p = find(p, end, ": sys_sched_set"));) {
                ev = p;
                p++;
        }
        if (!ev)
                return 0;
        /* The "[NNN]" between header and event: the last one before it. */
        bracket = NULL;
        for (p = line; p < ev; p++)
                if (*p == '[' && p > line && p[-1] == ' ')
                        bracket = p;
        if (!bracket)
                return 0;
        p = bracket - 1;
        while (p > line && p[-1] == ' ')
                p--;
        /* "comm-TID (TGID) [CPU]" where the record-tgid option is on. */
        if (p > line && p[-1] == ')') {
                while (p > line && p[-1] != '(')
                        p--;
                if (p == line)
                        return 0;
                for (p--; p > line && p[-1] == ' ';)
                        p--;
        }
        dash = p;
        while (dash > line && isdigit((unsigned char)dash[-1]))
                dash--;
        if (dash == p || dash == line || dash[-1] != '-')
                return 0;
        {
                const char *q = dash;
                if (!parse_uint(&q, p, &tid) || tid == 0 || tid > UINT_MAX)
                        return 0;
        }
        p = ev + strlen(": sys_sched_set");
        if (end - p >= 9 && strneq(p, "scheduler", 9))
                p += 9;
        else if (end - p >= 4 && strneq(p, "attr", 4))
                p += 4;
        else
                return 0;
        if (end - p >= 6 && strneq(p, "(pid: ", 6)) {
                p += 6;
                if (p < end && *p != '-' && !(end - p >= 2 && strneq(p, "0x", 2)) && radix != 10) {
                        const char *q = p;
                        unsigned long long dec = 0, hex = 0;
                        bool have_dec =
                            parse_uint(&q, end, &dec) && (q == end || !isxdigit((unsigned char)*q));
                        q = p;
                        if (!parse_bare_hex(&q, end, &hex))
                                return 0;
                        *ret_caller = (unsigned)tid;
                        if (radix == 16 || (have_dec && dec == hex)) { /* 0-9 read alike */
                                *ret_target = hex > INT_MAX ? (unsigned)tid : (unsigned)hex;
                                return 1;
                        }
                        *ret_target = have_dec && dec <= UINT_MAX ? (unsigned)dec : 0;
                        *ret_ret = hex > LLONG_MAX ? 0 : (long long)hex;
                        return 3;
                }
                if (!parse_number(&p, end, &v, &negative))
                        return 0;
                *ret_caller = (unsigned)tid;
                /* A negative pid (printed as such, or as unsigned long) is EINVAL: it names nobody. */
                *ret_target = negative || v > INT_MAX ? (unsigned)tid : (unsigned)v;
                return 1;
        }
        if (end - p >= 4 && strneq(p, " -> ", 4)) {
                p += 4;
                if (!parse_number(&p, end, &v, &negative))
                        return 0;
                *ret_caller = (unsigned)tid;
                *ret_ret = negative ? -1 : (long long)v;
                return 2;
        }
        return 0;
}

static void on_line(SchedTrace *st, const char *line, size_t len, size_t *finished,
                    void (*done)(unsigned tid, void *userdata), void *userdata)
{
        unsigned caller = 0, target = 0;
        long long ret = 0;
        int kind = sched_trace_parse_line_radix(line, len, st->radix, &caller, &target, &ret);

        if (kind == 0 && len > 4 && strneq(line, "CPU:", 4) && find(line, line + len, " [LOST ")) {
                st->lost = true;
                return;
        }

        if (kind == 3) { /* a bare pid, before the probe told how to read it */
                if (target == SCHED_TRACE_PROBE_PID)
                        st->radix = 10;
                else if (ret == SCHED_TRACE_PROBE_PID)
                        st->radix = 16;
                return;
        }
        if (kind == 1 && target == SCHED_TRACE_PROBE_PID)
                return;
        if (kind == 1) {
                size_t i;
                for (i = 0; i < st->n_pending && st->pending[i].caller != caller; i++)
                        ;
                if (i == st->n_pending) {
                        if (st->n_pending < SCHED_TRACE_PENDING)
                                st->n_pending++;
                        else /* calls whose exit never came (the thread died): the oldest goes */
                                i = st->next_evict++ % SCHED_TRACE_PENDING;
                }
                st->pending[i].caller = caller;
                st->pending[i].target = target;
        } else if (kind == 2) {
                for (size_t i = 0; i < st->n_pending; i++) {
                        if (st->pending[i].caller != caller)
                                continue;
                        target = st->pending[i].target ? st->pending[i].target : caller;
                        st->pending[i] = st->pending[--st->n_pending];
                        if (ret == 0) {
                                (*finished)++;
                                done(target, userdata);
                        }
                        break;
                }
        }
}

void sched_trace_probe(void)
{
        struct sched_param param = {};

        /* ESRCH: no process has that PID; only the tracepoint sees the call. */
        (void)syscall(SYS_sched_setscheduler, (pid_t)SCHED_TRACE_PROBE_PID, SCHED_OTHER, &param);
}

size_t sched_events_parse(SchedTrace *st, const char *buf, size_t n,
                          void (*done)(unsigned tid, void *userdata), void *userdata)
{
        size_t finished = 0;

        assert(st);
        assert(buf || n == 0);
        assert(done);

        for (size_t i = 0; i < n; i++) {
                if (buf[i] != '\n') {
                        if (st->line_len < SCHED_TRACE_LINE)
                                st->line[st->line_len++] = buf[i];
                        else
                                st->line_overflow = true;
                        continue;
                }
                if (!st->line_overflow)
                        on_line(st, st->line, st->line_len, &finished, done, userdata);
                st->line_len = 0;
                st->line_overflow = false;
        }
        return finished;
}
