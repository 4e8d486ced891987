/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Threads=realtime and graph:: parsing, the thread test, the markers in a memory map, why a thread goes;
 * trace_pipe's lines (core/tracefs.c), whole and cut, and the journal of what rtctld made in tracefs. */
#include <sched.h>
#include <sys/stat.h>

#include "core/attach.h"
#include "core/journal.h"
#include "core/policy.h"
#include "core/tracefs.h"
#include "shared/sysfs.h"
#include "test.h"

static int load(const char *name, const char *rules, Policy **ret, char **err)
{
        _cleanup_free_ char *d = xasprintf("%s/%s", test_tmpdir(), name);
        _cleanup_free_ char *rel = xasprintf("profiles/%s.conf", name);
        _cleanup_free_ char *text = xasprintf("[Profile]\nDescription=t\n[CPU]\nIsolate=1\n%s", rules);
        char *path[] = {d, NULL};

        test_write(d, rel, text);
        *err = NULL;
        return policy_load(path, name, ret, err);
}

/* A stat line with policy (field 41) after a comm that holds what a parser could trip on. */
static char *stat_line(unsigned tid, const char *comm, int policy)
{
        _cleanup_free_ char *tail = xstrdup("");

        for (int f = 4; f <= 40; f++) {
                char *t = xasprintf("%s %d", tail, f == 40 ? 50 : f);
                free(tail);
                tail = t;
        }
        return xasprintf("%u (%s) S%s %d 0 0 0 0 0 0 0 0 0 0 0\n", tid, comm, tail, policy);
}

/* Process pid of user uid with threads "tid:name:policy"; maps as given. */
static void fake(const char *root, unsigned pid, const char *comm, unsigned uid, const char *maps,
                 const char *const *threads)
{
        _cleanup_free_ char *c = xasprintf("proc/%u/comm", pid), *st = xasprintf("proc/%u/status", pid);
        _cleanup_free_ char *m = xasprintf("proc/%u/maps", pid);
        _cleanup_free_ char *status =
            xasprintf("Name:\t%s\nTgid:\t%u\nUid:\t%u\t%u\t%u\t%u\n", comm, pid, uid, uid, uid, uid);

        test_write(root, c, comm);
        test_write(root, st, status);
        if (maps)
                test_write(root, m, maps);
        for (const char *const *t = threads; t && *t; t++) {
                unsigned tid;
                char name[32];
                int policy;
                CHECK_INTEQ(sscanf(*t, "%u:%31[^:]:%d", &tid, name, &policy), 3);
                _cleanup_free_ char *rc = xasprintf("proc/%u/task/%u/comm", pid, tid);
                _cleanup_free_ char *rs = xasprintf("proc/%u/task/%u/stat", pid, tid);
                _cleanup_free_ char *line = stat_line(tid, name, policy);
                _cleanup_free_ char *ts = xasprintf("proc/%u/status", tid);
                test_write(root, rc, name);
                test_write(root, rs, line);
                if (tid != pid)
                        test_write(root, ts, status);
        }
}

static int match(const AttachRules *r, unsigned pid)
{
        AttachProc p;
        int i;

        attach_proc_init(&p, pid, NULL);
        i = attach_rules_match(r, &p, NULL, 0);
        attach_proc_clear(&p);
        return i;
}

