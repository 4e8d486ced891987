/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "shared/sysfs.h"

static char *prefix;
static bool prefix_read;

const char *sysroot(void)
{
        if (!prefix_read) {
                const char *e = getenv("RTCTL_SYSROOT");
                prefix = xstrdup(e && !streq(e, "/") ? e : "");
                /* "/x/" + "/sys" would give "//sys": harmless, but keep paths tidy in messages. */
                if (endswith(prefix, "/"))
                        prefix[strlen(prefix) - 1] = 0;
                prefix_read = true;
        }
        return prefix;
}

void sysroot_set(const char *p)
{
        free(prefix);
        prefix = xstrdup(p ?: "");
        prefix_read = true;
}

char *sys_path(const char *path)
{
        assert(path);

        return xasprintf("%s%s", sysroot(), path);
}

int sys_read(const char *path, char **ret)
{
        assert(path);
        assert(ret);

        _cleanup_free_ char *p = sys_path(path);
        char *s;
        size_t n;
        int r;

        r = read_full_file(p, &s, &n);
        if (r < 0)
                return r;
        while (n > 0 && s[n - 1] == '\n')
                s[--n] = 0;
        *ret = s;
        return 0;
}

int sys_read_uint(const char *path, unsigned *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = sys_read(path, &s);

        return r < 0 ? r : safe_atou(strstrip(s), ret);
}

int sys_read_int(const char *path, int *ret)
{
        _cleanup_free_ char *s = NULL;
        int r = sys_read(path, &s);

        return r < 0 ? r : safe_atoi(strstrip(s), ret);
}

CpuSet *sys_read_cpuset(const char *path, unsigned n_cpus, bool mask)
{
        _cleanup_free_ char *s = NULL;
        CpuSet *set = NULL;

        if (sys_read(path, &s) < 0 ||
            (mask ? cpuset_parse_mask : cpuset_parse_list)(strstrip(s), n_cpus, &set, NULL) < 0)
                return NULL;
        return set;
}

int sys_write(const char *path, const char *value)
{
        assert(value);

        _cleanup_free_ char *p = sys_path(path);
        _cleanup_close_ int fd = -EBADF;
        ssize_t k;

        /* A write of nothing never reaches the kernel's handler (the VFS answers 0 at once), so the
         * empty value (cpuset.cpus.exclusive restored to "") is a newline, which the kernel's parsers
         * read as empty. */
        if (!*value)
                value = "\n";
        size_t len = strlen(value);
        fd = open(p, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        k = write(fd, value, len);
        if (k < 0)
                return -errno;
        if ((size_t)k != len)
                return -EIO;
        return 0;
}

bool sys_exists(const char *path)
{
        return sys_access(path, F_OK) >= 0;
}

int sys_access(const char *path, int mode)
{
        _cleanup_free_ char *p = sys_path(path);
        return access(p, mode) < 0 ? -errno : 0;
}

DIR *sys_opendir(const char *path)
{
        assert(path);

        _cleanup_free_ char *p = sys_path(path);
        return opendir(p);
}

int sys_readlink(const char *path, char **ret)
{
        assert(path);
        assert(ret);

        _cleanup_free_ char *p = sys_path(path);
        char buf[PATH_MAX];
        ssize_t n;

        n = readlink(p, buf, sizeof buf - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        *ret = xstrdup(buf);
        return 0;
}

const char *sys_path_denied(const char *path)
{
        assert(path);

        static const struct {
                const char *path, *why;
        } denied[] = {
            {"/proc/sys/kernel/core_pattern", "it runs a program as root (a core dump handler)"},
            {"/proc/sys/kernel/modprobe", "it runs a program as root (the module loader)"},
            {"/proc/sys/kernel/hotplug", "it runs a program as root (the uevent helper)"},
            {"/proc/sys/kernel/usermodehelper", "it runs a program as root (the usermode helper)"},
            {"/proc/sys/kernel/poweroff_cmd", "it runs a program as root (the poweroff command)"},
            {"/proc/sys/fs/binfmt_misc", "it runs a program as root (a binary format handler)"},
            {"/sys/kernel/uevent_helper", "it runs a program as root (the uevent helper)"},
            {"/sys/power", "it is a power action (suspend, hibernate)"},
            {"/sys/firmware", "it writes the firmware"},
            {"/sys/kernel/security", "it writes a security module"},
        };
        _cleanup_free_ char *plain = xmalloc0(strlen(path) + 2);
        char *w = plain;

        /* The path as the kernel walks it. */
        for (const char *p = path; *p;) {
                size_t len;

                p += strspn(p, "/");
                len = strcspn(p, "/");
                if (len == 2 && strneq(p, "..", 2))
                        return "it names a parent directory";
                if (len > 0 && !(len == 1 && p[0] == '.')) {
                        *w++ = '/';
                        memcpy(w, p, len);
                        w += len;
                }
                p += len;
        }
        *w = 0;
        for (size_t i = 0; i < ELEMENTSOF(denied); i++) {
                const char *rest = startswith(plain, denied[i].path);
                if (rest && (*rest == 0 || *rest == '/'))
                        return denied[i].why;
        }
        return NULL;
}
