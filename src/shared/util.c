/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "shared/util.h"

const char *startswith(const char *s, const char *prefix)
{
        assert(s);
        assert(prefix);

        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

bool endswith(const char *s, const char *suffix)
{
        assert(s);
        assert(suffix);

        size_t ls = strlen(s), lx = strlen(suffix);
        return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

char *strstrip(char *s)
{
        assert(s);

        while (isspace((unsigned char)*s))
                s++;
        size_t l = strlen(s);
        while (l > 0 && isspace((unsigned char)s[l - 1]))
                s[--l] = 0;
        return s;
}

static void oom(void)
{
        fputs("Out of memory.\n", stderr);
        abort();
}

char *xasprintf(const char *fmt, ...)
{
        va_list ap;
        char *s;

        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0)
                oom();
        va_end(ap);
        return s;
}

void *xmalloc0(size_t n)
{
        void *p = calloc(1, n ?: 1);
        if (!p)
                oom();
        return p;
}

char *xstrdup(const char *s)
{
        char *p;

        if (!s)
                return NULL;
        p = strdup(s);
        if (!p)
                oom();
        return p;
}

char *xstrndup(const char *s, size_t n)
{
        assert(s);

        char *p = strndup(s, n);

        if (!p)
                oom();
        return p;
}

void *xreallocarray(void *p, size_t n, size_t size)
{
        size_t bytes;
        void *q;

        if (__builtin_mul_overflow(n, size, &bytes))
                oom();
        q = realloc(p, bytes ?: 1);
        if (!q)
                oom();
        return q;
}

void *greedy_realloc(void **p, size_t *allocated, size_t need, size_t size)
{
        size_t bytes;
        void *q;

        assert(p);
        assert(allocated);
        assert(size > 0);

        if (need <= *allocated)
                return *p;
        if (__builtin_mul_overflow(need, size, &bytes))
                oom();
        if (bytes <= SIZE_MAX / 2) {
                need *= 2;
                bytes *= 2;
        }
        q = realloc(*p, bytes);
        if (!q)
                oom();
        *p = q;
        *allocated = need;
        return q;
}

char *glob_error(const char *g)
{
        for (const char *p = g; *p; p++) {
                if (*p == '\\') {
                        if (!p[1])
                                return xasprintf("'%s' ends in a lone backslash", g);
                        p++;
                } else if (*p == '[') {
                        const char *q = p + 1;
                        if (*q == '!' || *q == '^')
                                q++;
                        if (*q == ']') /* a ']' first in a bracket is a member */
                                q++;
                        while (*q && *q != ']')
                                q++;
                        if (!*q)
                                return xasprintf("'%s': the '[' at %zu has no closing ']'", g,
                                                 (size_t)(p - g) + 1);
                        p = q;
                }
        }
        return NULL;
}

size_t utf8_cut(const char *s, size_t max)
{
        assert(s);

        size_t n = strlen(s);

        if (n <= max)
                return n;
        /* Back off continuation bytes (10xxxxxx), so a multi-byte character is never split. */
        while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
                max--;
        return max;
}

/* The length of the well-formed UTF-8 character at s (1 to 4 bytes) and its code point, or 0 for a byte
 * that starts none: a stray continuation byte, an overlong form, a surrogate, beyond U+10FFFF, cut short. */
static size_t utf8_char(const unsigned char *s, uint32_t *ret)
{
        size_t len = s[0] < 0x80                   ? 1
                     : s[0] >= 0xc2 && s[0] < 0xe0 ? 2
                     : s[0] >= 0xe0 && s[0] < 0xf0 ? 3
                     : s[0] >= 0xf0 && s[0] < 0xf5 ? 4
                                                   : 0;
        uint32_t c = len == 1 ? s[0] : len == 2 ? s[0] & 0x1f : len == 3 ? s[0] & 0x0f : s[0] & 0x07;

        if (len == 0)
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                c = c << 6 | (s[i] & 0x3f);
        }
        if ((len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff))) ||
            (len == 4 && (c < 0x10000 || c > 0x10ffff)))
                return 0;
        *ret = c;
        return len;
}