TEST(threads_alternatives_parse)
{
        _cleanup_free_ char *err = NULL, *err2 = NULL;
        Policy *p = NULL;

        CHECK_INTEQ(
            load("alts",
                 "[Attach pw]\nMatch=comm:pipewire user:0\nThreads=realtime data-loop* pw-data-loop\n"
                 "[Attach clients]\nMatch=graph:pipewire|jack user:active\nThreads=realtime\n",
                 &p, &err),
            0);
        CHECK_STREQ(err, NULL);
        if (p) {
                CHECK(p->attach->rules[0].realtime);
                CHECK_INTEQ(strv_length(p->attach->rules[0].thread_globs), 2);
                CHECK(!p->attach->rules[0].all);
                CHECK(p->attach->rules[1].realtime && !p->attach->rules[1].thread_globs);
                CHECK_INTEQ(p->attach->rules[1].terms[0].kind, ATTACH_GRAPH);
                CHECK_INTEQ(p->attach->rules[1].terms[0].graphs, ATTACH_GRAPH_PIPEWIRE | ATTACH_GRAPH_JACK);
                CHECK(p->attach->uses_realtime);
        }
        policy_free(p);
        p = NULL;

        CHECK_INTEQ(load("altsbad",
                         "[Attach a]\nMatch=comm:x user:0\nThreads=all realtime\n" /* 5-7 */
                         "[Attach b]\nMatch=graph:alsa user:0\nThreads=realtime\n" /* 8-10 */
                         "[Attach c]\nMatch=graph:jack\nThreads=realtime\n"        /* 11-13 */
                         "[Attach d]\nMatch=comm:x user:0\nThreads=realtime [x\n", /* 14-16 */
                         &p, &err2),
                    -EINVAL);
        CHECK_CONTAINS(err2, "altsbad.conf:7: Threads=all realtime: all is the whole process");
        CHECK_CONTAINS(
            err2, "altsbad.conf:9: Match=graph:alsa user:0: graph:alsa: the graphs are pipewire and jack");
        CHECK_CONTAINS(err2, "altsbad.conf:12: Match=graph:jack: a rule must say whose processes");
        CHECK_CONTAINS(err2, "altsbad.conf:16: Threads=realtime [x:");
        CHECK(p == NULL);
}

TEST(stat_policy_and_maps)
{
        _cleanup_free_ char *odd = stat_line(7, "a) (b 1 2", SCHED_FIFO | SCHED_RESET_ON_FORK);
        int policy = -1;

        CHECK_INTEQ(attach_stat_policy(odd, &policy), 0);
        CHECK(attach_policy_realtime(policy));
        CHECK(attach_policy_realtime(SCHED_RR));
        CHECK(attach_policy_realtime(6)); /* SCHED_DEADLINE */
        CHECK(!attach_policy_realtime(SCHED_OTHER));
        CHECK(!attach_policy_realtime(SCHED_BATCH));
        CHECK(!attach_policy_realtime(SCHED_IDLE | SCHED_RESET_ON_FORK));
        CHECK_INTEQ(attach_stat_policy("1 (x) S 1 2 3", &policy), -EBADMSG);
        CHECK_INTEQ(attach_stat_policy("no parenthesis", &policy), -EBADMSG);

        CHECK_INTEQ(attach_maps_graphs("7f00-7f10 rw-s 00000000 00:01 5 /memfd:pipewire-memfd (deleted)\n"),
                    ATTACH_GRAPH_PIPEWIRE);
        /* PipeWire 0.3.65 as Debian 12 maps it (the VM tier's pw-jack client) */
        CHECK_INTEQ(
            attach_maps_graphs("7f3c2a1e5000-7f3c2a1e9000 rw-s 00000000 00:01 2055 "
                               "/memfd:pipewire-memfd:flags=0x0000000f,type=2,size=16384 (deleted)\n"),
            ATTACH_GRAPH_PIPEWIRE);
        CHECK_INTEQ(attach_maps_graphs("7f00-7f10 rw-s 00000000 00:19 9 /dev/shm/jack-shm-registry\n"
                                       "7f10-7f20 r-xp 00000000 08:01 3 /usr/lib/libjack.so.0\n"),
                    ATTACH_GRAPH_JACK);
        /* Only the whole name: a file that starts so is not it, nor one that names it later. */
        CHECK_INTEQ(attach_maps_graphs("7f00-7f10 rw-s 00000000 00:19 9 /dev/shm/jack-shm-registry2\n"
                                       "7f00-7f10 rw-s 00000000 00:19 9 /tmp/x/memfd:pipewire-memfd\n"
                                       "7f00-7f10 rw-s 00000000 00:01 9 /memfd:pipewire-memfdx (deleted)\n"),
                    0);
        CHECK_INTEQ(attach_maps_graphs(""), 0);
}

