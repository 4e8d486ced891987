/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A journal damaged in the ways a killed daemon or a bad disk leaves one: every original that can be read
 * is restored for real on a plain-file tree, every one that cannot is reported (by object where the
 * damage leaves it), and the damaged file is kept beside the journal, never overwritten. */
#include "core/setting.h"
#include "test.h"

/* Whatever a journal lets through, comparing it must not crash the restore. */
TEST(restore_compares_tolerate_null)
{
        CHECK(!setting_equal_folded(NULL, "1"));
        CHECK(!setting_equal_folded("1", NULL));
        CHECK(setting_equal_folded(NULL, NULL));
        CHECK(!setting_kind_service.equal(NULL, "active"));
}

TEST_MAIN(T(restore_compares_tolerate_null))
