/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A journal damaged in the ways a killed daemon or a bad disk leaves one: every original that can be read
 * is restored for real on a plain-file tree, every one that cannot is reported (by object where the
 * damage leaves it), and the damaged file is kept beside the journal, never overwritten. */
#include <json-c/json.h>
#include <sys/stat.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "core/bootloader.h"
#include "test.h"

#define N_FILES 40
#define F(i)    (UINT64_C(1) << (i))

static char *root, *jpath;

/* Files /proc/sys/kernel/rt1..N_FILES all hold "tuned"; their originals are "orig-N". */
static void make_tree(void)
{
        free(root);
        free(jpath);
        root = test_two_cpu_root();
        jpath = xasprintf("%s/run/journal.json", test_tmpdir());
        for (unsigned i = 1; i <= N_FILES; i++) {
                _cleanup_free_ char *rel = xasprintf("proc/sys/kernel/rt%u", i);
                test_write(root, rel, "tuned\n");
        }
}

static char *object_of(unsigned i)
{
        return xasprintf("/proc/sys/kernel/rt%u", i);
}

/* Entry i as the daemon writes it, for journals written by hand. */
static char *entry(unsigned i)
{
        return xasprintf("{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt%u\","
                         "\"original\":\"orig-%u\"}",
                         i, i);
}

/* The bytes the daemon itself writes for files 1..n. */
static char *daemon_journal(unsigned n)
{
        _cleanup_free_ char *path = xasprintf("%s/written.json", test_tmpdir()), *err = NULL;
        char *text = NULL;
        Journal *j = NULL;

        unlink(path);
        CHECK_INTEQ(journal_open(path, JOURNAL_RUNTIME, &j, &err), 0);
        for (unsigned i = 1; i <= n; i++) {
                _cleanup_free_ char *object = object_of(i), *original = xasprintf("orig-%u", i);
                journal_remember(j, &setting_kind_file, "sysctl", object, original);
        }
        CHECK_INTEQ(journal_save(j), 0);
        journal_free(j);
        CHECK_INTEQ(read_full_file(path, &text, NULL), 0);
        return text;
}

/* Where needle starts in the daemon's text: a place to cut or overwrite. */
static size_t offset_of(const char *text, const char *needle)
{
        const char *p = strstr(text, needle);

        CHECK(p != NULL);
        return p ? (size_t)(p - text) : 0;
}

static void write_bytes(const char *path, const char *data, size_t size)
{
        FILE *f = fopen(path, "we");

        CHECK(f != NULL);
        if (!f)
                return;
        CHECK_INTEQ(fwrite(data, 1, size, f), size);
        fclose(f);
}

static bool file_holds(const char *path, const char *data, size_t size)
{
        _cleanup_free_ char *s = NULL;
        size_t n = 0;

        return path && read_full_file(path, &s, &n) >= 0 && n == size && memcmp(s, data, size) == 0;
}

static char *value(unsigned i)
{
        _cleanup_free_ char *object = object_of(i);
        char *s = NULL;

        if (sys_read(object, &s) < 0)
                return xstrdup("(absent)");
        return s;
}

static void check_losses(const Journal *j, const char *const *lost)
{
        size_t n = 0;

        CHECK(j != NULL);
        if (!j)
                return;
        for (; lost[n]; n++) {
                const JournalLoss *l = journal_lost(j, n);
                _cleanup_free_ char *m = l ? journal_loss_message(l) : NULL;
                CHECK_STREQ(m, lost[n]);
        }
        CHECK_INTEQ(journal_n_lost(j), n);
        for (size_t i = n; i < journal_n_lost(j); i++) {
                _cleanup_free_ char *m = journal_loss_message(journal_lost(j, i));
                printf("# unexpected loss: %s\n", m);
        }
}

/* A pass with no policy, as stop and `rtctl restore` run: every file in restored gets its original
 * back, every other one stays as it was. */
static void restore_and_check(Journal *j, uint64_t restored)
{
        _cleanup_topology_ Topology *t = NULL;
        Dirty all = {};
        PassResult res;

        CHECK_INTEQ(topology_load(NULL, &t), 0);
        dirty_mark_all(&all);
        reconcile_pass(NULL, t, j, &all, false, &res);
        dirty_clear(&all);
        CHECK_INTEQ(res.stats.failed, 0);
        pass_result_clear(&res);
        for (unsigned i = 1; i <= N_FILES; i++) {
                _cleanup_free_ char *v = value(i), *want = xasprintf("orig-%u", i);
                if (restored & F(i))
                        CHECK_STREQ(v, want);
                else
                        CHECK_STREQ(v, "tuned");
        }
}