TEST(realtime_rules_match_and_choose)
{
        _cleanup_free_ char *root = xasprintf("%s/rt", test_tmpdir()), *err = NULL;
        _cleanup_policy_ Policy *p = NULL;
        AttachedThread *t = NULL;
        size_t n = 0, allocated = 0;

        CHECK_INTEQ(load("rt",
                         "[Attach pw]\nMatch=comm:pipewire user:1000\nThreads=realtime data-loop*\n"
                         "[Attach clients]\nMatch=graph:pipewire|jack user:1000\nThreads=realtime\n",
                         &p, &err),
                    0);
        if (!p)
                return;
        fake(root, 300, "pipewire", 1000, NULL,
             (const char *const[]){"300:pipewire:0", "301:data-loop.0:1", "302:data-loop.1:0", "303:pw-x:2",
                                   NULL});
        fake(root, 310, "ardour", 1000, "1-2 rw-s 0 0:1 5 /memfd:pipewire-memfd (deleted)\n",
             (const char *const[]){"310:ardour:0", "311:audio:1", NULL});
        fake(root, 320, "sleepy", 1000, "1-2 rw-s 0 0:1 5 /dev/shm/jack-shm-registry\n",
             (const char *const[]){"320:sleepy:0", NULL});
        fake(root, 330, "rt-no-graph", 1000, "", (const char *const[]){"330:x:1", NULL});
        fake(root, 340, "ardour", 1001, "1-2 rw-s 0 0:1 5 /memfd:pipewire-memfd (deleted)\n",
             (const char *const[]){"340:ardour:1", NULL});
        sysroot_set(root);
        CHECK_INTEQ(match(p->attach, 300), 0);
        CHECK_INTEQ(match(p->attach, 310), 1);
        CHECK_INTEQ(match(p->attach, 320), -1); /* a graph client without a real-time thread */
        CHECK_INTEQ(match(p->attach, 330), -1); /* real-time, but no graph */
        CHECK_INTEQ(match(p->attach, 340), -1); /* another user's */

        CHECK_INTEQ(attach_list_threads(&p->attach->rules[0], 300, &t, &n, &allocated), 0);
        CHECK_INTEQ(n, 4);
        for (size_t i = 0; i < n; i++) {
                /* data-loop.1 is named so but not real-time: in a rule that lets in a user, a name is
                 * theirs to choose, and it sends no thread that is not real-time. */
                unsigned want = t[i].tid == 301   ? ATTACH_WHY_REALTIME | ATTACH_WHY_NAME
                                : t[i].tid == 303 ? ATTACH_WHY_REALTIME
                                                  : 0;
                CHECK_INTEQ(t[i].why, want);
                CHECK_INTEQ(t[i].isolate, want != 0);
        }
        CHECK_STREQ(attach_why_string(ATTACH_WHY_REALTIME | ATTACH_WHY_NAME), "realtime,name");
        CHECK_STREQ(attach_why_string(ATTACH_WHY_REALTIME), "realtime");
        CHECK_STREQ(attach_why_string(ATTACH_WHY_NAME), "name");
        CHECK_STREQ(attach_why_string(ATTACH_WHY_ALL), "all");
        n = 0;
        CHECK_INTEQ(attach_list_threads(&p->attach->rules[1], 310, &t, &n, &allocated), 0);
        CHECK_INTEQ(n, 2);
        for (size_t i = 0; i < n; i++)
                CHECK_INTEQ(t[i].isolate, t[i].tid == 311);
        unsigned tgid = 0;
        CHECK_INTEQ(attach_thread_tgid(311, &tgid), 0);
        CHECK_INTEQ(tgid, 310);
        CHECK_INTEQ(attach_thread_tgid(999, &tgid), -ENOENT);
        free(t);
        sysroot_set("");
}

static void collect(unsigned tid, void *userdata)
{
        unsigned *got = userdata;

        got[++got[0]] = tid;
}

