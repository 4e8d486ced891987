/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A few macros for unit tests that speak TAP, which meson counts test by test. */
#pragma once

#include <stdio.h>
#include <string.h>

#include "shared/util.h"

extern int test_failures_;
extern int test_count_;
extern const char *test_current_;

#define CHECK(cond)                                                                                         \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        printf("# %s:%d: %s: check failed: %s\n", __FILE__, __LINE__, test_current_,        \
                               #cond);                                                                      \
                        test_failures_++;                                                                   \
                }                                                                                           \
        } while (0)

#define CHECK_STREQ(a, b)                                                                                   \
        do {                                                                                                \
                const char *a_ = (a), *b_ = (b);                                                            \
                if ((a_ || b_) && (!a_ || !b_ || strcmp(a_, b_) != 0)) {                                    \
                        printf("# %s:%d: %s: '%s' != '%s' (%s vs %s)\n", __FILE__, __LINE__, test_current_, \
                               a_ ?: "(null)", b_ ?: "(null)", #a, #b);                                     \
                        test_failures_++;                                                                   \
                }                                                                                           \
        } while (0)

#define CHECK_INTEQ(a, b)                                                                                   \
        do {                                                                                                \
                long long a_ = (long long)(a), b_ = (long long)(b);                                         \
                if (a_ != b_) {                                                                             \
                        printf("# %s:%d: %s: %lld != %lld (%s vs %s)\n", __FILE__, __LINE__, test_current_, \
                               a_, b_, #a, #b);                                                             \
                        test_failures_++;                                                                   \
                }                                                                                           \
        } while (0)

#define CHECK_CONTAINS(haystack, needle)                                                                    \
        do {                                                                                                \
                const char *h_ = (haystack), *n_ = (needle);                                                \
                if (!h_ || !strstr(h_, n_)) {                                                               \
                        printf("# %s:%d: %s: '%s' does not contain '%s'\n", __FILE__, __LINE__,             \
                               test_current_, h_ ?: "(null)", n_);                                          \
                        test_failures_++;                                                                   \
                }                                                                                           \
        } while (0)

typedef struct TestCase {
        const char *name;
        void (*fn)(void);
} TestCase;

#define TEST(n) static void test_##n(void)
#define T(n)                                                                                                \
        {                                                                                                   \
#n, test_##n                                                                                \
        }

int test_run(const TestCase *cases, size_t n);
#define TEST_MAIN(...)                                                                                      \
        int main(void)                                                                                      \
        {                                                                                                   \
                static const TestCase cases_[] = {__VA_ARGS__};                                             \
                return test_run(cases_, ELEMENTSOF(cases_));                                                \
        }

/* A scratch directory, removed at exit. */
const char *test_tmpdir(void);
/* Writes text to dir/rel, making directories. */
void test_write(const char *dir, const char *rel, const char *text);