/* Opens the journal holding these bytes and checks all a user would see: which originals come back,
 * which are reported lost, the damaged copy, and that the losses outlive the process that found them
 * until a restore reported them. */
static void check_damaged(const char *text, size_t size, uint64_t restored, const char *const *lost)
{
        _cleanup_free_ char *err = NULL, *copy = NULL;
        Journal *j = NULL;

        make_tree();
        write_bytes(jpath, text, size);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_STREQ(err, NULL);
        if (!j)
                return;
        check_losses(j, lost);
        copy = xstrdup(journal_damaged_copy(j));
        _cleanup_free_ char *first = xasprintf("%s.damaged", jpath);
        CHECK_STREQ(copy, first);
        CHECK(file_holds(copy, text, size));
        restore_and_check(j, restored);
        journal_free(j); /* as if killed after the restore, before it was reported */
        if (!lost[0]) {
                /* Nothing lost, everything restored: nothing left to say. */
                CHECK(access(jpath, F_OK) < 0);
                return;
        }

        /* A daemon started later still knows, and keeps no second copy of a journal it wrote itself. */
        j = NULL;
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (!j)
                return;
        check_losses(j, lost);
        CHECK_INTEQ(journal_size(j), 0);
        CHECK_STREQ(journal_damaged_copy(j), copy);
        _cleanup_free_ char *second = xasprintf("%s.damaged.1", jpath);
        CHECK(access(second, F_OK) < 0);
        CHECK(file_holds(copy, text, size));

        /* Reported: they leave the journal, and with nothing left the file goes. */
        journal_forget_lost(j);
        CHECK_INTEQ(journal_save(j), 0);
        CHECK(access(jpath, F_OK) < 0);
        journal_free(j);
}

static void check_damaged_text(const char *text, uint64_t restored, const char *const *lost)
{
        check_damaged(text, strlen(text), restored, lost);
}

#define LOST(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NONE      ((const char *const[]){NULL})

/* One bad entry before a good one: it costs that entry, not the journal. */
static void check_bad_entry(const char *bad, const char *loss)
{
        _cleanup_free_ char *e2 = entry(2), *text = xasprintf("{\"entries\":[%s,%s]}", bad, e2);

        check_damaged_text(text, F(2), LOST(loss));
}

TEST(kind_null)
{
        check_bad_entry(
            "{\"kind\":null,\"tuner\":\"block\",\"object\":\"/proc/sys/kernel/rt1\",\"original\":\"1\"}",
            "/proc/sys/kernel/rt1: original lost: its kind is null, not a string");
}

TEST(object_null)
{
        check_bad_entry("{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":null,\"original\":\"1\"}",
                        "journal entry 1: original lost: its object is null, not a string");
}

TEST(original_null)
{
        check_bad_entry(
            "{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt1\",\"original\":null}",
            "/proc/sys/kernel/rt1: original lost: its original is null, not a string");
}

/* The tuner is not needed to put a value back. */
TEST(tuner_null_or_missing)
{
        static const char text[] =
            "{\"entries\":["
            "{\"kind\":\"file\",\"tuner\":null,\"object\":\"/proc/sys/kernel/rt1\",\"original\":\"orig-1\"},"
            "{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/rt2\",\"original\":\"orig-2\"},"
            "{\"kind\":\"file\",\"tuner\":[1],\"object\":\"/proc/sys/kernel/"
            "rt3\",\"original\":\"orig-3\"}]}";
        _cleanup_free_ char *err = NULL;
        _cleanup_journal_ Journal *j = NULL;

        make_tree();
        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        for (size_t i = 0; j && i < journal_size(j); i++)
                CHECK_STREQ(journal_entry(j, i)->tuner, "unknown");
        check_damaged_text(text, F(1) | F(2) | F(3), NONE);
}

