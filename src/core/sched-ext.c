/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/sched-ext.h"
#include "shared/sysfs.h"

#define SCX_DIR "/sys/kernel/sched_ext"

/* scx_loader.service loads a scheduler on a D-Bus request (org.scx.Loader: scxctl, CachyOS's kernel
 * manager); scx.service starts the one /etc/default/scx names. */
const char *const sched_ext_units[] = {"scx_loader.service", "scx.service", NULL};

int sched_ext_read(SchedExt *ret)
{
        SchedExt s = {.switch_all = -1};
        _cleanup_free_ char *sw = NULL;
        int r;

        assert(ret);

        r = sys_read(SCX_DIR "/state", &s.state);
        if (r < 0)
                return r;
        strstrip(s.state);
        /* root/ops exists only while a scheduler is loaded. */
        if (sys_read(SCX_DIR "/root/ops", &s.ops) >= 0 && isempty(strstrip(s.ops)))
                free(TAKE_PTR(s.ops));
        if (sys_read(SCX_DIR "/switch_all", &sw) >= 0 && safe_atoi(strstrip(sw), &s.switch_all) < 0)
                s.switch_all = -1;
        *ret = s;
        return 0;
}

bool sched_ext_active(const SchedExt *s)
{
        assert(s);

        return s->state && (streq(s->state, "enabled") || streq(s->state, "enabling"));
}

char *sched_ext_describe(const SchedExt *s)
{
        assert(s);

        return xasprintf("the BPF scheduler %s (sched_ext, %s)", s->ops ? s->ops : "(unnamed)",
                         s->switch_all == 0 ? "for the tasks that ask for it"
                                            : "for every task that is not real-time");
}

void sched_ext_clear(SchedExt *s)
{
        assert(s);

        free(s->state);
        free(s->ops);
        *s = (SchedExt){};
}
