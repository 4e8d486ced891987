/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [Attach] rules: parsing (errors name file:line:key), matching a process, choosing its threads. The
 * processes are a small /proc tree under a root prefix. */
#include <glib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/attach.h"
#include "core/policy.h"
#include "core/setting.h"
#include "core/tasks.h"
#include "shared/sysfs.h"
#include "test.h"

static const char *ISOLATE = "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n";

static int load(const char *name, const char *text, Policy **ret, char **err)
{
        _cleanup_free_ char *d = xasprintf("%s/%s", test_tmpdir(), name);
        _cleanup_free_ char *rel = xasprintf("profiles/%s.conf", name);
        char *path[] = {d, NULL};

        test_write(d, rel, text);
        *err = NULL;
        return policy_load(path, name, ret, err);
}

static Policy *load_ok(const char *name, const char *rules)
{
        _cleanup_free_ char *text = xasprintf("%s%s", ISOLATE, rules), *err = NULL;
        Policy *p = NULL;

        CHECK_INTEQ(load(name, text, &p, &err), 0);
        CHECK_STREQ(err, NULL);
        return p;
}

TEST(parse_terms_and_threads)
{
        _cleanup_policy_ Policy *p =
            load_ok("ok", "[Attach pw]\nMatch=comm:pipewire exe:/usr/bin/pipewire|/opt/* user:active\n"
                          "Threads=data-loop*\n"
                          "[Attach jack]\nMatch=comm:jackd|jackdbus user:0|active\n"
                          "Threads=all\n");

        if (!p || !p->attach)
                return;
        CHECK_INTEQ(p->attach->n, 2);
        CHECK_STREQ(p->attach->rules[0].name, "pw");
        CHECK_INTEQ(strv_length(p->attach->rules[0].thread_globs), 1);
        CHECK_STREQ(p->attach->rules[0].thread_globs[0], "data-loop*");
        CHECK(!p->attach->rules[0].realtime && !p->attach->rules[0].all);
        CHECK_INTEQ(p->attach->rules[0].n_terms, 3);
        CHECK_INTEQ(strv_length(p->attach->rules[0].terms[1].globs), 2);
        CHECK(p->attach->rules[1].all);
        CHECK_INTEQ(p->attach->rules[1].terms[1].kind, ATTACH_USER);
        CHECK_INTEQ(p->attach->rules[1].terms[1].n_uids, 1);
        CHECK(p->attach->rules[1].terms[1].active);
        CHECK(p->attach->uses_active);
}

TEST(no_rules_no_config)
{
        _cleanup_policy_ Policy *p = load_ok("none", "");

        CHECK(p && p->attach == NULL);
}

TEST(errors_name_file_line_key)
{
        Policy *p = NULL;
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL;

        CHECK_INTEQ(load("bad1",
                         "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n"
                         "[Attach a]\nMatch=name:x\nThreads=all\n"                      /* 5-7 */
                         "[Attach b]\nMatch=comm:a-very-long-process-name\nThreads=x\n" /* 8-10 */
                         "[Attach c]\nMatch=user:no-such-user-here exe:relative\nThreads=all\n"
                         "[Attach d]\nThreads=all\nColour=red\n"
                         "[Attach e]\nMatch=comm:x\n",
                         &p, &e1),
                    -EINVAL);
        CHECK_CONTAINS(e1, "bad1.conf:6: Match=name:x: unknown condition 'name'");
        CHECK_CONTAINS(e1, "bad1.conf:9: Match=comm:a-very-long-process-name: comm:a-very-long-process-name "
                           "can never match: the kernel keeps 15 characters");
        CHECK_CONTAINS(e1, "bad1.conf:12: Match=user:no-such-user-here exe:relative: no user named "
                           "'no-such-user-here'");
        CHECK_CONTAINS(e1, "exe:relative is not an absolute path");
        CHECK_CONTAINS(e1, "bad1.conf:14: [Attach d]: Match= is missing");
        CHECK_CONTAINS(e1, "bad1.conf:16: Colour=red: unknown key in [Attach d]");
        CHECK_CONTAINS(e1, "bad1.conf:17: [Attach e]: Threads= is missing");
        CHECK(p == NULL);

        /* Rules need isolated CPUs to attach to. */
        CHECK_INTEQ(load("bad2", "[Profile]\nDescription=t\n[Attach x]\nMatch=comm:x user:0\nThreads=all\n",
                         &p, &e2),
                    -EINVAL);
        CHECK_CONTAINS(e2, "bad2.conf:3: [Attach x]: attach rules need isolated CPUs");

        CHECK_INTEQ(
            load("bad3",
                 "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[Attach]\nMatch=comm:x user:0\nThreads=all\n",
                 &p, &e3),
            -EINVAL);
        CHECK_CONTAINS(e3, "bad3.conf:5: [Attach]: a rule needs a name");

        CHECK_INTEQ(
            load("bad4",
                 "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[Attach x]\nMatch=comm:x|\nThreads=all\n", &p,
                 &e4),
            -EINVAL);
        CHECK_CONTAINS(e4, "bad4.conf:6: Match=comm:x|: 'comm:x|' has an empty alternative");
}