static const char TRACE[] =
    "# tracer: nop\n"
    "           chrt-4242    [001] .....  100.000001: sys_sched_setscheduler(pid: 0x00000000, policy: "
    "0x00000001, param: 0x7ffd)\n"
    " rtkit-daemon-800     [000] ..... 100.000002: sys_sched_setscheduler(pid: 0x00001389, policy: "
    "0x40000002, param: 0x7ffc)\n"
    "           chrt-4242    [001] .....  100.000003: sys_sched_setscheduler -> 0x0\n"
    " rtkit-daemon-800     [000] ..... 100.000004: sys_sched_setscheduler -> 0xffffffffffffffff\n"
    "  a- b [1] -77   [003] d..1.  100.000005: sys_sched_setattr(pid: 0x0000004d, uattr: 0x1, flags: 0x0)\n"
    "  a- b [1] -77   [003] d..1.  100.000006: sys_sched_setattr -> 0x0\n"
    "          x-9       [000] .....  100.000007: sys_sched_setattr -> 0x0\n"
    /* 6.18 prints integer arguments in decimal: the probe call (a PID no kernel hands out) says so */
    "          rtctld-1       [000] ..... 25399.540300: sys_sched_setscheduler(pid: 123456789, policy: 0, "
    "param: "
    "0x7ffd597068a4)\n"
    "          rtctld-1       [000] ..... 25399.540301: sys_sched_setscheduler -> 0xfffffffffffffffd\n"
    "         python3-21737   [000] ..... 25399.540319: sys_sched_setscheduler(pid: 0, policy: 1, param: "
    "0x7ffd597068a4)\n"
    "         python3-21737   [000] .N... 25399.540329: sys_sched_setscheduler -> 0x0\n"
    "         python3-21738   [000] ..... 25399.540319: sys_sched_setscheduler(pid: 21740, policy: 1, "
    "param: 0x7ffd597068a4)\n"
    "         python3-21738   [000] .N... 25399.540329: sys_sched_setscheduler -> 0x0\n"
    "         python3-21739   [000] ..... 25399.540319: sys_sched_setscheduler(pid: -1, policy: 1, param: "
    "0x0)\n"
    "         python3-21739   [000] .N... 25399.540329: sys_sched_setscheduler -> -22\n";

