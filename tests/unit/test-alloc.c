/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Arrays grown by GREEDY_REALLOC and xreallocarray (src/shared/util.c). */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "test.h"

/* Whether f() aborts, run in a child so the test lives on. */
static bool aborts(void (*f)(void))
{
        int status;
        pid_t pid = fork();

        if (pid < 0)
                return false;
        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                if (null >= 0)
                        dup2(null, STDERR_FILENO); /* "Out of memory." is expected */
                f();
                _exit(0);
        }
        if (waitpid(pid, &status, 0) != pid)
                return false;
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

TEST(growth_is_geometric)
{
        _cleanup_free_ unsigned *v = NULL;
        size_t allocated = 0, grown = 0;

        for (unsigned i = 0; i < 100000; i++) {
                size_t before = allocated;
                GREEDY_REALLOC(v, allocated, i + 1);
                CHECK(allocated >= i + 1);
                grown += allocated != before;
                v[i] = i;
        }
        /* Doubling: some 17 steps to 100,000, where growing by one takes 100,000. */
        CHECK(grown <= 20);
        /* Room already there is not grown again. */
        size_t before = allocated;
        GREEDY_REALLOC(v, allocated, allocated);
        CHECK_INTEQ(allocated, before);
}

TEST(contents_are_kept)
{
        _cleanup_free_ char **v = NULL;
        size_t allocated = 0, n = 0;
        bool same = true;

        for (unsigned i = 0; i < 1000; i++) {
                GREEDY_REALLOC(v, allocated, n + 1);
                v[n++] = xasprintf("%u", i);
        }
        for (unsigned i = 0; i < n; i++) {
                _cleanup_free_ char *want = xasprintf("%u", i);
                same = same && streq(v[i], want);
                free(v[i]);
        }
        CHECK(same);

        _cleanup_free_ unsigned *a = xreallocarray(NULL, 3, sizeof(unsigned));
        a[0] = 7, a[1] = 8, a[2] = 9;
        a = xreallocarray(a, 1000, sizeof(unsigned));
        CHECK(a[0] == 7 && a[1] == 8 && a[2] == 9);
}

/* need * size wraps to 32 bytes: unchecked, realloc would gladly hand out 32 bytes for an array the caller
 * believes holds 2^60 elements. */
static void grow_past_size_max(void)
{
        struct {
                char c[16];
        } *v = NULL;
        size_t allocated = 0;

        GREEDY_REALLOC(v, allocated, SIZE_MAX / 16 + 3);
}

static void grow_twice_past_size_max(void)
{
        struct {
                char c[16];
        } *v = NULL;
        size_t allocated = 0;

        GREEDY_REALLOC(v, allocated, 4);
        GREEDY_REALLOC(v, allocated, SIZE_MAX / 16 + 3);
}

static void reallocarray_past_size_max(void)
{
        void *v = xreallocarray(NULL, SIZE_MAX / 16 + 3, 16);
        free(v);
}

static void grow_within_reason(void)
{
        _cleanup_free_ unsigned *v = NULL;
        size_t allocated = 0;

        GREEDY_REALLOC(v, allocated, 1024);
}

TEST(overflow_is_refused)
{
        CHECK(aborts(grow_past_size_max));
        CHECK(aborts(grow_twice_past_size_max));
        CHECK(aborts(reallocarray_past_size_max));
        CHECK(!aborts(grow_within_reason));
}

TEST_MAIN(T(growth_is_geometric), T(contents_are_kept), T(overflow_is_refused))
