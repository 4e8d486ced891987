/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <sys/stat.h>

#include "test.h"

int test_failures_;
int test_count_;
const char *test_current_;
static char tmpdir[256];

static void remove_tmpdir(void)
{
        char cmd[300];

        if (tmpdir[0]) {
                snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
                if (system(cmd) != 0)
                        fprintf(stderr, "could not remove %s\n", tmpdir);
        }
}

const char *test_tmpdir(void)
{
        if (!tmpdir[0]) {
                snprintf(tmpdir, sizeof tmpdir, "/tmp/rtctl-unit-XXXXXX");
                if (!mkdtemp(tmpdir))
                        abort();
                atexit(remove_tmpdir);
        }
        return tmpdir;
}

void test_write(const char *dir, const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
        char *slash = strrchr(path, '/');
        FILE *f;

        *slash = 0;
        if (mkdir_p(path, 0755) < 0)
                abort();
        *slash = '/';
        f = fopen(path, "w");
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
}

int test_run(const TestCase *cases, size_t n)
{
        int failed = 0;

        setvbuf(stdout, NULL, _IONBF, 0);
        printf("1..%zu\n", n);
        for (size_t i = 0; i < n; i++) {
                int before = test_failures_;
                test_current_ = cases[i].name;
                cases[i].fn();
                if (test_failures_ == before)
                        printf("ok %zu - %s\n", i + 1, cases[i].name);
                else {
                        printf("not ok %zu - %s\n", i + 1, cases[i].name);
                        failed++;
                }
                fflush(stdout);
        }
        return failed ? 1 : 0;
}
