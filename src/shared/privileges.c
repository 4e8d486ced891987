/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <grp.h>

#include "shared/privileges.h"
#include "shared/util.h"

int privileges_drop(const char *name, uid_t uid, gid_t gid)
{
        uid_t ruid, euid, suid;
        gid_t rgid, egid, sgid;

        assert(name);

        /* The groups first and the uid last: once the uid is dropped nothing else can be. */
        if (initgroups(name, gid) < 0)
                return -errno;
        if (setresgid(gid, gid, gid) < 0)
                return -errno;
        if (setresuid(uid, uid, uid) < 0)
                return -errno;
        if (getresuid(&ruid, &euid, &suid) < 0 || getresgid(&rgid, &egid, &sgid) < 0)
                return -errno;
        if (ruid != uid || euid != uid || suid != uid || rgid != gid || egid != gid || sgid != gid)
                return -EPERM;
        /* A process that kept a capability (SECBIT_KEEP_CAPS, a user namespace) could go back. */
        if (uid != 0 && setuid(0) >= 0)
                return -EPERM;
        return 0;
}
