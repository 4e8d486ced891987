/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The applier, the journal and the pass, on a small tree under a root prefix. */
#include <sys/stat.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"
#include "tuners/registry.h"

static char *root, *conf, *journal_file;

static void make_tree(void)
{
        _cleanup_free_ char *link = NULL;

        free(root);
        free(conf);
        free(journal_file);
        root = xasprintf("%s/root", test_tmpdir());
        conf = xasprintf("%s/conf", test_tmpdir());
        journal_file = xasprintf("%s/run/journal.json", test_tmpdir());
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' '%s' '%s/run'; mkdir -p '%s/run'", root, conf,
                                             test_tmpdir(), test_tmpdir());
        CHECK_INTEQ(system(cmd), 0);

        test_write(root, "sys/devices/system/cpu/possible", "0-1\n");
        test_write(root, "sys/devices/system/cpu/present", "0-1\n");
        test_write(root, "sys/devices/system/cpu/online", "0-1\n");
        test_write(root, "sys/devices/virtual/block/loop1/queue/scheduler",
                   "none [mq-deadline] kyber bfq\n");
        test_write(root, "sys/devices/virtual/block/loop1/queue/rotational", "0\n");
        test_write(root, "sys/devices/virtual/block/loop1/queue/nr_requests", "256\n");
        test_write(root, "sys/devices/virtual/block/loop1/queue/iosched/low_latency", "1\n");
        test_write(root, "sys/devices/virtual/block/loop1/removable", "0\n");
        test_write(root, "proc/sys/kernel/timer_migration", "1\n");
        link = xasprintf("%s/sys/block", root);
        CHECK_INTEQ(mkdir_p(link, 0755), 0);
        free(link);
        link = xasprintf("%s/sys/block/loop1", root);
        CHECK_INTEQ(symlink("../devices/virtual/block/loop1", link), 0);
        sysroot_set(root);

        test_write(conf, "profiles/a.conf",
                   "[Profile]\nDescription=a\n[Block l]\nMatch=transport:loop\nScheduler=bfq\n"
                   "Tunables=low_latency=0\n[Sysctl]\nkernel.timer_migration=0\n");
        test_write(conf, "profiles/b.conf",
                   "[Profile]\nDescription=b\n[Block l]\nMatch=name:loop*\nScheduler=bfq\nNrRequests=64\n"
                   "[Sysctl]\nkernel.timer_migration=2\n");
        test_write(conf, "profiles/base.conf",
                   "[Profile]\nDescription=base\n[Block any]\nScheduler=mq-deadline\n");
        test_write(conf, "profiles/child.conf",
                   "[Profile]\nInclude=base\n[Block loops]\nMatch=transport:loop\nScheduler=none\n");
}

static char *value(const char *object)
{
        char *s = NULL;
        if (sys_read(object, &s) < 0)
                return xstrdup("(absent)");
        return s;
}

static Policy *load(const char *name)
{
        char *path[] = {conf, NULL};
        Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        CHECK_INTEQ(policy_load(path, name, &p, &err), 0);
        CHECK_STREQ(err, NULL);
        return p;
}

static void pass(const Policy *p, Journal *j, bool dry, PassResult *res)
{
        _cleanup_topology_ Topology *t = NULL;
        Dirty all = {};

        CHECK_INTEQ(topology_load(NULL, &t), 0);
        dirty_mark_all(&all);
        reconcile_pass(p, t, j, &all, dry, res);
        dirty_clear(&all);
}

static Journal *open_journal(const char *path)
{
        _cleanup_free_ char *err = NULL;
        Journal *j = NULL;

        CHECK_INTEQ(journal_open(path, JOURNAL_RUNTIME, &j, &err), 0);
        return j;
}

/* A test ends with everything put back as j says, for the next test's tree. */
static void restore_all(Journal *j)
{
        PassResult res;

        pass(NULL, j, false, &res);
        pass_result_clear(&res);
}

#define SCHED  "/sys/block/loop1/queue/scheduler"
#define LOWLAT "/sys/block/loop1/queue/iosched/low_latency"
#define TIMER  "/proc/sys/kernel/timer_migration"

TEST(apply_journal_restore_after_restart)
{
        _cleanup_policy_ Policy *a = NULL;
        Journal *j = NULL;
        PassResult res;

        make_tree();
        a = load("a");
        j = open_journal(journal_file);
        pass(a, j, false, &res);
        CHECK_INTEQ(res.stats.changed, 3);
        CHECK_INTEQ(res.stats.failed, 0);
        pass_result_clear(&res);
        _cleanup_free_ char *s1 = value(SCHED), *l1 = value(LOWLAT), *t1 = value(TIMER);
        CHECK_STREQ(s1, "bfq");
        CHECK_STREQ(l1, "0");
        CHECK_STREQ(t1, "0");
        journal_free(j); /* as if the daemon was killed */

        /* A second process finds the originals on disk. */
        j = NULL;
        j = open_journal(journal_file);
        CHECK_INTEQ(journal_size(j), 3);
        CHECK_STREQ(journal_find(j, SCHED)->original, "mq-deadline");
        CHECK_STREQ(journal_find(j, TIMER)->original, "1");
        pass(NULL, j, false, &res);
        CHECK_INTEQ(res.stats.changed, 3);
        pass_result_clear(&res);
        _cleanup_free_ char *s2 = value(SCHED), *l2 = value(LOWLAT), *t2 = value(TIMER);
        CHECK_STREQ(s2, "mq-deadline");
        CHECK_STREQ(l2, "1");
        CHECK_STREQ(t2, "1");
        CHECK_INTEQ(journal_size(j), 0);
        CHECK(access(journal_file, F_OK) < 0);
        journal_free(j);
}

