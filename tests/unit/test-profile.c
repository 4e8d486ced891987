/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Profile loading: lookup rules, Include=, drop-ins, and errors that name file:line:key. */
#include "core/policy.h"
#include "test.h"

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
        Policy *p = NULL;
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;

        test_write(d, "profiles/a.conf", "[Profile]\nInclude=b\n");
        test_write(d, "profiles/b.conf", "[Profile]\nDescription=b\nInclude=c\n");
        test_write(d, "profiles/c.conf", "[Profile]\nInclude=a\n");
        test_write(d, "profiles/m.conf", "[Profile]\n\nInclude=nothere\n");
        CHECK_INTEQ(policy_load(path, "a", &p, &e1), -EINVAL);
        CHECK_CONTAINS(e1, "c.conf:2: Include=a: include cycle: a -> b -> c -> a");
        CHECK_INTEQ(policy_load(path, "m", &p, &e2), -EINVAL);
        CHECK_CONTAINS(e2, "m.conf:3: Include=nothere: no profile named 'nothere'");
        CHECK_INTEQ(policy_load(path, "zzz", &p, &e3), -ENOENT);
        CHECK_CONTAINS(e3, "no profile named 'zzz'");
        CHECK(p == NULL);
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

TEST(syntax_errors_have_lines)
{
        _cleanup_free_ char *d = dir("syntax");
        char *path[] = {d, NULL};
        Policy *p = NULL;
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;

        test_write(d, "profiles/s1.conf", "[Profile]\nDescription=x\nthis is not a key\n");
        test_write(d, "profiles/s2.conf", "[Profile\nDescription=x\n");
        test_write(d, "profiles/s3.conf", "Description=x\n");
        CHECK_INTEQ(policy_load(path, "s1", &p, &e1), -EINVAL);
        CHECK_CONTAINS(e1, "s1.conf:3: expected Key=Value, found 'this is not a key'");
        CHECK_INTEQ(policy_load(path, "s2", &p, &e2), -EINVAL);
        CHECK_CONTAINS(e2, "s2.conf:1: malformed section header");
        CHECK_INTEQ(policy_load(path, "s3", &p, &e3), -EINVAL);
        CHECK_CONTAINS(e3, "s3.conf:1: key outside of any [section]");
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
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL;

        CHECK_INTEQ(cpu_spec_parse("all", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_ALL);
        CHECK_INTEQ(cpu_spec_parse("housekeeping", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_HOUSEKEEPING);
        CHECK_INTEQ(cpu_spec_parse("isolated", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_ISOLATED);
        CHECK_INTEQ(cpu_spec_parse("auto:3", &s, NULL), 0);
        CHECK_INTEQ(s.kind, CPU_SPEC_AUTO);
        CHECK_INTEQ(s.auto_cores, 3);
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

TEST_MAIN(T(include_chain_overrides), T(include_cycle_and_missing), T(errors_name_file_line_key),
          T(syntax_errors_have_lines), T(admin_file_replaces_shipped_and_dropins_extend), T(profile_names),
          T(cpu_set_words), T(shipped_profiles_load))
