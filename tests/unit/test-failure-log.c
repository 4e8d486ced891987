/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Failures are logged once: src/daemon/failure-log.c decides, src/daemon/manager-status.c logs what a
 * pass's results say, and this reads the lines the daemon writes to stderr. */
#include <unistd.h>

#include "tuners/registry.h"
#include "daemon/manager-status.h"
#include "shared/log.h"
#include "test.h"

#define AFFINITY "/proc/irq/24/smp_affinity_list"

TEST(repeat_is_not_news)
{
        FailureLog l;

        failure_log_init(&l);
        CHECK(failure_log_note(&l, "irq", AFFINITY, -EIO, "write failed: Input/output error"));
        CHECK(!failure_log_note(&l, "irq", AFFINITY, EIO, "write failed: Input/output error"));
        CHECK(failure_log_note(&l, "irq", AFFINITY, EINVAL, "write failed: Input/output error"));
        CHECK(failure_log_note(&l, "irq", AFFINITY, EINVAL, "cannot read: Invalid argument"));
        CHECK(failure_log_note(&l, "irqthread", AFFINITY, EINVAL, "cannot read: Invalid argument"));
        CHECK(!failure_log_note(&l, "irqthread", AFFINITY, EINVAL, "cannot read: Invalid argument"));
        CHECK_INTEQ(g_hash_table_size(l.logged), 1);
        failure_log_clear(&l);
}

TEST(fixed_once_then_news_again)
{
        FailureLog l;

        failure_log_init(&l);
        CHECK(!failure_log_fixed(&l, AFFINITY)); /* never failed: nothing to say */
        CHECK(failure_log_note(&l, "irq", AFFINITY, EIO, "m"));
        CHECK(failure_log_fixed(&l, AFFINITY));
        CHECK(!failure_log_fixed(&l, AFFINITY));
        CHECK_INTEQ(g_hash_table_size(l.logged), 0);
        CHECK(failure_log_note(&l, "irq", AFFINITY, EIO, "m"));
        failure_log_clear(&l);
}

TEST(only_standing_failures_are_kept)
{
        g_autoptr(GHashTable) standing = g_hash_table_new(g_str_hash, g_str_equal);
        FailureLog l;

        failure_log_init(&l);
        for (int i = 0; i < 100; i++) {
                _cleanup_free_ char *o = xasprintf("/sys/block/loop%d/queue/nr_requests", i);
                CHECK(failure_log_note(&l, "block", o, EIO, "m"));
        }
        g_hash_table_add(standing, (gpointer) "/sys/block/loop7/queue/nr_requests");
        failure_log_prune(&l, standing);
        CHECK_INTEQ(g_hash_table_size(l.logged), 1);
        CHECK(!failure_log_note(&l, "block", "/sys/block/loop7/queue/nr_requests", EIO, "m"));
        failure_log_forget_under(&l, "/sys/block/loop7/");
        CHECK_INTEQ(g_hash_table_size(l.logged), 0);
        failure_log_clear(&l);
}

/* One pass of the irq tuner over one object with this result; returns what the daemon wrote to stderr.
 * queued: the result is a systemd job's, under way. */
static char *pass_queued(Status *s, const char *object, SettingResult result, int error, const char *message,
                         bool queued, unsigned *ret_logged)
{
        _cleanup_free_ char *path = xasprintf("%s/stderr", test_tmpdir());
        PassResult res = {};
        Dirty dirty = {};
        char *out = NULL;
        int saved = dup(STDERR_FILENO);
        FILE *f = fopen(path, "w+");

        if (object) {
                Setting *set =
                    plan_add(&res.plan, &setting_kind_file, "irq", 0, xstrdup(object), xstrdup("1"));
                set->result = result;
                set->error = error;
                set->message = message ? xstrdup(message) : NULL;
                set->queued = queued;
        }
        dirty_mark_full(&dirty, TUNER_IRQ);
        fflush(stderr);
        dup2(fileno(f), STDERR_FILENO);
        *ret_logged = status_update(s, &dirty, &res);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        fclose(f);
        (void)read_full_file(path, &out, NULL);
        pass_result_clear(&res);
        dirty_clear(&dirty);
        return out;
}

static char *pass(Status *s, const char *object, SettingResult result, int error, const char *message,
                  unsigned *ret_logged)
{
        return pass_queued(s, object, result, error, message, false, ret_logged);
}

