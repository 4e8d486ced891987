/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Profile loading: lookup rules, Include=, drop-ins, and errors that name file:line:key. */
#include <sys/stat.h>
#include <unistd.h>

#include "core/config.h"
#include "core/policy.h"
#include "test.h"

/* Loading name from path fails with rc, the error holding text; a macro, for the caller's line. */
#define CHECK_LOAD_FAILS(path, name, rc, text)                                                              \
        do {                                                                                                \
                _cleanup_free_ char *e_ = NULL;                                                             \
                Policy *p_ = NULL;                                                                          \
                CHECK_INTEQ(policy_load(path, name, &p_, &e_), rc);                                         \
                CHECK_CONTAINS(e_, text);                                                                   \
                CHECK(p_ == NULL);                                                                          \
        } while (0)

static char *dir(const char *name)
{
        return xasprintf("%s/%s", test_tmpdir(), name);
}

/* The block tuner's config is private; the plan on a one-disk tree shows which rule won. */
static int load(char *const *path, const char *name, Policy **ret, char **err)
{
        *err = NULL;
        return policy_load(path, name, ret, err);
}

TEST(include_chain_overrides)
{
        _cleanup_free_ char *d = dir("inc");
        char *path[] = {d, NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(d, "profiles/base.conf",
                   "[Profile]\nDescription=base\n[CPU]\nIsolate=1\n[Sysctl]\nkernel.a=1\nkernel.b=1\n");
        test_write(d, "profiles/mid.conf",
                   "[Profile]\nInclude=base\nDescription=mid\n[Sysctl]\nkernel.b=2\n");
        test_write(d, "profiles/top.conf", "[Profile]\nInclude=mid\n[CPU]\nIsolate=auto:2\n");
        CHECK_INTEQ(load(path, "top", &p, &err), 0);
        CHECK_STREQ(err, NULL);
        if (!p)
                return;
        CHECK_STREQ(p->name, "top");
        /* Description is inherited when not overridden. */
        CHECK_STREQ(p->description, "mid");
        CHECK_INTEQ(p->isolate.kind, CPU_SPEC_AUTO);
        CHECK_INTEQ(p->isolate.auto_cores, 2);
}

TEST(include_cycle_and_missing)
{
        _cleanup_free_ char *d = dir("cycle");
        char *path[] = {d, NULL};

        test_write(d, "profiles/a.conf", "[Profile]\nInclude=b\n");
        test_write(d, "profiles/b.conf", "[Profile]\nDescription=b\nInclude=c\n");
        test_write(d, "profiles/c.conf", "[Profile]\nInclude=a\n");
        test_write(d, "profiles/m.conf", "[Profile]\n\nInclude=nothere\n");
        CHECK_LOAD_FAILS(path, "a", -EINVAL, "c.conf:2: Include=a: include cycle: a -> b -> c -> a");
        CHECK_LOAD_FAILS(path, "m", -EINVAL, "m.conf:3: Include=nothere: no profile named 'nothere'");
        CHECK_LOAD_FAILS(path, "zzz", -ENOENT, "no profile named 'zzz'");
}

TEST(errors_name_file_line_key)
{
        _cleanup_free_ char *d = dir("errors");
        char *path[] = {d, NULL};
        Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(d, "profiles/bad.conf",
                   "# comment\n"
                   "[Profile]\n"
                   "Description=bad\n"
                   "Colour=blue\n"
                   "[CPU]\n"
                   "Isolate=1,,2\n"
                   "[Block x]\n"
                   "Match=transport:floppy\n"
                   "Scheduler=cfq\n"
                   "NrRequests=-5\n"
                   "Tunables=low_latency\n"
                   "[Block]\n"
                   "[Nonsense]\n"
                   "[Sysctl]\n"
                   "../../etc/x=1\n");
        CHECK_INTEQ(policy_load(path, "bad", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "bad.conf:4: Colour=blue: unknown key in [Profile]");
        CHECK_CONTAINS(err, "bad.conf:6: Isolate=1,,2: CPU list '1,,2' has an empty item");
        CHECK_CONTAINS(err, "bad.conf:8: Match=transport:floppy: unknown transport 'floppy'");
        CHECK_CONTAINS(err, "bad.conf:9: Scheduler=cfq: unknown I/O scheduler 'cfq'");
        CHECK_CONTAINS(err, "bad.conf:10: NrRequests=-5: expected a whole number");
        CHECK_CONTAINS(err, "bad.conf:11: Tunables=low_latency: 'low_latency' is not name=value");
        CHECK_CONTAINS(err, "bad.conf:12: [Block]: a block rule needs a name");
        CHECK_CONTAINS(err, "bad.conf:13: [Nonsense]: unknown section");
        CHECK_CONTAINS(err, "bad.conf:15: ../../etc/x=1: not a sysctl name");
}

/* GKeyFile turns the escape \n in a value into a newline: the message still takes one line, with the
 * escape shown as written (found by tests/fuzz/fuzz-profile). */
TEST(error_for_escaped_newline_is_one_line)
{
        _cleanup_free_ char *d = dir("escapes");
        char *path[] = {d, NULL};
        Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        test_write(d, "profiles/esc.conf", "[Profile]\nDescription=e\n[Block x]\nMatch=tr\\nsport:nvme\n");
        CHECK_INTEQ(policy_load(path, "esc", &p, &err), -EINVAL);
        CHECK_CONTAINS(err, "esc.conf:4: Match=tr\\nsport:nvme: 'tr\\nsport:nvme' is not a condition");
        CHECK(err && !strchr(err, '\n'));
}

TEST(syntax_errors_have_lines)
{
        _cleanup_free_ char *d = dir("syntax");
        char *path[] = {d, NULL};

        test_write(d, "profiles/s1.conf", "[Profile]\nDescription=x\nthis is not a key\n");
        test_write(d, "profiles/s2.conf", "[Profile\nDescription=x\n");
        test_write(d, "profiles/s3.conf", "Description=x\n");
        CHECK_LOAD_FAILS(path, "s1", -EINVAL, "s1.conf:3: expected Key=Value, found 'this is not a key'");
        CHECK_LOAD_FAILS(path, "s2", -EINVAL, "s2.conf:1: malformed section header");
        CHECK_LOAD_FAILS(path, "s3", -EINVAL, "s3.conf:1: key outside of any [section]");
}

TEST(admin_file_replaces_shipped_and_dropins_extend)
{
        _cleanup_free_ char *etc = dir("etc"), *lib = dir("lib");
        char *path[] = {etc, lib, NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;
        ProfileInfo *l = NULL;
        size_t n = 0;

        test_write(lib, "profiles/x.conf", "[Profile]\nDescription=shipped\n[CPU]\nIsolate=7\n");
        test_write(etc, "profiles/x.conf", "[Profile]\nDescription=admin\n");
        test_write(lib, "profiles/y.conf", "[Profile]\nDescription=shipped y\n");
        /* Same drop-in name in both: /etc's wins. Applied in file name order across directories. */
        test_write(lib, "profiles/x.conf.d/10-a.conf", "[CPU]\nIsolate=3\n");
        test_write(etc, "profiles/x.conf.d/10-a.conf", "[CPU]\nIsolate=2\n");
        test_write(lib, "profiles/x.conf.d/20-b.conf", "[Profile]\nDescription=dropin\n");
        CHECK_INTEQ(policy_load(path, "x", &p, &err), 0);
        if (!p)
                return;
        CHECK_STREQ(p->description, "dropin");
        CHECK_INTEQ(p->isolate.kind, CPU_SPEC_LIST);
        _cleanup_free_ char *iso = cpu_spec_format(&p->isolate);
        CHECK_STREQ(iso, "2");

        CHECK_INTEQ(profiles_list(path, &l, &n), 0);
        CHECK_INTEQ(n, 2);
        if (n == 2) {
                CHECK_STREQ(l[0].name, "x");
                CHECK_STREQ(l[0].description, "dropin");
                CHECK_STREQ(l[1].name, "y");
        }
        profiles_free(l, n);
}

TEST(profile_names)
{
        CHECK(profile_name_valid("audio"));
        CHECK(profile_name_valid("my-audio_2.1"));
        CHECK(!profile_name_valid(""));
        CHECK(!profile_name_valid("../x"));
        CHECK(!profile_name_valid("a/b"));
        CHECK(!profile_name_valid(".hidden"));
        CHECK(!profile_name_valid("a b"));
}

TEST(cpu_set_words)
{
        CpuSpec s;
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL;

        CHECK_INTEQ(cpu_spec_parse("all", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_ALL);
        CHECK_INTEQ(cpu_spec_parse("housekeeping", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_HOUSEKEEPING);
        CHECK_INTEQ(cpu_spec_parse("isolated", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_ISOLATED);
        CHECK_INTEQ(cpu_spec_parse("auto:3", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_AUTO);
        CHECK_INTEQ(s.auto_cores, 3);
        CHECK_INTEQ(s.auto_prefer, CORE_PREFER_FAST);
        _cleanup_free_ char *a = cpu_spec_format(&s);
        CHECK_STREQ(a, "auto:3");
        CHECK_INTEQ(cpu_spec_parse("auto:2:cache", &s, NULL), 0);
        CHECK_INTEQ(s.auto_cores, 2);
        CHECK_INTEQ(s.auto_prefer, CORE_PREFER_CACHE);
        _cleanup_free_ char *ac = cpu_spec_format(&s);
        CHECK_STREQ(ac, "auto:2:cache");
        CHECK_INTEQ(cpu_spec_parse("auto:1:efficient", &s, NULL), 0);
        CHECK_INTEQ(s.auto_prefer, CORE_PREFER_EFFICIENT);
        CHECK_INTEQ(cpu_spec_parse("auto:1:fast", &s, NULL), 0);
        CHECK_INTEQ(s.auto_prefer, CORE_PREFER_FAST);
        CHECK_INTEQ(cpu_spec_parse("2-5,9", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_LIST);
        _cleanup_free_ char *f = cpu_spec_format(&s);
        CHECK_STREQ(f, "2-5,9");
        cpu_spec_clear(&s);
        CHECK_INTEQ(cpu_spec_parse("auto:0", &s, &e1), -EINVAL);
        CHECK_CONTAINS(e1, "1 or more");
        CHECK_INTEQ(cpu_spec_parse("some", &s, &e2), -EINVAL);
        CHECK_CONTAINS(e2, "is not a CPU set");
        CHECK_INTEQ(cpu_spec_parse("4-2", &s, &e3), -EINVAL);
        CHECK_CONTAINS(e3, "runs backwards");
        CHECK_INTEQ(cpu_spec_parse("auto:2:big", &s, &e4), -EINVAL);
        CHECK_STREQ(e4, "'auto:2:big': auto:N:PREFERENCE takes fast, efficient or cache");
        CHECK_INTEQ(cpu_spec_parse("auto::cache", &s, &e5), -EINVAL);
        CHECK_CONTAINS(e5, "1 or more");
}

TEST(shipped_profiles_load)
{
        char *path[] = {(char *)RTCTL_SOURCE_CONFDIR, NULL};
        ProfileInfo *l = NULL;
        size_t n = 0;

        CHECK_INTEQ(profiles_list(path, &l, &n), 0);
        CHECK(n >= 2);
        for (size_t i = 0; i < n; i++) {
                Policy *p = NULL;
                _cleanup_free_ char *err = NULL;
                CHECK_INTEQ(policy_load(path, l[i].name, &p, &err), 0);
                CHECK_STREQ(err, NULL);
                policy_free(p);
        }
        profiles_free(l, n);
}

/* fnmatch() takes a '[' without its ']' as a literal, so Match=name:[ matched nothing and said nothing. */
TEST(malformed_globs_are_errors)
{
        static const struct {
                const char *text, *want;
        } cases[] = {
            {"[IRQ snd]\nMatch=name:snd[\nThreadPolicy=fifo\nThreadPriority=80\n",
             "bad.conf:4: Match=name:snd[: 'snd[': the '[' at 4 has no closing ']'"},
            {"[Block x]\nMatch=name:loop[0-9\nScheduler=none\n",
             "bad.conf:4: Match=name:loop[0-9: 'loop[0-9': the '[' at 5 has no closing ']'"},
            {"[Attach a]\nMatch=comm:jack[d user:0\nThreads=all\n",
             "bad.conf:4: Match=comm:jack[d user:0: 'jack[d': the '[' at 5"},
            {"[Attach a]\nMatch=comm:jackd user:0\nThreads=data[\n",
             "bad.conf:5: Threads=data[: 'data[': the '['"},
        };

        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                _cleanup_free_ char *text = xasprintf("[Profile]\nDescription=t\n%s", cases[i].text);
                _cleanup_free_ char *err = test_profile_errors("bad", text);
                CHECK_CONTAINS(err, cases[i].want);
        }
        /* Well-formed ones load: a class, a range, a leading ']' in a bracket. */
        _cleanup_free_ char *ok = test_profile_errors(
            "good",
            "[Profile]\nDescription=t\n[IRQ snd]\nMatch=name:snd_hda[0-9]*|x[]]y|[!a]b\nThreadPolicy=fifo\n"
            "ThreadPriority=80\n");
        CHECK_STREQ(ok, "");
}

/* What a new user tried (issue 14): each is an error naming file and line (and the key where there is
 * one), never a profile that loads and does something else. */
TEST(hostile_and_careless_files)
{
        static const struct {
                const char *text, *want;
        } cases[] = {
            /* Everything after a NUL byte used to be ignored. */
            {"[Profile]\nDescription=t\n[Sysctl]\nvm.swappiness=10\0\nkernel.x=1\n",
             "bad.conf:4: a NUL byte: a configuration file is text"},
            /* Names that are not UTF-8 broke every D-Bus reply that carried them. */
            {"[Profile]\nDescription=t\n[Sysctl\xff]\n", "bad.conf:3: not valid UTF-8"},
            {"[Profile]\nDescription=t\n[Sysctl]\nvm.\xc3(=1\n", "bad.conf:4: not valid UTF-8"},
            /* An unknown escape was kept as written. */
            {"[Profile]\nDescription=t\n[Sysctl]\nkernel.timer_migration=\\q\n",
             "bad.conf:4: kernel.timer_migration=\\q: invalid escape '\\q'"},
            {"[Profile]\nDescription=t\n[Sysctl]\nkernel.timer_migration=1\\\n",
             "bad.conf:4: kernel.timer_migration=1\\: ends in a lone backslash"},
            {"[Profile]\nDescription=t\n[Block a]b]\nScheduler=none\n",
             "bad.conf:3: malformed section header '[Block a]b]'"},
            {"[Profile]\nDescription=t\nDescription[de]=y\n",
             "bad.conf:3: Description[de]=: localized keys (Key[locale]=) are not supported"},
            {"[Profile]\nDescription=t\n[Sysctl]\n=1\n", "bad.conf:4: '' is not a key name"},
        };

        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
                _cleanup_free_ char *d = dir("hostile");
                char *path[] = {d, NULL};
                _cleanup_free_ char *file = xasprintf("%s/profiles/bad.conf", d);
                /* Written with its length: the NUL case has one inside. */
                size_t len = strlen(cases[i].text);
                if (i == 0)
                        len += 1 + strlen(cases[i].text + len + 1);
                test_write(d, "profiles/bad.conf", "");
                FILE *f = fopen(file, "w");
                CHECK(f && fwrite(cases[i].text, 1, len, f) == len);
                fclose(f);
                CHECK_LOAD_FAILS(path, "bad", -EINVAL, cases[i].want);
        }
}

/* Only a regular file is read, and not without bound: a FIFO blocked the daemon for ever, a link to
 * /dev/zero read until memory ran out. */
TEST(only_regular_files_of_bounded_size)
{
        _cleanup_free_ char *d = dir("special");
        char *path[] = {d, NULL};
        _cleanup_free_ char *fifo = xasprintf("%s/profiles/fifo.conf", d),
                            *zero = xasprintf("%s/profiles/zero.conf", d);
        _cleanup_free_ char *big = xasprintf("%s/profiles/big.conf", d);
        _cleanup_free_ char *e3 = NULL;
        Policy *p = NULL;

        test_write(d, "profiles/placeholder.conf", "[Profile]\nDescription=t\n");
        CHECK_INTEQ(mkfifo(fifo, 0600), 0);
        CHECK_INTEQ(symlink("/dev/zero", zero), 0);
        CHECK_LOAD_FAILS(path, "fifo", -EINVAL,
                         "fifo.conf: not a regular file (a FIFO): only regular files are read");
        CHECK_LOAD_FAILS(path, "zero", -EINVAL, "zero.conf: not a regular file (a character device)");
        FILE *f = fopen(big, "w");
        CHECK(f != NULL);
        fputs("[Profile]\nDescription=t\n", f);
        for (int i = 0; i < 70000; i++)
                fprintf(f, "# a comment line to make the file larger than a profile may be\n");
        fclose(f);
        CHECK(policy_load(path, "big", &p, &e3) < 0);
        CHECK_CONTAINS(e3, "big.conf: ");
        CHECK_CONTAINS(e3, "bytes, more than the 1048576 a configuration file may have");
}

/* 80,000 keys load, each found by its name (a scan per key made this take 20 s; bench/ has the time). */
TEST(many_keys)
{
        _cleanup_free_ char *d = dir("many");
        _cleanup_free_ char *file = xasprintf("%s/profiles/many.conf", d), *err = NULL;
        Conf *c = NULL;

        test_write(d, "profiles/many.conf", "");
        FILE *f = fopen(file, "w");
        CHECK(f != NULL);
        fputs("[Profile]\nDescription=t\n[Sysctl]\n", f);
        for (int i = 0; i < 80000; i++)
                fprintf(f, "k%d=%d\n", i, i);
        fclose(f);
        CHECK_INTEQ(conf_parse_file(file, &c, &err), 0);
        ConfSection *s = conf_section(c, "Sysctl");
        CHECK(s && s->n_keys == 80000);
        ConfKey *k = conf_key(s, "k79999");
        CHECK(k && streq(k->value, "79999") && k->line == 80003);
        conf_free(c);

        /* The vector long lists are built with: every entry kept, in order, NULL-terminated. */
        _cleanup_strv_free_ char **v = NULL;
        size_t n = 0;
        for (int i = 0; i < 1000; i++)
                strv_append(&v, &n, xasprintf("%d", i));
        CHECK_INTEQ(n, 1000);
        CHECK_INTEQ(strv_length(v), 1000);
        CHECK_STREQ(v[0], "0");
        CHECK_STREQ(v[999], "999");
}

TEST_MAIN(T(include_chain_overrides), T(include_cycle_and_missing), T(errors_name_file_line_key),
          T(error_for_escaped_newline_is_one_line), T(syntax_errors_have_lines),
          T(admin_file_replaces_shipped_and_dropins_extend), T(profile_names), T(cpu_set_words),
          T(shipped_profiles_load), T(malformed_globs_are_errors), T(hostile_and_careless_files),
          T(only_regular_files_of_bounded_size), T(many_keys))
