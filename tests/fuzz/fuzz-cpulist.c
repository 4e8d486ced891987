/* SPDX-License-Identifier: GPL-2.0-or-later */
/* CPU lists ("0-3,8") and hex masks ("ff,00000001") as sysfs, cgroupfs and profiles give them. The first
 * two bytes choose the set's size (the machine's possible CPUs). */
#include "fuzz.h"
#include "shared/cpuset.h"

static void check_round_trip(const CpuSet *s, unsigned size)
{
        _cleanup_free_ char *list = cpuset_format_list(s), *mask = cpuset_format_mask(s);
        _cleanup_cpuset_ CpuSet *a = NULL, *b = NULL;

        /* The empty set has no list spelling (cpuset.h): "" is refused. */
        fuzz_check(cpuset_parse_list(list, size, &a, NULL) == (cpuset_empty(s) ? -EINVAL : 0));
        fuzz_check(!a || cpuset_equal(a, s));
        fuzz_check(cpuset_parse_mask(mask, size, &b, NULL) == 0);
        fuzz_check(cpuset_equal(b, s));
        fuzz_check(cpuset_count(s) <= size);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_cpuset_ CpuSet *list = NULL, *mask = NULL;
        unsigned n;

        if (size < 2)
                return 0;
        n = 1 + (unsigned)(data[0] | data[1] << 8) % CPUSET_MAX_CPUS;
        text = fuzz_string(data + 2, size - 2);
        for (int i = 0; i < 2; i++) {
                _cleanup_free_ char *err = NULL;
                CpuSet **s = i == 0 ? &list : &mask;
                int r = i == 0 ? cpuset_parse_list(text, n, s, &err) : cpuset_parse_mask(text, n, s, &err);

                if (r < 0) {
                        fuzz_check(r == -EINVAL || r == -ERANGE);
                        fuzz_check(err && *err); /* a sentence saying what was wrong */
                } else
                        check_round_trip(*s, n);
        }
        return 0;
}