static unsigned count(const char *haystack, const char *needle)
{
        unsigned n = 0;

        for (const char *p = haystack; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

TEST(a_pass_logs_each_failure_once)
{
        Status s;
        unsigned logged;
        char *out;

        unsetenv("JOURNAL_STREAM");
        log_setup("test");
        status_init(&s);
        out = pass(&s, AFFINITY, SETTING_FAILED, -EIO, "write failed: Input/output error", &logged);
        CHECK_STREQ(out, "warning: irq: " AFFINITY ": write failed: Input/output error\n");
        CHECK_INTEQ(logged, 1);
        free(out);
        /* The same on the next passes: nothing, while status still lists it. */
        for (int i = 0; i < 3; i++) {
                out = pass(&s, AFFINITY, SETTING_FAILED, -EIO, "write failed: Input/output error", &logged);
                CHECK_STREQ(out, "");
                CHECK_INTEQ(logged, 0);
                CHECK_INTEQ(status_n_failures(&s), 1);
                free(out);
        }
        /* Another errno: news. */
        out = pass(&s, AFFINITY, SETTING_FAILED, -EINVAL, "write failed: Invalid argument", &logged);
        CHECK_STREQ(out, "warning: irq: " AFFINITY ": write failed: Invalid argument\n");
        free(out);
        /* Put in place: said once. */
        out = pass(&s, AFFINITY, SETTING_CHANGED, 0, NULL, &logged);
        CHECK_STREQ(out, "irq: " AFFINITY ": now in place\n");
        free(out);
        out = pass(&s, AFFINITY, SETTING_UNCHANGED, 0, NULL, &logged);
        CHECK_STREQ(out, "");
        free(out);
        CHECK_INTEQ(status_n_failures(&s), 0);
        /* Back again after it cleared: news again. */
        out = pass(&s, AFFINITY, SETTING_FAILED, -EINVAL, "write failed: Invalid argument", &logged);
        CHECK_INTEQ(count(out, "write failed"), 1);
        free(out);
        /* The object is no longer planned (the profile changed): forgotten without a word, so the memory
         * holds only what stands. */
        out = pass(&s, NULL, SETTING_FAILED, 0, NULL, &logged);
        CHECK_STREQ(out, "");
        CHECK_INTEQ(g_hash_table_size(s.log.logged), 0);
        free(out);
        status_clear(&s);
}

/* A systemd job that fails after every pass: the pass that queues it again neither says it is fixed nor
 * forgets it, so the job's next failure, the same, is not logged again. */
TEST(systemd_job_failing_again_is_logged_once)
{
        Status s;
        unsigned logged;
        char *out;

        status_init(&s);
        status_set_failure(&s, LOG_WARNING, "irq", "systemd:x.slice:AllowedCPUs", EIO, "job failed");
        CHECK_INTEQ(g_hash_table_size(s.log.logged), 1);
        out = pass_queued(&s, "systemd:x.slice:AllowedCPUs", SETTING_CHANGED, 0, NULL, true, &logged);
        CHECK_STREQ(out, "");
        free(out);
        CHECK_INTEQ(g_hash_table_size(s.log.logged), 1);
        CHECK(!failure_log_note(&s.log, "irq", "systemd:x.slice:AllowedCPUs", EIO, "job failed"));
        status_clear(&s);
}

TEST(newline_in_an_object_stays_on_its_line)
{
        Status s;
        unsigned logged;
        char *out;

        status_init(&s);
        out =
            pass(&s, "/sys/block/evil\nwarning: forged/queue/scheduler", SETTING_FAILED, -EIO, "x", &logged);
        CHECK_INTEQ(count(out, "\n"), 1);
        CHECK_CONTAINS(out, "evil\\x0awarning: forged");
        free(out);
        status_clear(&s);
}

TEST(status_line_says_profile_holds_failures)
{
        Status s;
        char *line;

        status_init(&s);
        line = status_line(&s, NULL, NULL);
        CHECK_STREQ(line, "No profile: nothing tuned");
        free(line);
        line = status_line(&s, "rt", NULL);
        CHECK_STREQ(line, "Profile rt; applied");
        free(line);
        status_set_failure(&s, LOG_DEBUG, "irq", AFFINITY, EIO, "m");
        status_set_failure(&s, LOG_DEBUG, "block", "/sys/block/loop200/queue/nr_requests", EIO, "m");
        status_set_failure(&s, LOG_DEBUG, "irq", "/proc/irq/25/smp_affinity_list", EIO, "m");
        line = status_line(&s, "rt", "1 hold (org.example.Daw)");
        CHECK_STREQ(line, "Profile rt; 1 hold (org.example.Daw); 3 failures (block, irq)");
        free(line);
        status_clear(&s);
}

TEST_MAIN(T(repeat_is_not_news), T(fixed_once_then_news_again), T(only_standing_failures_are_kept),
          T(a_pass_logs_each_failure_once), T(systemd_job_failing_again_is_logged_once),
          T(newline_in_an_object_stays_on_its_line), T(status_line_says_profile_holds_failures))