TEST(unknown_kind)
{
        _cleanup_free_ char *e1 = entry(1), *e3 = entry(3),
                            *text = xasprintf(
                                "{\"version\":1,\"entries\":[%s,{\"kind\":\"foo\",\"tuner\":\"block\","
                                "\"object\":\"/sys/block/loop200/queue/scheduler\",\"original\":"
                                "\"mq-deadline\"},%s]}",
                                e1, e3);

        check_damaged_text(text, F(1) | F(3),
                           LOST("/sys/block/loop200/queue/scheduler: original lost: unknown kind 'foo'"));
}

TEST(missing_keys)
{
        _cleanup_free_ char *e3 = entry(3),
                            *text = xasprintf(
                                "{\"entries\":[{\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt1\","
                                "\"original\":\"orig-1\"},{\"kind\":\"file\",\"object\":"
                                "\"/proc/sys/kernel/rt2\"},{\"kind\":\"file\",\"original\":\"x\"},%s]}",
                                e3);

        check_damaged_text(text, F(3),
                           LOST("/proc/sys/kernel/rt1: original lost: it has no kind",
                                "/proc/sys/kernel/rt2: original lost: it has no original",
                                "journal entry 3: original lost: it has no object"));
}

/* Any JSON type where a string or an entry belongs. */
TEST(non_string_types)
{
        _cleanup_free_ char
            *e6 = entry(6),
            *text = xasprintf(
                "{\"entries\":["
                "{\"kind\":5,\"object\":\"/proc/sys/kernel/rt1\",\"original\":\"orig-1\"},"
                "{\"kind\":\"file\",\"object\":[\"/proc/sys/kernel/rt2\"],\"original\":\"x\"},"
                "{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/rt3\",\"original\":{\"a\":1}},"
                "{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/rt4\",\"original\":true},"
                "{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/rt5\",\"original\":1.5},"
                "42,\"a string\",null,[],{},"
                "{\"kind\":\"file\",\"object\":\"relative/path\",\"original\":\"x\"},"
                "{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/rt7\",\"original\":\"a\\u0000b\"},"
                "{\"kind\":{},\"object\":\"/proc/sys/kernel/rt8\",\"original\":\"orig-8\"},"
                "%s]}",
                e6);

        check_damaged_text(
            text, F(6),
            LOST("/proc/sys/kernel/rt1: original lost: its kind is a number, not a string",
                 "journal entry 2: original lost: its object is an array, not a string",
                 "/proc/sys/kernel/rt3: original lost: its original is an object, not a string",
                 "/proc/sys/kernel/rt4: original lost: its original is a boolean, not a string",
                 "/proc/sys/kernel/rt5: original lost: its original is a number, not a string",
                 "journal entry 6: original lost: it is a number, not an object",
                 "journal entry 7: original lost: it is a string, not an object",
                 "journal entry 8: original lost: it is null, not an object",
                 "journal entry 9: original lost: it is an array, not an object",
                 "journal entry 10: original lost: it has no object",
                 "journal entry 11: original lost: its object 'relative/path' is not a kernel object",
                 "/proc/sys/kernel/rt7: original lost: its original has a NUL byte",
                 "/proc/sys/kernel/rt8: original lost: its kind is an object, not a string"));
}

/* A damaged byte inside a string: what rtctld puts in its status and log, and so on the bus, is UTF-8;
 * and a loss carried over always says why (found by tests/fuzz/fuzz-journal). */
TEST(not_utf8_and_empty_reasons)
{
        _cleanup_free_ char
            *e2 = entry(2),
            *text = xasprintf("{\"lost\":[{\"reason\":\"\"},"
                              "{\"object\":\"/proc/sys/kernel/rt9\",\"reason\":\"or\xab"
                              "ig\"},{\"object\":\"/proc/sys/kernel/rt\xff"
                              "8\"}],\"entries\":["
                              "{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt\xff"
                              "\",\"original\":\"x\"},"
                              "{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/"
                              "rt1\",\"original\":\"o\xc3\"},%s]}",
                              e2);

        check_damaged_text(text, F(2),
                           LOST("/proc/sys/kernel/rt9: original lost",
                                "journal entry 1: original lost: its object is not UTF-8",
                                "/proc/sys/kernel/rt1: original lost: its original is not UTF-8"));
}