/* Processes go home before the cgroups rtctl made go, and those before anything else: on cgroup v2 a
 * remote partition in a directory rtctl made holds exclusive CPUs its ancestors list, and those lists
 * can only shrink once it is gone. Newest first within each. */
TEST(restore_order_processes_then_made_cgroups_then_the_rest)
{
        Journal *j = NULL;
        PassResult res;
        const char *order[] = {"/proc/4242/cgroup", "/sys/fs/cgroup/rtctl-b", "/sys/fs/cgroup/rtctl-a",
                               "/sys/fs/cgroup/rtctl-x/cpuset.cpus.exclusive", TIMER};
        size_t k = 0;

        make_tree();
        j = open_journal(journal_file);
        journal_remember(j, &setting_kind_file, "sysctl", TIMER, "1");
        journal_remember(j, &setting_kind_cgroup, "cpuset", "/sys/fs/cgroup/rtctl-a", "absent");
        journal_remember(j, &setting_kind_file, "cpuset", "/sys/fs/cgroup/rtctl-x/cpuset.cpus.exclusive",
                         "");
        journal_remember(j, &setting_kind_cgroup, "cpuset", "/sys/fs/cgroup/rtctl-b", "absent");
        journal_remember(j, &setting_kind_member, "cpuset", "/proc/4242/cgroup", "/user.slice");
        pass(NULL, j, true, &res);
        for (size_t i = 0; i < res.plan.n && k < ELEMENTSOF(order); i++)
                if (res.plan.settings[i].restore) {
                        CHECK_STREQ(res.plan.settings[i].object, order[k]);
                        k++;
                }
        CHECK_INTEQ(k, ELEMENTSOF(order));
        pass_result_clear(&res);
        journal_free(j);
        unlink(journal_file);
}

TEST(second_pass_writes_nothing)
{
        _cleanup_policy_ Policy *a = NULL;
        _cleanup_journal_ Journal *j = NULL;
        PassResult res;

        make_tree();
        a = load("a");
        j = open_journal(journal_file);
        pass(a, j, false, &res);
        pass_result_clear(&res);
        pass(a, j, false, &res);
        CHECK_INTEQ(res.stats.changed, 0);
        CHECK_INTEQ(res.stats.unchanged, 3);
        pass_result_clear(&res);
        restore_all(j);
}

TEST(switch_goes_straight_and_restores_only_what_is_left)
{
        _cleanup_policy_ Policy *a = NULL, *b = NULL;
        _cleanup_journal_ Journal *j = NULL;
        PassResult res;
        const Setting *s;

        make_tree();
        a = load("a");
        b = load("b");
        j = open_journal(journal_file);
        pass(a, j, false, &res);
        pass_result_clear(&res);

        pass(b, j, false, &res);
        /* timer_migration goes 0 -> 2 directly: no restore of it in between. */
        for (size_t i = 0; i < res.plan.n; i++)
                if (streq(res.plan.settings[i].object, TIMER))
                        CHECK(!res.plan.settings[i].restore && streq(res.plan.settings[i].desired, "2"));
        s = test_plan_find(&res.plan, TIMER);
        CHECK(s && s->result == SETTING_CHANGED);
        CHECK_STREQ(s ? s->current : NULL, "0");
        /* The scheduler both want stays; what b leaves alone goes back. */
        s = test_plan_find(&res.plan, SCHED);
        CHECK(s && !s->restore && s->result == SETTING_UNCHANGED);
        s = test_plan_find(&res.plan, LOWLAT);
        CHECK(s && s->restore && streq(s->desired, "1") && s->result == SETTING_CHANGED);
        pass_result_clear(&res);
        /* The journal still holds the true original, not a's value. */
        const JournalEntry *e = journal_find(j, TIMER);
        CHECK_STREQ(e ? e->original : NULL, "1");
        CHECK(journal_find(j, LOWLAT) == NULL);
        _cleanup_free_ char *t = value(TIMER), *l = value(LOWLAT);
        CHECK_STREQ(t, "2");
        CHECK_STREQ(l, "1");
        restore_all(j);
}