/* A process's name and executable are its owner's to choose: a rule without user: would let any local
 * user onto the isolated CPUs by naming a process jackd, so the profile is refused where the rule is. */
TEST(rules_must_name_users)
{
        _cleanup_free_ char *e = NULL;
        Policy *p = NULL;

        CHECK_INTEQ(load("nouser",
                         "[Profile]\nDescription=t\n[CPU]\nIsolate=1\n[Attach jackd]\nMatch=comm:jackd "
                         "exe:/usr/bin/jackd\nThreads=all\n",
                         &p, &e),
                    -EINVAL);
        CHECK_CONTAINS(e,
                       "nouser.conf:6: Match=comm:jackd exe:/usr/bin/jackd: a rule must say whose processes "
                       "it attaches: add user:active");
        CHECK(p == NULL);
}

/* The shipped rules let in only the active session's user. */
TEST(shipped_rules_name_users)
{
        char *path[] = {getenv("RTCTL_CONF_D"), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        CHECK(path[0] != NULL);
        if (!path[0])
                return;
        CHECK_INTEQ(policy_load(path, "audio", &p, &err), 0);
        CHECK_STREQ(err, NULL);
        for (size_t i = 0; p && p->attach && i < p->attach->n; i++) {
                bool active = false;
                for (size_t t = 0; t < p->attach->rules[i].n_terms; t++)
                        active |= p->attach->rules[i].terms[t].active;
                CHECK(active);
        }
        CHECK(p && p->attach && p->attach->n >= 2);
}

/* uid for fake_process(): real UID u running a set-user-ID-root program (effective and saved UID 0). */
#define SETUID_ROOT(u) ((u) + 100000)

/* A process under the root prefix: comm, exe (a dangling link is enough for readlink), its UIDs (real,
 * effective, saved, filesystem: all uid, or SETUID_ROOT), and threads as "tid:name". */
static void fake_process(const char *root, unsigned pid, const char *comm, const char *exe, unsigned uid,
                         const char *const *threads)
{
        _cleanup_free_ char *c = xasprintf("proc/%u/comm", pid), *st = xasprintf("proc/%u/status", pid);
        _cleanup_free_ char *link = xasprintf("%s/proc/%u/exe", root, pid);
        _cleanup_free_ char *status =
            uid >= SETUID_ROOT(0)
                ? xasprintf("Name:\t%s\nUmask:\t0022\nUid:\t%u\t0\t0\t0\n", comm, uid - SETUID_ROOT(0))
                : xasprintf("Name:\t%s\nUmask:\t0022\nUid:\t%u\t%u\t%u\t%u\n", comm, uid, uid, uid, uid);

        test_write(root, c, comm);
        test_write(root, st, status);
        if (exe)
                CHECK(symlink(exe, link) == 0);
        for (const char *const *t = threads; t && *t; t++) {
                const char *colon = strchr(*t, ':');
                _cleanup_free_ char *tid = xstrndup(*t, (size_t)(colon - *t));
                _cleanup_free_ char *rel = xasprintf("proc/%u/task/%s/comm", pid, tid);
                test_write(root, rel, colon + 1);
        }
}

static int match(const AttachRules *r, unsigned pid, const char *comm, const uid_t *active, size_t n_active)
{
        AttachProc p;
        int i;

        attach_proc_init(&p, pid, comm);
        i = attach_rules_match(r, &p, active, n_active);
        attach_proc_clear(&p);
        return i;
}

/* [Hold] rules: Match= as [Attach] has it, a user term required alike, Profile= instead of Threads=;
 * the shipped examples (commented out in desktop.conf) load when uncommented. */
TEST(hold_rules)
{
        _cleanup_free_ char *e = NULL, *root = NULL;
        _cleanup_policy_ Policy *p = NULL;
        Policy *bad = NULL;
        uid_t active[] = {1000};

        CHECK_INTEQ(
            load("hold",
                 "[Profile]\nDescription=t\n[Hold daw]\nMatch=exe:/usr/lib/ardour[0-9]*/ardour-[0-9]* "
                 "user:active\nProfile=audio\n",
                 &p, &e),
            0);
        CHECK_STREQ(e, NULL);
        CHECK(p && p->holds && p->holds->n == 1 && !p->attach);
        CHECK_STREQ(p && p->holds ? p->holds->rules[0].name : NULL, "daw");
        CHECK_STREQ(p && p->holds ? p->holds->rules[0].profile : NULL, "audio");
        CHECK(p && p->holds && p->holds->uses_active);
        /* Debian's Ardour 7 and 8 match; the scanners beside them and another user's Ardour do not. */
        root = xasprintf("%s/hold-root", test_tmpdir());
        fake_process(root, 410, "ardour-7.3.0~ds", "/usr/lib/ardour7/ardour-7.3.0~ds0", 1000, NULL);
        fake_process(root, 411, "ardour-8.12.0~d", "/usr/lib/ardour8/ardour-8.12.0~ds", 1000, NULL);
        fake_process(root, 412, "ardour-vst-scan", "/usr/lib/ardour8/ardour-vst-scanner", 1000, NULL);
        fake_process(root, 413, "ardour-8.12.0~d", "/usr/lib/ardour8/ardour-8.12.0~ds", 1001, NULL);
        sysroot_set(root);
        CHECK_INTEQ(match(p->holds, 410, NULL, active, 1), 0);
        CHECK_INTEQ(match(p->holds, 411, NULL, active, 1), 0);
        CHECK_INTEQ(match(p->holds, 412, NULL, active, 1), -1);
        CHECK_INTEQ(match(p->holds, 413, NULL, active, 1), -1);
        sysroot_set(NULL);

        CHECK_INTEQ(
            load(
                "holdbad",
                "[Profile]\nDescription=t\n[Hold daw]\nMatch=exe:/usr/bin/daw\n[Hold x]\nMatch=user:active\n"
                "[Hold y]\nMatch=comm:y user:active\nProfile=no/such\n[Hold]\nMatch=comm:z user:0\n"
                "Profile=audio\n[Hold t]\nMatch=comm:t user:0\nProfile=audio\nThreads=all\n"
                "[Hold g]\nMatch=graph:jack user:0\nProfile=audio\n",
                &bad, &e),
            -EINVAL);
        CHECK(bad == NULL);
        CHECK_CONTAINS(e, "holdbad.conf:4: Match=exe:/usr/bin/daw: a rule must say whose processes hold its "
                          "profile: add user:active");
        CHECK_CONTAINS(e, "holdbad.conf:5: [Hold x]: Profile= is missing");
        CHECK_CONTAINS(e, "Profile=no/such: no/such is not a profile name");
        CHECK_CONTAINS(e, "a rule needs a name: [Hold NAME]");
        CHECK_CONTAINS(e, "graph:jack: a [Hold] rule cannot match graph:");
        CHECK_CONTAINS(e, "Threads=");
}

/* The examples desktop.conf ships commented out load when uncommented, and each names the active user. */
TEST(shipped_hold_examples)
{
        _cleanup_free_ char *path = xasprintf("%s/profiles/desktop.conf", getenv("RTCTL_CONF_D")),
                            *text = NULL, *e = NULL;
        _cleanup_strv_free_ char **lines = NULL;
        _cleanup_policy_ Policy *p = NULL;
        GString *out = g_string_new("[Profile]\nDescription=t\n");
        bool in_hold = false;

        CHECK_INTEQ(read_full_file(path, &text, NULL), 0);
        lines = strv_split(strempty(text), "\n");
        for (char **l = lines; l && *l; l++) {
                if (startswith(*l, "#[Hold "))
                        in_hold = true;
                else if (!startswith(*l, "#Match=") && !startswith(*l, "#Profile="))
                        in_hold = false;
                if (in_hold)
                        g_string_append_printf(out, "%s\n", *l + 1);
        }
        CHECK_INTEQ(load("examples", out->str, &p, &e), 0);
        CHECK_STREQ(e, NULL);
        CHECK(p && p->holds && p->holds->n == 4);
        for (size_t i = 0; p && p->holds && i < p->holds->n; i++) {
                CHECK(p->holds->uses_active);
                CHECK_STREQ(p->holds->rules[i].profile, "audio");
        }
        g_string_free(out, true);
}

TEST(matching_is_and_of_terms_or_of_alternatives)
{
        _cleanup_free_ char *root = xasprintf("%s/procs", test_tmpdir());
        _cleanup_policy_ Policy *p =
            load_ok("m", "[Attach mine]\nMatch=comm:pipewire user:1000\nThreads=all\n"
                         "[Attach seat]\nMatch=comm:ardour*|bitwig* user:active\nThreads=all\n"
                         "[Attach path]\nMatch=exe:/usr/bin/jackd|/opt/jack/* user:0\nThreads=all\n");
        uid_t active[] = {1001};

        if (!p)
                return;
        fake_process(root, 100, "pipewire", "/usr/bin/pipewire", 1000, NULL);
        fake_process(root, 101, "pipewire", "/usr/bin/pipewire", 1001, NULL);
        fake_process(root, 102, "ardour-8.4", "/opt/ardour/bin/ardour", 1001, NULL);
        fake_process(root, 103, "ardour-8.4", "/opt/ardour/bin/ardour", 1000, NULL);
        fake_process(root, 104, "jackd", "/opt/jack/bin/jackd", 0, NULL);
        fake_process(root, 105, "jackd", "/usr/local/bin/jackd", 0, NULL);
        fake_process(root, 106, "ardour-8.4", "/home/u/ardour", SETUID_ROOT(1001), NULL);
        sysroot_set(root);

        CHECK_INTEQ(match(p->attach, 100, NULL, active, 1), 0);
        CHECK_INTEQ(match(p->attach, 101, NULL, active, 1), -1); /* pipewire, but another user */
        CHECK_INTEQ(match(p->attach, 102, NULL, active, 1), 1);  /* the active user */
        CHECK_INTEQ(match(p->attach, 103, NULL, active, 1), -1); /* not the active user */
        CHECK_INTEQ(match(p->attach, 103, NULL, NULL, 0), -1);   /* no logind: nobody is active */
        /* The active user's real UID, but set-user-ID root (su linked under a matching name): not theirs. */
        CHECK_INTEQ(match(p->attach, 106, NULL, active, 1), -1);
        CHECK_INTEQ(match(p->attach, 104, NULL, active, 1), 2);
        CHECK_INTEQ(match(p->attach, 105, NULL, active, 1), -1);
        /* The name an event brings counts, not the one /proc still shows. */
        CHECK_INTEQ(match(p->attach, 103, "bitwig-studio", (uid_t[]){1000}, 1), 1);
        CHECK_INTEQ(match(p->attach, 100, "pipewire-pulse", active, 1), -1);
        /* A process that went (or a kernel thread: no exe, no status) matches nothing. */
        CHECK_INTEQ(match(p->attach, 999, "pipewire", active, 1), -1);
        sysroot_set("");
}

TEST(first_rule_wins_and_includes_come_after)
{
        _cleanup_free_ char *d = xasprintf("%s/inc", test_tmpdir()), *err = NULL;
        _cleanup_policy_ Policy *p = NULL;
        char *path[] = {d, NULL};

        test_write(
            d, "profiles/base.conf",
            "[Profile]\nDescription=b\n[CPU]\nIsolate=1\n[Attach any]\nMatch=comm:* user:0\nThreads=all\n");
        test_write(d, "profiles/top.conf",
                   "[Profile]\nInclude=base\n[Attach mine]\nMatch=comm:pw user:0\nThreads=loop*\n");
        CHECK_INTEQ(policy_load(path, "top", &p, &err), 0);
        CHECK_STREQ(err, NULL);
        if (!p)
                return;
        CHECK_INTEQ(match(p->attach, 1, "pw", NULL, 0), 0);
        CHECK_INTEQ(match(p->attach, 1, "other", NULL, 0), 1);
}

TEST(threads_by_name)
{
        _cleanup_free_ char *root = xasprintf("%s/threads", test_tmpdir());
        _cleanup_policy_ Policy *p =
            load_ok("t", "[Attach pw]\nMatch=comm:pipewire user:0\nThreads=data-loop*\n"
                         "[Attach all]\nMatch=comm:jackd user:active\nThreads=all\n");
        AttachedThread *t = NULL;
        size_t n = 0, allocated = 0;

        if (!p)
                return;
        /* Root's rule: a name alone sends a thread (in another user's, see test-attach-realtime.c). */
        fake_process(root, 200, "pipewire", NULL, 0,
                     (const char *const[]){"200:pipewire", "201:pipewire", "202:data-loop.0", NULL});
        sysroot_set(root);
        CHECK_INTEQ(attach_list_threads(&p->attach->rules[0], 200, &t, &n, &allocated), 0);
        CHECK_INTEQ(n, 3);
        for (size_t i = 0; i < n; i++) {
                CHECK_STREQ(t[i].rule, "pw");
                CHECK_INTEQ(t[i].isolate, t[i].tid == 202);
                CHECK_INTEQ(t[i].why, t[i].tid == 202 ? ATTACH_WHY_NAME : 0);
                if (t[i].tid == 202)
                        CHECK_STREQ(t[i].comm, "data-loop.0");
        }
        CHECK_INTEQ(attach_rule_wants_thread(&p->attach->rules[1], "anything", 0), ATTACH_WHY_ALL);
        CHECK_INTEQ(attach_list_threads(&p->attach->rules[0], 999, &t, &n, &allocated), -ENOENT);
        free(t);
        sysroot_set("");
}

/* The thread kind's values: "CPUSET CPULIST"; a desired value without CPUs leaves them to the cpuset, and
 * CPUs compare over the online ones only. */
TEST(thread_values)
{
        _cleanup_free_ char *root = xasprintf("%s/online", test_tmpdir());
        const SettingKind *k = setting_kind_from_name("thread");

        CHECK(k == &setting_kind_thread);
        test_write(root, "sys/devices/system/cpu/online", "0-3\n");
        sysroot_set(root);
        CHECK(k->equal("/rtctl-isolated 3", "/rtctl-isolated"));
        CHECK(!k->equal("/rtctl-housekeeping 0-2", "/rtctl-isolated"));
        CHECK(k->equal("/ 0-3", "/ 0-3"));
        CHECK(!k->equal("/ 0", "/ 0-3"));
        CHECK(k->equal("/ 0-7", "/ 0-3")); /* 4-7 are not online */
        CHECK(!k->equal("/rtctl-housekeeping 0-3", "/ 0-3"));
        sysroot_set("");
}

/* An attached client killed before systemd's scope job ran: a zombie until its parent reaps it, which
 * signal 0 still finds. The real /proc, with a child of the test's own. */
TEST(exited_includes_zombies)
{
        int fds[2];
        pid_t pid;
        char c;

        sysroot_set("");
        CHECK(!task_exited((unsigned)getpid()));
        CHECK_INTEQ(pipe(fds), 0);
        pid = fork();
        if (pid == 0) {
                close(fds[0]);
                _exit(0); /* closing the pipe's end tells the parent */
        }
        CHECK(pid > 0);
        close(fds[1]);
        CHECK_INTEQ(read(fds[0], &c, 1), 0);
        close(fds[0]);
        /* The write end closes in do_exit before the task is a zombie: wait for the zombie itself. */
        for (int i = 0; i < 1000 && kill(pid, 0) == 0 && !task_exited((unsigned)pid); i++)
                usleep(1000);
        CHECK_INTEQ(kill(pid, 0), 0); /* not reaped: still there for signal 0 */
        CHECK(task_exited((unsigned)pid));
        CHECK_INTEQ(waitpid(pid, NULL, 0), pid);
        CHECK(task_exited((unsigned)pid));
}

TEST_MAIN(T(parse_terms_and_threads), T(rules_must_name_users), T(shipped_rules_name_users), T(hold_rules),
          T(shipped_hold_examples), T(thread_values), T(exited_includes_zombies), T(no_rules_no_config),
          T(errors_name_file_line_key), T(matching_is_and_of_terms_or_of_alternatives),
          T(first_rule_wins_and_includes_come_after), T(threads_by_name))