TEST(trace_lines)
{
        unsigned caller = 0, target = 0, got[16] = {};
        long long ret = -1;
        SchedTrace st = {};

        CHECK_INTEQ(sched_trace_parse_line("x-12 [000] ..... 1.0: sys_sched_setattr(pid: 0x0000000a, u", 60,
                                           &caller, &target, &ret),
                    1);
        CHECK_INTEQ(caller, 12);
        CHECK_INTEQ(target, 10);
        CHECK_INTEQ(sched_trace_parse_line("x-12 [000] ..... 1.0: sys_sched_setattr -> 0xffffffffffffffea",
                                           61, &caller, &target, &ret),
                    2);
        CHECK(ret != 0);
        /* record-tgid on: "comm-TID (TGID) [CPU]" */
        {
                const char *l =
                    "   pw-data-loop-341   (    338) [001] ..... 1.0: sys_sched_setattr(pid: 0, u";
                CHECK_INTEQ(sched_trace_parse_line(l, strlen(l), &caller, &target, &ret), 1);
                CHECK_INTEQ(caller, 341);
                l = "   pw-data-loop-341   (-------) [001] ..... 1.0: sys_sched_setattr -> 0x0";
                CHECK_INTEQ(sched_trace_parse_line(l, strlen(l), &caller, &target, &ret), 2);
                CHECK_INTEQ(caller, 341);
                l = "no-open-341 ) [001] ..... 1.0: sys_sched_setattr -> 0x0";
                CHECK_INTEQ(sched_trace_parse_line(l, strlen(l), &caller, &target, &ret), 0);
        }
        CHECK_INTEQ(sched_trace_parse_line("x-12 [000] ..... 1.0: sys_sched_setparam -> 0x0", 46, &caller,
                                           &target, &ret),
                    0);
        CHECK_INTEQ(
            sched_trace_parse_line("12 [000] 1.0: sys_sched_setattr -> 0x0", 37, &caller, &target, &ret), 0);

        /* Whole: chrt's call on itself, and the one on 77 (a comm full of look-alikes); rtkit's failed,
         * and an exit with no enter is nothing. */
        CHECK_INTEQ(sched_events_parse(&st, TRACE, strlen(TRACE), collect, got), 4);
        CHECK_INTEQ(got[0], 4);
        CHECK_INTEQ(got[1], 4242);
        CHECK_INTEQ(got[2], 77);
        CHECK_INTEQ(got[3], 21737);
        CHECK_INTEQ(got[4], 21740);
        CHECK_INTEQ(st.n_pending, 0);

        /* Cut at every byte: the same. */
        for (size_t cut = 0; cut <= strlen(TRACE); cut++) {
                SchedTrace s2 = {};
                unsigned g2[16] = {};
                sched_events_parse(&s2, TRACE, cut, collect, g2);
                sched_events_parse(&s2, TRACE + cut, strlen(TRACE) - cut, collect, g2);
                CHECK_INTEQ(g2[0], 4);
                CHECK_INTEQ(g2[1], 4242);
                CHECK_INTEQ(g2[4], 21740);
        }

        /* Up to 6.17 a bare argument is hex: "pid: 14b" is 331 once the probe said "75bcd15"; before
         * it, a bare number (but 0-9, which read alike) is not trusted. */
        {
                static const char OLD[] =
                    "  jackd-340 [001] ..... 1.0: sys_sched_setscheduler(pid: 156, policy: 1, param: 7ffd)\n"
                    "  jackd-340 [001] ..... 1.1: sys_sched_setscheduler -> 0x0\n"
                    "  rtctld-9 [000] ..... 1.2: sys_sched_setscheduler(pid: 75bcd15, policy: 0, param: "
                    "7ffd)\n"
                    "  rtctld-9 [000] ..... 1.3: sys_sched_setscheduler -> 0xfffffffffffffffd\n"
                    "  jackd-340 [001] ..... 1.4: sys_sched_setscheduler(pid: 14b, policy: 1, param: 7ffd)\n"
                    "  jackd-340 [001] ..... 1.5: sys_sched_setscheduler -> 0x0\n"
                    "  jackd-340 [001] ..... 1.6: sys_sched_setscheduler(pid: 0, policy: 1, param: 7ffd)\n"
                    "  jackd-340 [001] ..... 1.7: sys_sched_setscheduler -> 0x0\n";
                SchedTrace o = {};
                unsigned g3[16] = {};
                CHECK_INTEQ(sched_events_parse(&o, OLD, strlen(OLD), collect, g3), 2);
                CHECK_INTEQ(o.radix, 16);
                CHECK_INTEQ(g3[0], 2);
                CHECK_INTEQ(g3[1], 331);
                CHECK_INTEQ(g3[2], 340);
        }

        /* The kernel says when the buffer overflowed. */
        CHECK(!st.lost);
        sched_events_parse(&st, "CPU:1 [LOST 17 EVENTS]\n", 23, collect, got);
        CHECK(st.lost);

        /* Calls whose exit never comes stay bounded. */
        st = (SchedTrace){};
        for (unsigned i = 1; i <= 1000; i++) {
                _cleanup_free_ char *l =
                    xasprintf("t-%u [000] ..... 1.0: sys_sched_setscheduler(pid: 0x0, policy: 0x1)\n", i);
                sched_events_parse(&st, l, strlen(l), collect, got);
        }
        CHECK_INTEQ(st.n_pending, SCHED_TRACE_PENDING);
}

/* A journal holding the top level's record-cmd with this original, over a record-cmd that is off:
 * sched_trace_restore_dir()'s answer, checked against what record-cmd then reads. */
static int restore_record_cmd(const char *root, const char *runtime, const char *original)
{
        _cleanup_free_ char *journal = xasprintf(
            "{\"version\":1,\"entries\":[{\"kind\":\"file\",\"object\":\"/sys/kernel/tracing/options/"
            "record-cmd\",\"original\":\"%s\",\"tuner\":\"rtctld\"}]}",
            original);
        _cleanup_free_ char *err = NULL, *v = NULL;
        int r;

        test_write(root, "sys/kernel/tracing/options/record-cmd", "0\n");
        test_write(root, "run/" SCHED_TRACE_JOURNAL, journal);
        r = sched_trace_restore_dir(runtime, &err);
        CHECK_INTEQ(sys_read("/sys/kernel/tracing/options/record-cmd", &v), 0);
        CHECK_STREQ(strstrip(v), r == 0 ? "1" : "0");
        return r;
}

