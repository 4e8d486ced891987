/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/reconcile.h"

/* What rtctl does itself when rtctld is not running: a dry-run plan, and restore from the journal. */

/* The profile rtctld would apply: the remembered one, else the configured default. */
char *local_default_profile(void);
/* policy_name NULL: restore everything journalled. dry_run: write nothing. ret_journal (may be NULL):
 * the journal after the pass, for what it could not restore. */
int local_pass(const char *policy_name, bool dry_run, PassResult *ret, Journal **ret_journal,
               char **ret_error);