TEST(dry_run_writes_nothing)
{
        _cleanup_policy_ Policy *a = NULL;
        _cleanup_journal_ Journal *j = NULL;
        PassResult res;
        const Setting *s;

        make_tree();
        a = load("a");
        j = open_journal(journal_file);
        pass(a, j, true, &res);
        s = test_plan_find(&res.plan, SCHED);
        CHECK(s && s->result == SETTING_PENDING);
        CHECK_STREQ(s ? s->current : NULL, "mq-deadline");
        CHECK_STREQ(s ? s->desired : NULL, "bfq");
        pass_result_clear(&res);
        _cleanup_free_ char *v = value(SCHED);
        CHECK_CONTAINS(v, "[mq-deadline]");
        CHECK(access(journal_file, F_OK) < 0);
        CHECK_INTEQ(journal_size(j), 0);
}

TEST(failure_is_per_setting)
{
        _cleanup_policy_ Policy *a = NULL;
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *p = NULL;
        PassResult res;
        const Setting *s;

        make_tree();
        a = load("a");
        /* A tunable that cannot be written: a directory where the file should be. */
        p = xasprintf("%s/sys/devices/virtual/block/loop1/queue/iosched/low_latency", root);
        CHECK_INTEQ(unlink(p), 0);
        CHECK_INTEQ(mkdir(p, 0755), 0);
        j = open_journal(journal_file);
        pass(a, j, false, &res);
        s = test_plan_find(&res.plan, LOWLAT);
        CHECK(s && s->result == SETTING_FAILED && s->error == -EISDIR);
        CHECK_CONTAINS(s ? s->message : NULL, "cannot read");
        CHECK_INTEQ(res.stats.changed, 2);
        CHECK_INTEQ(res.stats.failed, 1);
        pass_result_clear(&res);
        restore_all(j);
}

TEST(no_write_without_journal)
{
        _cleanup_policy_ Policy *a = NULL;
        _cleanup_journal_ Journal *j = NULL;
        _cleanup_free_ char *bad = xasprintf("%s/missing-dir/journal.json", test_tmpdir());
        PassResult res;

        make_tree();
        a = load("a");
        j = open_journal(bad);
        pass(a, j, false, &res);
        CHECK_INTEQ(res.stats.changed, 0);
        CHECK_INTEQ(res.stats.failed, 3);
        CHECK_CONTAINS(res.plan.settings[0].message, "journal could not be saved");
        pass_result_clear(&res);
        _cleanup_free_ char *v = value(SCHED), *t = value(TIMER);
        CHECK_CONTAINS(v, "[mq-deadline]");
        CHECK_STREQ(t, "1");
}

TEST(including_profile_rules_come_first)
{
        _cleanup_policy_ Policy *c = NULL;
        PassResult res;
        const Setting *s;

        make_tree();
        c = load("child");
        pass(c, NULL, true, &res);
        s = test_plan_find(&res.plan, SCHED);
        CHECK_STREQ(s ? s->desired : NULL, "none");
        pass_result_clear(&res);
}

/* Every TunerId names its own tuner, in the order of a pass, and a name from the journal finds it. */
TEST(registry_places_every_tuner_by_its_id)
{
        static const struct {
                TunerId id;
                const Tuner *tuner;
        } ids[] = {
            {TUNER_CONFLICT, &tuner_conflict}, {TUNER_SYSCTL, &tuner_sysctl},
            {TUNER_SCHED, &tuner_sched},       {TUNER_KTHREAD, &tuner_kthread},
            {TUNER_CPUSET, &tuner_cpuset},     {TUNER_CACHE, &tuner_cache},
            {TUNER_IRQ, &tuner_irq},           {TUNER_IRQTHREAD, &tuner_irqthread},
            {TUNER_CPUFREQ, &tuner_cpufreq},   {TUNER_CPUIDLE, &tuner_cpuidle},
            {TUNER_BLOCK, &tuner_block},       {TUNER_AUDIODEV, &tuner_audiodev},
        };

        CHECK_INTEQ(tuners_n(), _TUNER_MAX);
        CHECK_INTEQ(ELEMENTSOF(ids), _TUNER_MAX);
        for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
                CHECK(tuner_nth(ids[i].id) == ids[i].tuner);
                CHECK_INTEQ(tuner_place(ids[i].tuner), ids[i].id);
                CHECK_INTEQ(tuner_index_by_name(ids[i].tuner->name), ids[i].id);
        }
        CHECK_INTEQ(tuner_index_by_name("cpusett"), -1);
        CHECK(tuner_nth(_TUNER_MAX) == NULL);
}

TEST_MAIN(T(apply_journal_restore_after_restart), T(restore_order_processes_then_made_cgroups_then_the_rest),
          T(second_pass_writes_nothing), T(switch_goes_straight_and_restores_only_what_is_left),
          T(dry_run_writes_nothing), T(failure_is_per_setting), T(no_write_without_journal),
          T(including_profile_rules_come_first), T(registry_places_every_tuner_by_its_id))