/* Cut inside entry 20 of 38, after the line naming its object. */
TEST(truncated_halfway)
{
        _cleanup_free_ char *text = daemon_journal(38);
        size_t cut = offset_of(text, "\"original\":\"orig-20\"");

        check_damaged(
            text, cut, F(20) - F(1),
            LOST("/proc/sys/kernel/rt20: original lost: its journal entry is damaged",
                 "journal truncated after entry 19 (/proc/sys/kernel/rt19): later originals lost"));
}

/* Cut between two entries: nothing says whether more followed. */
TEST(truncated_between_entries)
{
        _cleanup_free_ char *text = daemon_journal(38);
        size_t cut = offset_of(text, "\"object\":\"/proc/sys/kernel/rt31\"");

        /* Back to the end of entry 30: "},\n    {\n      \"kind\"..." */
        while (cut > 0 && text[cut - 1] != '}')
                cut--;
        check_damaged(
            text, cut + 2, F(31) - F(1),
            LOST("journal truncated after entry 30 (/proc/sys/kernel/rt30): later originals lost"));
}

TEST(truncated_in_header)
{
        _cleanup_free_ char *text = daemon_journal(5);

        check_damaged(text, offset_of(text, "\"entries\"") + 4, 0,
                      LOST("journal truncated before its first entry: any originals it held are lost"));
}

/* Garbage where entry 10's original was: that entry is lost by name, all before and after come back. */
TEST(garbage_in_the_middle)
{
        _cleanup_free_ char *text = daemon_journal(38);
        size_t size = strlen(text), at = offset_of(text, "\"original\":\"orig-10\"");

        memcpy(text + at, "\x01\xff#]\"\0:x", 8);
        check_damaged(text, size, (F(39) - F(1)) & ~F(10),
                      LOST("/proc/sys/kernel/rt10: original lost: its journal entry is damaged"));
}

/* A block of zeros over entries 10 to 12 (a page the disk lost): nothing names them, so the place is
 * reported, and everything after it still comes back. */
TEST(zeroed_entries_in_the_middle)
{
        _cleanup_free_ char *text = daemon_journal(38);
        size_t size = strlen(text), from = offset_of(text, "\"object\":\"/proc/sys/kernel/rt10\""),
               to = offset_of(text, "\"object\":\"/proc/sys/kernel/rt13\"");

        while (text[from] != '{')
                from--;
        while (text[to] != '}')
                to--;
        to++;
        memset(text + from, 0, to - from);
        check_damaged(
            text, size, (F(39) - F(1)) & ~(F(10) | F(11) | F(12)),
            LOST("journal damaged after entry 9 (/proc/sys/kernel/rt9): originals recorded before the "
                 "next readable entry are lost"));
}

/* Whatever follows a complete journal holds no original: all of it comes back, nothing is lost, and
 * the file is still kept, as it is not what the daemon wrote. */
TEST(trailing_garbage)
{
        _cleanup_free_ char *text = daemon_journal(3), *damaged = xasprintf("%s}}\"garbage{", text);

        check_damaged_text(damaged, F(1) | F(2) | F(3), NONE);
}

TEST(empty_file)
{
        check_damaged("", 0, 0, LOST("journal empty: any originals it held are lost"));
}

TEST(not_json)
{
        check_damaged_text("Segmentation fault (core dumped)\n", 0,
                           LOST("journal unreadable: any originals it held are lost"));
}

TEST(root_not_an_object)
{
        _cleanup_free_ char *e1 = entry(1), *e2 = entry(2), *text = xasprintf("[%s,%s]", e1, e2);

        check_damaged_text(
            text, F(1) | F(2),
            LOST("journal is not in rtctl's format (its root is an array): originals not found in it "
                 "are lost"));
        check_damaged_text(
            "null", 0,
            LOST("journal is not in rtctl's format (its root is null): originals not found in it are "
                 "lost"));
        check_damaged_text(
            "\"entries\"", 0,
            LOST("journal is not in rtctl's format (its root is a string): originals not found in it "
                 "are lost"));
}

