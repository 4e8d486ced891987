/* SPDX-License-Identifier: GPL-2.0-or-later */
/* A few macros for unit tests that speak TAP, which meson counts test by test. */
#pragma once

#include <stdio.h>
#include <string.h>

#include "core/reconcile.h"
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
/* A fresh root prefix, scratch/root, with the CPU lists of a two-CPU machine and nothing else (and an
 * empty scratch/run for a journal), set as the root prefix. Returns its path. */
char *test_two_cpu_root(void);
/* Writes text to dir/rel, making directories. */
void test_write(const char *dir, const char *rel, const char *text);
/* What cgroup dir's cgroup.procs in the tree under root holds (a plain file there: what a move wrote),
 * or "(unreadable)". */
char *test_cgroup_procs(const char *root, const char *dir);

/* $RTCTL_FIXTURES/SHAPE, a generated machine (tests/fixtures/gen-machine.py), and a writable copy of it
 * in the scratch directory for passes that apply. */
char *test_fixture(const char *shape);
char *test_fixture_copy(const char *shape);

struct Setting;
struct Plan;
/* The setting of the plan for object, or NULL. */
const struct Setting *test_plan_find(const struct Plan *plan, const char *object);
/* What the plan's setting for object (restore or not) wants, or NULL. */
const char *test_plan_desired(const struct Plan *plan, const char *object);

/* The errors of loading profile NAME written with text into the scratch directory ("" when it loads). */
char *test_profile_errors(const char *name, const char *text);

struct Journal;
struct SettingContext;
struct PassResult;
/* One pass on the machine under root of profile text (written as profiles/pass.conf, which may include
 * the shipped profiles in $RTCTL_CONF_D; NULL: no policy, a restore), journalled in j (NULL: a dry run),
 * every tuner dirty. */
/* One pass of every tuner on the machine under root of policy p (NULL: a restore), journalled in j (NULL:
 * a dry run), with input in (NULL: none). */
void test_pass_policy(const char *root, const Policy *p, struct Journal *j, const PassInput *in,
                      struct PassResult *res);
void test_pass(const char *root, const char *profile, struct Journal *j, struct SettingContext *kinds,
               struct PassResult *res);
/* Writes text as the profile "test" in the scratch directory and loads it: NULL (a failed check, the
 * errors printed) when it does not load. */
Policy *test_profile(const char *text);
/* What a pass planned for object (not a restore of it), or NULL. */
const char *test_desired(const PassResult *r, const char *object);
/* The first not-supported note or planning failure whose reason holds text, or NULL. */
const Unsupported *test_note(const PassResult *r, const char *text);
/* The built rtctl ($RTCTL_BIN) with args (shell words) on the tree root, as a user would run it after
 * rtctld was killed: its bus address leads nowhere, so no rtctld on this machine can answer and touch
 * the live kernel instead of the tree. Returns the exit status; stdout and stderr in ret_out, ret_err. */
int test_run_rtctl(const char *root, const char *args, char **ret_out, char **ret_err);
