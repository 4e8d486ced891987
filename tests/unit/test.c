/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "test.h"
#include "tuners/registry.h"

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
                /* In memory where there is a tmpfs: some tests copy a 16 MB fixture tree per case, which
                 * on a busy disk took longer than a unit test may. */
                snprintf(tmpdir, sizeof tmpdir, "%s/rtctl-unit-XXXXXX",
                         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
                if (!mkdtemp(tmpdir))
                        abort();
                /* RTCTL_TEST_KEEP=1 leaves it, e.g. for tests/fuzz/gen-corpus.py to take journals from. */
                if (getenv("RTCTL_TEST_KEEP"))
                        printf("# scratch directory kept: %s\n", tmpdir);
                else
                        atexit(remove_tmpdir);
        }
        return tmpdir;
}

char *test_two_cpu_root(void)
{
        char *root = xasprintf("%s/root", test_tmpdir());
        _cleanup_free_ char *cmd =
            xasprintf("rm -rf '%s' '%s/run'; mkdir -p '%s/run'", root, test_tmpdir(), test_tmpdir());

        if (system(cmd) != 0)
                abort();
        test_write(root, "sys/devices/system/cpu/possible", "0-1\n");
        test_write(root, "sys/devices/system/cpu/present", "0-1\n");
        test_write(root, "sys/devices/system/cpu/online", "0-1\n");
        sysroot_set(root);
        return root;
}

char *test_cgroup_procs(const char *root, const char *dir)
{
        _cleanup_free_ char *path = xasprintf("%s/sys/fs/cgroup%s/cgroup.procs", root, dir);
        char *s = NULL;

        if (read_full_file(path, &s, NULL) < 0)
                return xstrdup("(unreadable)");
        return s;
}

void test_write(const char *dir, const char *rel, const char *text)
{
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, rel);
        char *slash = strrchr(path, '/');
        bool restore_mode = false;
        struct stat st;
        FILE *f;

        *slash = 0;
        if (mkdir_p(path, 0755) < 0)
                abort();
        *slash = '/';
        f = fopen(path, "w");
        /* A fixture's read-only attribute (0444, as sysfs has it) that the test sets up: root writes it
         * anyway, anyone else (a package build) takes write permission for that one write. */
        if (!f && errno == EACCES && stat(path, &st) == 0 && chmod(path, st.st_mode | S_IWUSR) == 0) {
                f = fopen(path, "w");
                restore_mode = true;
        }
        if (!f)
                abort();
        fputs(text, f);
        fclose(f);
        if (restore_mode && chmod(path, st.st_mode) < 0)
                abort();
}

char *test_fixture(const char *shape)
{
        const char *dir = getenv("RTCTL_FIXTURES");
        return xasprintf("%s/%s", dir ? dir : "tests/unit/fixtures", shape);
}

Policy *test_profile(const char *text)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_free_ char *err = NULL;
        Policy *p = NULL;

        test_write(test_tmpdir(), "profiles/test.conf", text);
        CHECK_INTEQ(policy_load(search, "test", &p, &err), 0);
        if (err)
                printf("# %s\n", err);
        return p;
}

const char *test_desired(const PassResult *r, const char *object)
{
        for (size_t i = 0; i < r->plan.n; i++)
                if (streq(r->plan.settings[i].object, object) && !r->plan.settings[i].restore)
                        return r->plan.settings[i].desired;
        return NULL;
}

const Unsupported *test_note(const PassResult *r, const char *text)
{
        for (size_t i = 0; i < r->notes.n; i++)
                if (strstr(r->notes.items[i].reason, text))
                        return &r->notes.items[i];
        return NULL;
}

int test_run(const TestCase *cases, size_t n)
{
        int failed = 0;

        setvbuf(stdout, NULL, _IONBF, 0);
        tuners_register_all();
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

char *test_fixture_copy(const char *shape)
{
        _cleanup_free_ char *src = test_fixture(shape);
        char *dst = xasprintf("%s/%s-copy", test_tmpdir(), shape);
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s' && cp -a '%s' '%s'", dst, src, dst);

        if (system(cmd) != 0)
                abort();
        return dst;
}

const Setting *test_plan_find(const Plan *plan, const char *object)
{
        for (size_t i = 0; i < plan->n; i++)
                if (streq(plan->settings[i].object, object))
                        return &plan->settings[i];
        return NULL;
}

const char *test_plan_desired(const Plan *plan, const char *object)
{
        const Setting *s = test_plan_find(plan, object);
        return s ? s->desired : NULL;
}

char *test_profile_errors(const char *name, const char *text)
{
        char *search[] = {(char *)test_tmpdir(), NULL};
        _cleanup_free_ char *rel = xasprintf("profiles/%s.conf", name);
        Policy *p = NULL;
        char *err = NULL;

        test_write(test_tmpdir(), rel, text);
        (void)policy_load(search, name, &p, &err);
        policy_free(p);
        return err ?: xstrdup("");
}

void test_pass_policy(const char *root, const Policy *p, Journal *j, const PassInput *in, PassResult *res)
{
        _cleanup_topology_ Topology *t = NULL;
        Dirty all = {};

        sysroot_set(root);
        pass_result_clear(res);
        CHECK_INTEQ(topology_load(NULL, &t), 0);
        if (!t)
                return;
        dirty_mark_all(&all);
        reconcile_pass_with(p, t, j, &all, j == NULL, in, res);
        dirty_clear(&all);
}

void test_pass(const char *root, const char *profile, Journal *j, SettingContext *kinds, PassResult *res)
{
        /* The shipped profiles after the test's own, so that a test profile can include them. */
        char *search[] = {(char *)test_tmpdir(), getenv("RTCTL_CONF_D"), NULL};
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_free_ char *err = NULL;

        if (profile) {
                test_write(test_tmpdir(), "profiles/pass.conf", profile);
                if (policy_load(search, "pass", &p, &err) < 0) {
                        printf("# %s\n", err);
                        abort();
                }
        }
        if (!kinds->refused)
                setting_context_init(kinds, NULL);
        test_pass_policy(root, p, j, &(PassInput){.kinds = kinds}, res);
}

int test_run_rtctl(const char *root, const char *args, char **ret_out, char **ret_err)
{
        const char *bin = getenv("RTCTL_BIN");
        _cleanup_free_ char *out = xasprintf("%s/stdout", test_tmpdir()),
                            *err = xasprintf("%s/stderr", test_tmpdir());
        _cleanup_free_ char *cmd = NULL;
        int status;

        CHECK(bin != NULL);
        cmd = xasprintf(
            "RTCTL_SYSROOT='%s' RUNTIME_DIRECTORY='%s/run' DBUS_SYSTEM_BUS_ADDRESS='unix:path=%s/no-bus' "
            "'%s' %s >'%s' 2>'%s'",
            root, test_tmpdir(), test_tmpdir(), strempty(bin), args, out, err);
        status = system(cmd);
        CHECK_INTEQ(read_full_file(out, ret_out, NULL), 0);
        CHECK_INTEQ(read_full_file(err, ret_err, NULL), 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
