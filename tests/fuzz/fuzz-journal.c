/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The journal of originals, whatever the file holds. json-c is not instrumented, so beyond crashes the
 * harness checks that what the loader kept has the types and shapes the restore code relies on. */
#include "core/journal-read.h"
#include "fuzz.h"

static Journal *empty_journal(void)
{
        _cleanup_free_ char *err = NULL;
        Journal *j = NULL;

        /* A path that cannot exist: an empty journal that is never written. */
        fuzz_check(journal_open("/nonexistent/rtctl-fuzz/journal.json", JOURNAL_RUNTIME, &j, &err) == 0);
        fuzz_check(journal_size(j) == 0);
        return j;
}

static bool utf8(const char *s)
{
        return g_utf8_validate(s, -1, NULL);
}

static void check_entry(const Journal *j, const JournalEntry *e)
{
        fuzz_check(e->kind && e->kind->name && setting_kind_from_name(e->kind->name) == e->kind);
        fuzz_check(e->object && e->original && e->tuner);
        fuzz_check(e->object[0] == '/' || startswith(e->object, "systemd:") ||
                   startswith(e->object, "grubby:"));
        fuzz_check(strlen(e->object) <= 4096 && strlen(e->original) <= 65536 && strlen(e->tuner) <= 64);
        /* Objects, originals and tuners reach the log and the bus, which take UTF-8 only. */
        fuzz_check(utf8(e->object) && utf8(e->original) && utf8(e->tuner));
        fuzz_check(journal_find(j, e->object) == e); /* one entry an object */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *text = xmalloc0(size + 1);
        _cleanup_journal_ Journal *j = empty_journal();
        bool damaged;

        memcpy(text, data, size);
        damaged = journal_load_text(j, text, size);
        for (size_t i = 0; i < journal_size(j); i++)
                check_entry(j, journal_entry(j, i));
        for (size_t i = 0; i < journal_n_lost(j); i++) {
                const JournalLoss *l = journal_lost(j, i);
                _cleanup_free_ char *msg = journal_loss_message(l);

                fuzz_check(l->reason && *l->reason && utf8(l->reason) && (!l->object || utf8(l->object)));
                fuzz_check(msg && utf8(msg));
        }
        /* A loss is only ever found in a damaged journal, or carried over in an intact one's "lost". */
        fuzz_check(damaged || journal_n_lost(j) == 0 || memmem(text, size, "\"lost\"", 6));
        fuzz_check(!journal_damaged_copy(j) || utf8(journal_damaged_copy(j)));
        return 0;
}
