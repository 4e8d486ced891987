/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "shared/util.h"

const char *startswith(const char *s, const char *prefix)
{
        size_t l = strlen(prefix);
        return strncmp(s, prefix, l) == 0 ? s + l : NULL;
}

bool endswith(const char *s, const char *suffix)
{
        size_t ls = strlen(s), lx = strlen(suffix);
        return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

char *strstrip(char *s)
{
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
        char *p = strndup(s, n);

        if (!p)
                oom();
        return p;
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
        size_t n = strv_length(*l);
        char **c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c)
                oom();
        c[n] = s;
        c[n + 1] = NULL;
        *l = c;
        return 0;
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

int read_full_file(const char *path, char **ret, size_t *ret_size)
{
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, alloc = 4096;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        buf = malloc(alloc);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k;

                if (size + 1 >= alloc) {
                        char *n = realloc(buf, alloc * 2);
                        if (!n)
                                return -ENOMEM;
                        buf = n;
                        alloc *= 2;
                }
                k = read(fd, buf + size, alloc - size - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                size += (size_t)k;
        }
        buf[size] = 0;
        if (ret_size)
                *ret_size = size;
        *ret = TAKE_PTR(buf);
        return 0;
}

int write_all(int fd, const void *data, size_t size)
{
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