TEST(entries_not_an_array)
{
        _cleanup_free_ char *e1 = entry(1), *text = xasprintf("{\"version\":1,\"entries\":{\"a\":%s}}", e1);

        check_damaged_text(
            text, F(1),
            LOST("journal is not in rtctl's format (its entries are an object, not an array): "
                 "originals not found in it are lost"));
        check_damaged_text("{\"version\":1,\"entries\":5}", 0,
                           LOST("journal is not in rtctl's format (its entries are a number, not an array): "
                                "originals not found in it are lost"));
        check_damaged_text(
            "{\"version\":1}", 0,
            LOST("journal is not in rtctl's format (it has no entries): originals not found in it "
                 "are lost"));
}

/* Longer than any kernel value or path: damage, not something to write back. */
TEST(huge_entry)
{
        _cleanup_free_ char *big = xmalloc0(70001), *path = xmalloc0(5001), *e3 = entry(3);

        memset(big, 'x', 70000);
        memset(path, 'a', 5000);
        path[0] = '/';
        _cleanup_free_ char *text = xasprintf(
            "{\"entries\":[{\"kind\":\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt1\","
            "\"original\":\"%s\"},{\"kind\":\"file\",\"object\":\"%s\",\"original\":\"1\"},%s]}",
            big, path, e3);
        check_damaged_text(text, F(3),
                           LOST("/proc/sys/kernel/rt1: original lost: its original is 70000 bytes long",
                                "journal entry 2: original lost: its object is 5000 bytes long"));
}

/* The first entry is the true original, as the daemon keeps it; a later one that disagrees makes the
 * value uncertain, which the user is told. */
TEST(duplicate_entries)
{
        _cleanup_free_ char *e1 = entry(1), *e2 = entry(2),
                            *text =
                                xasprintf("{\"entries\":[%s,%s,%s,{\"kind\":\"file\",\"tuner\":\"sysctl\","
                                          "\"object\":\"/proc/sys/kernel/rt2\",\"original\":\"other\"}]}",
                                          e1, e1, e2);

        check_damaged_text(
            text, F(1) | F(2),
            LOST("/proc/sys/kernel/rt2: original uncertain: a later entry says 'other', the first "
                 "entry's 'orig-2' is restored"));
}

/* Thousands of entries cut off: read in one sweep, every one before the cut kept. */
TEST(many_entries_truncated)
{
        _cleanup_free_ char *text = daemon_journal(3000), *err = NULL;
        _cleanup_journal_ Journal *j = NULL;

        make_tree();
        write_bytes(jpath, text, offset_of(text, "\"object\":\"/proc/sys/kernel/rt2500\""));
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_INTEQ(j ? journal_size(j) : 0, 2499);
        check_losses(
            j, LOST("journal truncated after entry 2499 (/proc/sys/kernel/rt2499): later originals lost"));
}

/* A second damaged journal never replaces the copy of the first; the same damaged file opened again
 * (a daemon failing before its first save) is not copied twice. */
TEST(damaged_copy_never_overwritten)
{
        _cleanup_free_ char *err = NULL, *first = NULL, *second = NULL;
        Journal *j = NULL;

        make_tree();
        first = xasprintf("%s.damaged", jpath);
        second = xasprintf("%s.damaged.1", jpath);
        write_bytes(jpath, "first damage", 12);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        journal_free(TAKE_PTR(j));
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_STREQ(j ? journal_damaged_copy(j) : NULL, first);
        journal_free(TAKE_PTR(j));
        CHECK(access(second, F_OK) < 0);

        write_bytes(jpath, "second damage", 13);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_STREQ(j ? journal_damaged_copy(j) : NULL, second);
        CHECK(file_holds(first, "first damage", 12));
        CHECK(file_holds(second, "second damage", 13));
        /* The journal itself is rewritten only when saved: until then the damaged file stays too. */
        CHECK(file_holds(jpath, "second damage", 13));
        CHECK_INTEQ(j ? journal_save(j) : -EBADF, 0);
        CHECK(file_holds(second, "second damage", 13));
        journal_free(j);
}

/* Whatever a journal lets through, comparing it must not crash the restore. */
TEST(restore_compares_tolerate_null)
{
        CHECK(!setting_equal_folded(NULL, "1"));
        CHECK(!setting_equal_folded("1", NULL));
        CHECK(setting_equal_folded(NULL, NULL));
        CHECK(!setting_kind_service.equal(NULL, "active"));
}