/* Characters that change how the rest of a line reads rather than standing for themselves: C0 and C1
 * controls and DEL (a newline starts a forged line, ESC drives the terminal), the Unicode line and
 * paragraph separators, and the bidirectional controls that reorder what follows on screen. */
static bool unsafe_char(uint32_t c)
{
        return c < 0x20 || (c >= 0x7f && c < 0xa0) || c == 0x61c || c == 0x200e || c == 0x200f ||
               (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

bool text_printable(const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        uint32_t c;

        while (*p) {
                size_t len = utf8_char(p, &c);
                if (len == 0 || unsafe_char(c))
                        return false;
                p += len;
        }
        return true;
}

static char *escape(const char *s, size_t n, bool backslash)
{
        const unsigned char *p = (const unsigned char *)s, *end = p + strnlen(s, n);
        char *out = xmalloc0((size_t)(end - p) * 4 + 1), *o = out;
        uint32_t c;

        while (p < end) {
                size_t len = utf8_char(p, &c);
                /* A backslash too, so that an escape in the output always stands for a byte escaped. */
                bool esc = len == 0 || unsafe_char(c) || p + len > end || (backslash && *p == '\\');
                if (len == 0)
                        len = 1;
                for (size_t i = 0; i < len && p < end; i++, p++) {
                        if (esc)
                                o += sprintf(o, "\\x%02x", *p);
                        else
                                *o++ = (char)*p;
                }
        }
        *o = '\0';
        return out;
}

char *text_escape_n(const char *s, size_t n)
{
        return escape(s, n, true);
}

char *text_escape_controls(const char *s)
{
        return escape(s, SIZE_MAX, false);
}

char *text_escape(const char *s)
{
        return text_escape_n(s, SIZE_MAX);
}

char *echo_text(const char *s)
{
        assert(s);

        size_t n = strlen(s), cut = utf8_cut(s, ECHO_MAX);
        _cleanup_free_ char *shown = escape(s, cut, false); /* quoted input: a backslash stays */

        if (n <= ECHO_MAX)
                return TAKE_PTR(shown);
        return xasprintf("%s...(%zu bytes)", shown, n);
}

void strv_free(char **l)
{
        if (!l)
                return;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
}

size_t strv_length(char *const *l)
{
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

int strv_push(char ***l, char *s)
{
        assert(l);

        size_t n = strv_length(*l);
        char **c = xreallocarray(*l, n + 2, sizeof(char *));
        c[n] = s;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

void strv_append(char ***l, size_t *n, char *s)
{
        assert(l);
        assert(n);

        /* Room for n entries and the NULL is the power of two at or above n + 1; it doubles when n + 1
         * reaches one, so n appends cost O(n) where strv_push's scan for the end costs O(n^2). */
        if (((*n + 1) & *n) == 0)
                *l = xreallocarray(*l, *n + 1, 2 * sizeof(char *));
        (*l)[(*n)++] = s;
        (*l)[*n] = NULL;
}

bool strv_contains(char *const *l, const char *s)
{
        if (l)
                for (; *l; l++)
                        if (streq(*l, s))
                                return true;
        return false;
}

char **strv_split(const char *s, const char *separators)
{
        char **l = xmalloc0(sizeof(char *));
        const char *p = s;

        while (*p) {
                p += strspn(p, separators);
                if (!*p)
                        break;
                size_t n = strcspn(p, separators);
                strv_push(&l, xstrndup(p, n));
                p += n;
        }
        return l;
}

int safe_atou(const char *s, unsigned *ret)
{
        char *end;
        unsigned long v;

        assert(ret);

        if (isempty(s) || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0)
                return -errno;
        if (*end != 0)
                return -EINVAL;
        if (v > UINT_MAX)
                return -ERANGE;
        *ret = (unsigned)v;
        return 0;
}

int safe_atoi(const char *s, int *ret)
{
        char *end;
        long v;

        assert(ret);

        if (isempty(s))
                return -EINVAL;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0)
                return -errno;
        if (*end != 0 || end == s)
                return -EINVAL;
        if (v > INT_MAX || v < INT_MIN)
                return -ERANGE;
        *ret = (int)v;
        return 0;
}

/* Reads fd to its end, at most max bytes: -EFBIG when there is more. */
static int read_fd(int fd, size_t max, char **ret, size_t *ret_size)
{
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 0;

        for (;;) {
                ssize_t k;

                if (alloc - size < 2048)
                        GREEDY_REALLOC(buf, alloc, size + 2048);
                k = read(fd, buf + size, alloc - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                size += (size_t)k;
                if (size > max)
                        return -EFBIG;
        }
        buf[size] = 0;
        if (ret_size)
                *ret_size = size;
        *ret = TAKE_PTR(buf);
        return 0;
}

int read_full_file(const char *path, char **ret, size_t *ret_size)
{
        assert(path);
        assert(ret);

        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return read_fd(fd, SIZE_MAX - 1, ret, ret_size);
}

int read_config_file(const char *path, size_t max, char **ret, size_t *ret_size, char **ret_error)
{
        assert(path);
        assert(ret);

        /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below anyway). */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        int r;

        if (fd < 0) {
                r = -errno;
                *ret_error = xasprintf("%s: cannot read: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                *ret_error = xasprintf("%s: cannot read: %s", path, strerror(-r));
                return r;
        }
        if (!S_ISREG(st.st_mode)) {
                *ret_error = xasprintf("%s: not a regular file (%s): only regular files are read", path,
                                       S_ISDIR(st.st_mode)    ? "a directory"
                                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                       : S_ISCHR(st.st_mode)  ? "a character device"
                                       : S_ISBLK(st.st_mode)  ? "a block device"
                                       : S_ISSOCK(st.st_mode) ? "a socket"
                                                              : "not a file");
                return -EINVAL;
        }
        if ((size_t)st.st_size > max) {
                *ret_error = xasprintf("%s: %jd bytes, more than the %zu a configuration file may have",
                                       path, (intmax_t)st.st_size, max);
                return -EFBIG;
        }
        r = read_fd(fd, max, ret, ret_size);
        if (r == -EFBIG)
                *ret_error =
                    xasprintf("%s: grew past the %zu bytes a configuration file may have", path, max);
        else if (r < 0)
                *ret_error = xasprintf("%s: cannot read: %s", path, strerror(-r));
        return r;
}

int write_all(int fd, const void *data, size_t size)
{
        assert(fd >= 0);
        assert(data || size == 0);

        const char *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                size -= (size_t)k;
        }
        return 0;
}

int write_file_atomic(const char *path, const char *content, bool durable)
{
        assert(path);
        assert(content);

        _cleanup_free_ char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, content, strlen(content));
        if (r >= 0 && ((durable && fsync(fd) < 0) || rename(tmp, path) < 0))
                r = -errno;
        if (r < 0)
                unlink(tmp);
        return r;
}

int write_file_new(const char *path, const void *data, size_t size)
{
        _cleanup_close_ int fd = -EBADF;
        int r;

        assert(path);
        assert(data || size == 0);

        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        r = write_all(fd, data, size);
        if (r < 0)
                unlink(path);
        return r;
}

int mkdir_p(const char *path, mode_t mode)
{
        assert(path);

        _cleanup_free_ char *p = xstrdup(path);

        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

uint64_t now_usec(int clock)
{
        struct timespec ts;
        clock_gettime(clock, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

const char *sched_policy_name(int policy)
{
        if (policy < 0)
                return "?";
        switch (policy & ~SCHED_RESET_ON_FORK) {
        case SCHED_OTHER:
                return "other";
        case SCHED_FIFO:
                return "fifo";
        case SCHED_RR:
                return "rr";
        case SCHED_BATCH:
                return "batch";
        case SCHED_IDLE:
                return "idle";
        case 6: /* SCHED_DEADLINE, which glibc's <sched.h> does not name */
                return "deadline";
        default:
                return "?";
        }
}
