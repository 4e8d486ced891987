/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/journal.h"
#include "core/setting.h"

typedef struct ApplyStats {
        unsigned changed;
        unsigned unchanged;
        unsigned failed;
} ApplyStats;

/* The one place that writes to the kernel. For each setting, phase by phase: read the current value;
 * if it differs, journal the original (on disk before any write of the phase), write, read back.
 * Failure is per setting, recorded in it, and never stops the pass. With journal NULL nothing is
 * written: a dry run that fills in current values, for `rtctl plan`. */
void applier_apply(Plan *plan, Journal *journal, ApplyStats *ret);