/* Entries 1 and 3 whole, one of a kind this rtctl does not know, and the file cut inside entry 3's. */
static char *cut_journal(void)
{
        _cleanup_free_ char *e1 = entry(1), *e2 = entry(2);

        return xasprintf("{\"version\":1,\"entries\":[%s,{\"kind\":\"foo\",\"tuner\":\"block\",\"object\":"
                         "\"/sys/block/loop200/queue/scheduler\",\"original\":\"mq-deadline\"},%s,{\"kind\":"
                         "\"file\",\"tuner\":\"sysctl\",\"object\":\"/proc/sys/kernel/rt3\",\"orig",
                         e1, e2);
}

TEST(rtctl_restore_lists_lost_originals)
{
        _cleanup_free_ char *text = cut_journal(), *out = NULL, *err = NULL, *copy = NULL;
        _cleanup_free_ char *v1 = NULL, *v2 = NULL, *v3 = NULL;

        make_tree();
        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(test_run_rtctl(root, "restore", &out, &err), 1);
        CHECK_STREQ(out,
                    "rtctld is not running; restored from its journal: 2 changes, 0 failures, 3 lost.\n");
        copy = xasprintf("The damaged journal is kept as %s.damaged.", jpath);
        CHECK_CONTAINS(err, "/sys/block/loop200/queue/scheduler: original lost: unknown kind 'foo'\n");
        CHECK_CONTAINS(err, "/proc/sys/kernel/rt3: original lost: its journal entry is damaged\n");
        CHECK_CONTAINS(err,
                       "journal truncated after entry 3 (/proc/sys/kernel/rt2): later originals lost\n");
        CHECK_CONTAINS(err, copy);
        v1 = value(1);
        v2 = value(2);
        v3 = value(3);
        CHECK_STREQ(v1, "orig-1");
        CHECK_STREQ(v2, "orig-2");
        CHECK_STREQ(v3, "tuned");

        /* Told once: nothing is left to restore or to say. */
        free(out);
        free(err);
        CHECK_INTEQ(test_run_rtctl(root, "restore", &out, &err), 0);
        CHECK_STREQ(out, "rtctld is not running; restored from its journal: 0 changes, 0 failures.\n");
        CHECK_STREQ(err, "");
        CHECK(access(jpath, F_OK) < 0);
}

/* Each journal holds only its own kinds, and each kind only the objects it writes: anything else is
 * reported by object and never written, however it came into the file. */
static Journal *open_one(JournalScope scope, const char *kind, const char *object)
{
        _cleanup_free_ char *err = NULL,
                            *text =
                                xasprintf("{\"entries\":[{\"kind\":\"%s\",\"tuner\":\"x\",\"object\":\"%s\","
                                          "\"original\":\"content:planted by hand\"}]}",
                                          kind, object);
        Journal *j = NULL;

        make_tree();
        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(journal_open(jpath, scope, &j, &err), 0);
        return j;
}

static void check_refused(JournalScope scope, const char *kind, const char *object, const char *loss)
{
        _cleanup_journal_ Journal *j = open_one(scope, kind, object);

        CHECK_INTEQ(j ? journal_size(j) : 1, 0);
        check_losses(j, LOST(loss));
}

static void check_accepted(JournalScope scope, const char *kind, const char *object)
{
        _cleanup_journal_ Journal *j = open_one(scope, kind, object);

        CHECK_INTEQ(j ? journal_size(j) : 0, 1);
        check_losses(j, NONE);
}

/* rtctld registers no kinds beyond the core's: its journal does not know the boot arguments' kinds (the
 * way a planted boot-file entry once reached the daemon's restore, issue 16). */
TEST(daemon_journal_refuses_boot_kinds)
{
        setting_kinds_register(NULL, 0);
        check_refused(JOURNAL_RUNTIME, "boot-file", "/etc/kernel/cmdline",
                      "/etc/kernel/cmdline: original lost: unknown kind 'boot-file'");
        check_refused(JOURNAL_RUNTIME, "grubby-arg", "grubby:quiet",
                      "grubby:quiet: original lost: unknown kind 'grubby-arg'");
        check_refused(JOURNAL_RUNTIME, "boot-dir", "/etc/kernel",
                      "/etc/kernel: original lost: unknown kind 'boot-dir'");
}

