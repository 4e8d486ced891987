/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <dirent.h>
#include <limits.h>
#include <stdlib.h>

#include "core/audiodev.h"
#include "shared/sysfs.h"

/* Where a sysfs link leads, as the kernel names it (the root prefix taken off); -errno when nowhere. */
static int resolve(const char *link, char **ret)
{
        _cleanup_free_ char *full = sys_path(link);
        const char *rel;
        char resolved[PATH_MAX];

        if (!realpath(full, resolved))
                return -errno;
        rel = isempty(sysroot()) ? resolved : startswith(resolved, sysroot());
        if (!rel || rel[0] != '/')
                return -EXDEV;
        *ret = xstrdup(rel);
        return 0;
}

char **audiodev_list(void)
{
        _cleanup_closedir_ DIR *d = sys_opendir("/sys/class/sound");
        char **out = NULL;
        struct dirent *de;

        while (d && (de = readdir(d))) {
                if (!startswith(de->d_name, "card"))
                        continue;
                _cleanup_free_ char *link = xasprintf("/sys/class/sound/%s/device", de->d_name), *dev = NULL;
                if (resolve(link, &dev) >= 0 && !strv_contains(out, dev))
                        strv_push(&out, TAKE_PTR(dev));
        }
        return out;
}

bool audiodev_is_usb(const char *dev)
{
        _cleanup_free_ char *p = xasprintf("%s/bInterfaceClass", dev);
        return sys_exists(p);
}

char **audiodev_usb_chain(const char *interface)
{
        _cleanup_free_ char *dir = xstrdup(interface);
        char **out = NULL;

        for (char *slash; (slash = strrchr(dir, '/')) && slash != dir;) {
                *slash = 0;
                _cleanup_free_ char *vid = xasprintf("%s/idVendor", dir);
                if (!sys_exists(vid))
                        break; /* past the root hub: the host controller */
                strv_push(&out, xstrdup(dir));
        }
        return out;
}

bool audiodev_on_gpu_link(const char *dev)
{
        const char *base = strrchr(dev, '/'), *dot;
        _cleanup_free_ char *cls = NULL, *path = NULL;

        if (!base || !(dot = strrchr(base, '.')) || streq(dot, ".0"))
                return false;
        path = xasprintf("%.*s.0/class", (int)(dot - dev), dev);
        return sys_read(path, &cls) >= 0 && startswith(cls, "0x03");
}

char **audiodev_aspm_files(const char *dev)
{
        static const char *const states[] = {"l0s_aspm",  "l1_aspm",    "l1_1_aspm",
                                             "l1_2_aspm", "l1_1_pcipm", "l1_2_pcipm"};
        char **out = NULL;

        for (size_t i = 0; i < ELEMENTSOF(states); i++) {
                _cleanup_free_ char *f = xasprintf("%s/link/%s", dev, states[i]);
                if (sys_exists(f))
                        strv_push(&out, TAKE_PTR(f));
        }
        return out;
}
