/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/journal.h"
#include "core/setting.h"

typedef struct ApplyStats {
        unsigned changed;
        unsigned unchanged;
        unsigned failed;
        unsigned gone;
        unsigned busy;
        unsigned refused;
        unsigned deferred;
        uint64_t write_usec; /* inside the kinds' writes: the kernel's share of the pass, mostly */
} ApplyStats;

/* The one place that writes to the kernel. For each setting, phase by phase: read the current value;
 * if it differs, journal the original (on disk before any write of the phase), write, read back.
 * Failure is per setting, recorded in it, and never stops the pass. With journal NULL nothing is
 * written: a dry run that fills in current values, for `rtctl plan`. A write that queued a systemd job
 * is not read back (the job's end is followed by the SystemdClient); while jobs are outstanding after a
 * phase, the later phases are deferred: a partition needs the slice systemd is still creating. */
void applier_apply(Plan *plan, Journal *journal, SettingContext *ctx, ApplyStats *ret);
/* Sorts what error meant for s (gone, busy, refused by the kernel, or failed): the one place that
 * decides. what: "write failed", "cannot read", ... */
void applier_fail(Setting *s, int error, const char *what);
/* Recounts ret from the plan's results. */
void applier_count(const Plan *plan, ApplyStats *ret);