/* rtctl registers them: each journal then holds only its own. */
TEST(foreign_kinds_refused)
{
        bootloader_kinds_register();
        check_refused(JOURNAL_RUNTIME, "boot-file", "/etc/kernel/cmdline",
                      "/etc/kernel/cmdline: original lost: kind 'boot-file' does not belong in the runtime "
                      "journal");
        check_refused(
            JOURNAL_RUNTIME, "grubby-arg", "grubby:quiet",
            "grubby:quiet: original lost: kind 'grubby-arg' does not belong in the runtime journal");
        check_refused(JOURNAL_RUNTIME, "boot-dir", "/etc/kernel",
                      "/etc/kernel: original lost: kind 'boot-dir' does not belong in the runtime journal");
        check_refused(JOURNAL_BOOTARGS, "file", "/proc/sys/kernel/rt1",
                      "/proc/sys/kernel/rt1: original lost: kind 'file' does not belong in the boot "
                      "arguments journal");
        check_accepted(JOURNAL_BOOTARGS, "boot-file", "/etc/kernel/cmdline");
        check_accepted(JOURNAL_BOOTARGS, "grubby-arg", "grubby:isolcpus");
}

TEST(objects_outside_their_kind_refused)
{
        static const struct {
                JournalScope scope;
                const char *kind, *object;
        } bad[] = {
            {JOURNAL_RUNTIME, "file", "/etc/shadow"},
            {JOURNAL_RUNTIME, "file", "/proc/sys/../../etc/shadow"},
            {JOURNAL_RUNTIME, "file", "/sys/./kernel/mm"},
            {JOURNAL_RUNTIME, "file", "/sys//kernel"},
            {JOURNAL_RUNTIME, "file", "/proc/sysfoo"},
            {JOURNAL_RUNTIME, "irq-affinity", "/sys/kernel/x"},
            {JOURNAL_RUNTIME, "cgroup", "/tmp/x"},
            {JOURNAL_RUNTIME, "affinity", "/proc/self/affinity"},
            {JOURNAL_RUNTIME, "affinity", "/proc/12/cgroup"},
            {JOURNAL_RUNTIME, "sched", "/proc/12/../1/sched"},
            {JOURNAL_RUNTIME, "thread", "/proc/12/task/x/cpuset"},
            {JOURNAL_RUNTIME, "pmqos-fd", "/dev/mem"},
            {JOURNAL_RUNTIME, "service", "systemd:../x.service"},
            {JOURNAL_RUNTIME, "unit-cpus", "systemd:a.slice:Other"},
            {JOURNAL_RUNTIME, "slice", "systemd:a.service"},
            {JOURNAL_RUNTIME, "schemata", "/sys/fs/resctrlx/schemata"},
            {JOURNAL_BOOTARGS, "boot-file", "/etc/passwd"},
            {JOURNAL_BOOTARGS, "boot-dir", "/etc"},
            {JOURNAL_BOOTARGS, "grubby-arg", "grubby:--make-default"},
            {JOURNAL_BOOTARGS, "grubby-arg", "grubby:a b"},
        };

        bootloader_kinds_register();
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_free_ char *loss =
                    xasprintf("%s: original lost: '%s' is not an object kind '%s' writes", bad[i].object,
                              bad[i].object, bad[i].kind);
                check_refused(bad[i].scope, bad[i].kind, bad[i].object, loss);
        }
        check_accepted(JOURNAL_RUNTIME, "affinity", "/proc/12/affinity");
        check_accepted(JOURNAL_RUNTIME, "service", "systemd:tuned.service");
        check_accepted(JOURNAL_RUNTIME, "unit-cpus", "systemd:system.slice:AllowedCPUs");
        check_accepted(JOURNAL_RUNTIME, "cgroup", "/sys/fs/cgroup/rtctl-isolated");
        check_accepted(JOURNAL_RUNTIME, "pmqos-fd", "/dev/cpu_dma_latency");
}

