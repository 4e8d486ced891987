/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "shared/cpuset.h"
#include "test.h"

static void roundtrip_list(const char *in, unsigned size, const char *out)
{
        _cleanup_cpuset_ CpuSet *s = NULL;
        _cleanup_free_ char *err = NULL, *f = NULL;

        CHECK_INTEQ(cpuset_parse_list(in, size, &s, &err), 0);
        if (!s)
                return;
        f = cpuset_format_list(s);
        CHECK_STREQ(f, out);
}

TEST(list_roundtrip)
{
        roundtrip_list("0", 2, "0");
        roundtrip_list("0-1", 2, "0-1");
        roundtrip_list("0-3,8,10-11", 16, "0-3,8,10-11");
        roundtrip_list("3,2,1,0", 4, "0-3");
        roundtrip_list("5-5", 8, "5");
        roundtrip_list("0,2,4,6", 8, "0,2,4,6");
        roundtrip_list("8191", 8192, "8191");
        roundtrip_list("0-8191", 8192, "0-8191");
        roundtrip_list("63-65", 128, "63-65");
}

static void bad_list(const char *in, unsigned size, int err, const char *needle)
{
        _cleanup_cpuset_ CpuSet *s = NULL;
        _cleanup_free_ char *msg = NULL;

        CHECK_INTEQ(cpuset_parse_list(in, size, &s, &msg), err);
        CHECK(s == NULL);
        CHECK_CONTAINS(msg, needle);
}

TEST(list_malformed)
{
        bad_list("3-1", 8, -EINVAL, "range 3-1 runs backwards");
        bad_list("a", 8, -EINVAL, "is not a list of CPU numbers");
        bad_list("1,,2", 8, -EINVAL, "has an empty item");
        bad_list("-1", 8, -EINVAL, "negative CPU numbers do not exist");
        bad_list("8", 8, -ERANGE, "names CPU 8, but this machine's CPUs are 0-7");
        /* Parsed before any machine is known (a profile): the limit is the kernel's, not a machine's. */
        bad_list("99999", CPUSET_MAX_CPUS, -ERANGE,
                 "names CPU 99999, but Linux numbers CPUs 0-8191 at most");
        bad_list("0-9", 8, -ERANGE, "names CPU 9");
        bad_list("", 8, -EINVAL, "is empty");
        bad_list("1,", 8, -EINVAL, "has an empty item");
        bad_list(",1", 8, -EINVAL, "has an empty item");
        bad_list("1-", 8, -EINVAL, "malformed range");
        bad_list("1-2-3", 8, -EINVAL, "is not a list of CPU numbers");
        bad_list("1 2", 8, -EINVAL, "is not a list of CPU numbers");
        bad_list("0x3", 8, -EINVAL, "is not a list of CPU numbers");
        bad_list("99999999999", 8, -EINVAL, "is not a list of CPU numbers");
}

static void roundtrip_mask(const char *in, unsigned size, const char *list, const char *out)
{
        _cleanup_cpuset_ CpuSet *s = NULL;
        _cleanup_free_ char *err = NULL, *l = NULL, *m = NULL;

        CHECK_INTEQ(cpuset_parse_mask(in, size, &s, &err), 0);
        if (!s)
                return;
        l = cpuset_format_list(s);
        CHECK_STREQ(l, list);
        m = cpuset_format_mask(s);
        CHECK_STREQ(m, out);
}

TEST(mask_roundtrip)
{
        /* As /proc/irq/N/smp_affinity shows them for nr_cpu_ids of 2, 40, 64 and 128. */
        roundtrip_mask("3", 2, "0-1", "3");
        roundtrip_mask("2", 2, "1", "2");
        roundtrip_mask("ff,ffffffff", 40, "0-39", "ff,ffffffff");
        roundtrip_mask("00,00000001", 40, "0", "00,00000001");
        roundtrip_mask("80000000,00000000", 64, "63", "80000000,00000000");
        roundtrip_mask("1", 64, "0", "00000000,00000001");
        roundtrip_mask("00000000,00000001,00000000,00000000", 128, "64",
                       "00000000,00000001,00000000,00000000");
        roundtrip_mask("f0f0\n", 16, "4-7,12-15", "f0f0");
}

TEST(mask_malformed)
{
        _cleanup_free_ char *e1 = NULL, *e2 = NULL, *e3 = NULL, *e4 = NULL, *e5 = NULL;
        CpuSet *s = NULL;

        CHECK_INTEQ(cpuset_parse_mask("", 8, &s, &e1), -EINVAL);
        CHECK_CONTAINS(e1, "empty");
        CHECK_INTEQ(cpuset_parse_mask("1,,2", 64, &s, &e2), -EINVAL);
        CHECK_CONTAINS(e2, "empty word");
        CHECK_INTEQ(cpuset_parse_mask("xyz", 8, &s, &e3), -EINVAL);
        CHECK_CONTAINS(e3, "not hexadecimal");
        CHECK_INTEQ(cpuset_parse_mask("4", 2, &s, &e4), -ERANGE);
        CHECK_CONTAINS(e4, "names CPU 2");
        CHECK_INTEQ(cpuset_parse_mask("123456789", 64, &s, &e5), -EINVAL);
        CHECK_CONTAINS(e5, "1-8 hex digits");
        CHECK(s == NULL);
}

TEST(set_operations)
{
        _cleanup_cpuset_ CpuSet *a = NULL, *b = NULL, *c = NULL;
        _cleanup_free_ char *f = NULL;

        CHECK_INTEQ(cpuset_parse_list("0-7", 8, &a, NULL), 0);
        CHECK_INTEQ(cpuset_parse_list("2,4", 200, &b, NULL), 0);
        CHECK(cpuset_subset(b, a));
        CHECK(!cpuset_subset(a, b));
        CHECK(cpuset_intersects(a, b));
        c = cpuset_dup(a);
        cpuset_andnot(c, b);
        f = cpuset_format_list(c);
        CHECK_STREQ(f, "0-1,3,5-7");
        CHECK_INTEQ(cpuset_count(c), 6);
        cpuset_or(c, b);
        CHECK(cpuset_equal(c, a));
        CHECK_INTEQ(cpuset_next(b, -1), 2);
        CHECK_INTEQ(cpuset_next(b, 2), 4);
        CHECK_INTEQ(cpuset_next(b, 4), -1);
        cpuset_add(b, 199);
        CHECK_INTEQ(cpuset_next(b, 4), 199);
        CHECK(!cpuset_equal(a, b));
        cpuset_and(c, b);
        CHECK_INTEQ(cpuset_count(c), 2);
        CHECK(!cpuset_empty(c));
        cpuset_andnot(c, b);
        CHECK(cpuset_empty(c));
}

TEST_MAIN(T(list_roundtrip), T(list_malformed), T(mask_roundtrip), T(mask_malformed), T(set_operations))
