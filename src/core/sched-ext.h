/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

/* sched_ext (Documentation/scheduler/sched-ext.rst): a BPF program loaded as the scheduler of every task
 * that is not real-time (SCHED_NORMAL, BATCH, IDLE, and SCHED_EXT), in the kernel's fair class's stead.
 * Its state is under /sys/kernel/sched_ext (through the root prefix, so a fixture tree stands in). */

typedef struct SchedExt {
        char *state;    /* "disabled", "enabling", "enabled", "disabling" */
        char *ops;      /* the loaded scheduler's name (root/ops), NULL when none */
        int switch_all; /* 1: every non-real-time task; 0: only those that ask (SCHED_EXT); -1 unknown */
} SchedExt;

/* 0 with *ret filled; -ENOENT when the kernel has no sched_ext (CONFIG_SCHED_CLASS_EXT unset, or
 * before 6.12). */
int sched_ext_read(SchedExt *ret);
/* Whether a BPF scheduler is in force (or coming into force). */
bool sched_ext_active(const SchedExt *s);
/* "scx_lavd's lavd_1.0 ... (every task that is not real-time)": the scheduler named for a user. */
char *sched_ext_describe(const SchedExt *s);
void sched_ext_clear(SchedExt *s);

/* The services that load BPF schedulers (the scx project's), as systemd names them. */
extern const char *const sched_ext_units[];