/* A symbolic link inside the tree that leads out of it: the write would land outside /sys. */
TEST(symlink_escape_refused)
{
        _cleanup_free_ char *outside = xasprintf("%s/outside", test_tmpdir()), *link = NULL,
                            *victim = xasprintf("%s/victim", outside);

        make_tree();
        link = xasprintf("%s/sys/devices/escape", root);
        CHECK_INTEQ(mkdir(outside, 0755) < 0 && errno != EEXIST ? -errno : 0, 0);
        CHECK_INTEQ(symlink(outside, link), 0);
        _cleanup_free_ char *text = xasprintf("{\"entries\":[{\"kind\":\"file\",\"tuner\":\"x\",\"object\":"
                                              "\"/sys/devices/escape/victim\",\"original\":\"planted\"}]}");
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *err = NULL;

        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        check_losses(j,
                     LOST("/sys/devices/escape/victim: original lost: '/sys/devices/escape/victim' is not "
                          "an object kind 'file' writes"));
        restore_and_check(j, 0);
        CHECK(access(victim, F_OK) < 0);

        /* A link to nowhere: a write could create what it names. */
        journal_free(TAKE_PTR(j));
        CHECK_INTEQ(rmdir(outside), 0);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_INTEQ(j ? journal_size(j) : 1, 0);
}

/* The reproduction of issue 20: a planted boot-file entry made `rtctl restore` create any file. */
TEST(rtctl_restore_refuses_planted_boot_file)
{
        _cleanup_free_ char *out = NULL, *err = NULL, *planted = NULL, *text = NULL;

        make_tree();
        planted = xasprintf("%s/etc/planted", root);
        text = xasprintf("{\"version\":1,\"entries\":[{\"kind\":\"boot-file\",\"tuner\":\"bootargs\","
                         "\"object\":\"/etc/planted\",\"original\":\"content:planted by hand\"}]}");
        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(test_run_rtctl(root, "restore", &out, &err), 1);
        CHECK_CONTAINS(err, "/etc/planted: original lost: kind 'boot-file' does not belong in the runtime "
                            "journal\n");
        CHECK(access(planted, F_OK) < 0);
}

/* The JSON member key of o as a string, NULL when o or the member is missing. */
static const char *member(json_object *o, const char *key)
{
        json_object *v = NULL;

        return json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

TEST(rtctl_restore_json_lost)
{
        _cleanup_free_ char *text = cut_journal(), *out = NULL, *err = NULL, *copy = NULL;
        json_object *o, *lost = NULL, *first, *last;

        make_tree();
        write_bytes(jpath, text, strlen(text));
        CHECK_INTEQ(test_run_rtctl(root, "--json restore", &out, &err), 1);
        o = json_tokener_parse(strempty(out));
        CHECK_STREQ(member(o, "changes"), "2");
        CHECK(json_object_object_get_ex(o, "lost", &lost) && json_object_is_type(lost, json_type_array));
        CHECK_INTEQ(lost ? json_object_array_length(lost) : 0, 3);
        first = lost && json_object_array_length(lost) == 3 ? json_object_array_get_idx(lost, 0) : NULL;
        last = lost && json_object_array_length(lost) == 3 ? json_object_array_get_idx(lost, 2) : NULL;
        CHECK_STREQ(member(first, "object"), "/sys/block/loop200/queue/scheduler");
        CHECK_STREQ(member(first, "reason"), "original lost: unknown kind 'foo'");
        CHECK(last && json_object_object_get_ex(last, "object", NULL) && !member(last, "object"));
        CHECK_STREQ(member(last, "reason"),
                    "journal truncated after entry 3 (/proc/sys/kernel/rt2): later originals lost");
        copy = xasprintf("%s.damaged", jpath);
        CHECK_STREQ(member(o, "damaged_copy"), copy);
        json_object_put(o);
}

TEST_MAIN(T(kind_null), T(object_null), T(original_null), T(tuner_null_or_missing), T(unknown_kind),
          T(missing_keys), T(non_string_types), T(not_utf8_and_empty_reasons), T(truncated_halfway),
          T(truncated_between_entries), T(truncated_in_header), T(garbage_in_the_middle),
          T(zeroed_entries_in_the_middle), T(trailing_garbage), T(empty_file), T(not_json),
          T(root_not_an_object), T(entries_not_an_array), T(huge_entry), T(duplicate_entries),
          T(many_entries_truncated), T(damaged_copy_never_overwritten), T(restore_compares_tolerate_null),
          T(rtctl_restore_lists_lost_originals), T(rtctl_restore_json_lost),
          T(daemon_journal_refuses_boot_kinds), T(foreign_kinds_refused),
          T(objects_outside_their_kind_refused), T(symlink_escape_refused),
          T(rtctl_restore_refuses_planted_boot_file))