TEST(tracefs_journal)
{
        _cleanup_free_ char *root = xasprintf("%s/tracefs", test_tmpdir());
        _cleanup_free_ char *inst = xasprintf("%s/sys/kernel/tracing/instances/" SCHED_TRACE_INSTANCE, root);
        _cleanup_free_ char *runtime = xasprintf("%s/run", root),
                            *jpath = xasprintf("%s/run/" SCHED_TRACE_JOURNAL, root);
        _cleanup_free_ char *err = NULL;
        Journal *j = NULL;
        struct stat st;

        CHECK(tracefs_journal_object(&setting_kind_tracefs_instance,
                                     "/sys/kernel/tracing/instances/" SCHED_TRACE_INSTANCE));
        CHECK(tracefs_journal_object(&setting_kind_tracefs_instance,
                                     "/sys/kernel/debug/tracing/instances/" SCHED_TRACE_INSTANCE));
        CHECK(
            !tracefs_journal_object(&setting_kind_tracefs_instance, "/sys/kernel/tracing/instances/other"));
        CHECK(!tracefs_journal_object(&setting_kind_tracefs_instance, "/sys/kernel/tracing"));
        CHECK(tracefs_journal_object(&setting_kind_tracefs_mount, TRACEFS_MOUNT));
        CHECK(!tracefs_journal_object(&setting_kind_tracefs_mount, "/mnt"));
        CHECK(setting_kind_from_name("tracefs-instance") == &setting_kind_tracefs_instance);

        /* A killed daemon's instance: the journal names it, the restore removes it. */
        test_write(root, "sys/kernel/tracing/instances/.keep", "");
        CHECK_INTEQ(mkdir(inst, 0700), 0);
        test_write(root, "run/.keep", "");
        sysroot_set(root);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        journal_remember(j, &setting_kind_tracefs_instance, "rtctld",
                         "/sys/kernel/tracing/instances/" SCHED_TRACE_INSTANCE, "absent");
        CHECK_INTEQ(journal_save(j), 0);
        journal_free(j);
        CHECK_INTEQ(sched_trace_restore_dir(runtime, &err), 0);
        CHECK(stat(inst, &st) < 0 && errno == ENOENT);
        CHECK(stat(jpath, &st) < 0 && errno == ENOENT); /* nothing left in it: no file */
        /* Nothing journalled: nothing to do. */
        CHECK_INTEQ(sched_trace_restore_dir(runtime, &err), 0);

        /* A planted entry that would mount, or remove another instance, is damage, never replayed. */
        test_write(
            root, "run/" SCHED_TRACE_JOURNAL,
            "{\"version\":1,\"entries\":[{\"kind\":\"tracefs-mount\",\"object\":\"/sys/kernel/tracing\","
            "\"original\":\"mounted\",\"tuner\":\"rtctld\"}]}");
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        if (j) {
                CHECK_INTEQ(journal_size(j), 0);
                journal_free(j);
        }
        /* The top level's record-cmd, off while the instance was made (a kill in between): back on. Off
         * as the original is nothing rtctld ever journals: not replayed. */
        CHECK_INTEQ(restore_record_cmd(root, runtime, "1"), 0);
        CHECK_INTEQ(restore_record_cmd(root, runtime, "0"), -EBADMSG);

        /* Another kind's entry, valid in the pass's journal, is no business of this one: dropped. */
        test_write(root, "proc/sys/kernel/sched_rt_runtime_us", "950000\n");
        test_write(root, "run/" SCHED_TRACE_JOURNAL,
                   "{\"version\":1,\"entries\":[{\"kind\":\"file\",\"object\":\"/proc/sys/kernel/"
                   "sched_rt_runtime_us\",\"original\":\"-1\",\"tuner\":\"sysctl\"}]}");
        free(err);
        err = NULL;
        CHECK_INTEQ(sched_trace_restore_dir(runtime, &err), -EBADMSG);
        {
                _cleanup_free_ char *v = NULL;
                CHECK_INTEQ(sys_read("/proc/sys/kernel/sched_rt_runtime_us", &v), 0);
                CHECK_STREQ(v, "950000");
        }
        sysroot_set("");
}

TEST_MAIN(T(threads_alternatives_parse), T(stat_policy_and_maps), T(realtime_rules_match_and_choose),
          T(trace_lines), T(tracefs_journal))
