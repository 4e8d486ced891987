/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/bootloader.h"
#include "core/daemon-conf.h"
#include "core/journal-read.h"
#include "shared/sysfs.h"

/* Runs a tool of the machine (argv[0] as the machine names it, run from under the root prefix). Its
 * standard output goes to ret_stdout when given, else to our standard error (so `--json` output stays
 * clean). 0 on exit status 0; -EIO with *ret_error ("update-grub exited with status 1") otherwise. */
static int run_tool(char *const argv[], char **ret_stdout, char **ret_error)
{
        _cleanup_free_ char *path = sys_path(argv[0]);
        int pipefd[2] = {-EBADF, -EBADF}, status;
        pid_t pid;

        if (ret_stdout && pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                int r = -errno;
                if (ret_stdout) {
                        close(pipefd[0]);
                        close(pipefd[1]);
                }
                return r;
        }
        if (pid == 0) {
                if (dup2(ret_stdout ? pipefd[1] : STDERR_FILENO, STDOUT_FILENO) < 0)
                        _exit(127);
                execv(path, argv);
                fprintf(stderr, "Cannot run %s: %s\n", path, strerror(errno));
                _exit(127);
        }
        if (ret_stdout) {
                g_autoptr(GString) out = g_string_new(NULL);
                char buf[4096];
                ssize_t n;

                close(pipefd[1]);
                while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
                        if (n > 0)
                                g_string_append_len(out, buf, n);
                close(pipefd[0]);
                *ret_stdout = xstrdup(out->str);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        if (ret_error)
                *ret_error = WIFEXITED(status)
                                 ? xasprintf("%s exited with status %d", argv[0], WEXITSTATUS(status))
                                 : xasprintf("%s was killed by signal %d", argv[0], WTERMSIG(status));
        if (ret_stdout) {
                free(*ret_stdout);
                *ret_stdout = NULL;
        }
        return -EIO;
}

/* --- setting kinds --------------------------------------------------------------------------------- */

static int boot_file_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *p = sys_path(object), *s = NULL;
        int r;

        r = read_full_file(p, &s, NULL);
        if (r == -ENOENT) {
                *ret = xstrdup("absent");
                return 0;
        }
        if (r < 0)
                return r;
        *ret = xasprintf("content:%s", s);
        return 0;
}

static int boot_file_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *p = sys_path(object), *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *content = startswith(value, "content:");
        mode_t mode = 0644;
        struct stat st;
        int r;

        if (streq(value, "absent"))
                return unlink(p) < 0 && errno != ENOENT ? -errno : 0;
        if (!content)
                return -EINVAL;
        if (stat(p, &st) >= 0)
                mode = st.st_mode & 07777;
        tmp = xasprintf("%s.rtctl-tmp", p);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = write_all(fd, content, strlen(content));
        /* A boot configuration must survive a power cut right after: synced before it replaces the old. */
        if (r >= 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0 || rename(tmp, p) < 0))
                r = -errno;
        if (r < 0)
                (void)unlink(tmp);
        return r;
}

static bool same(const char *current, const char *desired)
{
        return streq(current, desired);
}

static bool boot_file_object(const char *object)
{
        return (streq(object, BOOTARGS_GRUB_DROPIN) || streq(object, BOOTARGS_KERNEL_CMDLINE)) &&
               journal_path_within(object, "/etc");
}

const SettingKind setting_kind_boot_file = {
    .name = "boot-file",
    .read = boot_file_read,
    .write = boot_file_write,
    .equal = same,
    .boot_object = boot_file_object,
};

static bool boot_dir_object(const char *object)
{
        return streq(object, BOOTARGS_GRUB_DROPIN_DIR) || streq(object, BOOTARGS_KERNEL_CMDLINE_DIR);
}

const SettingKind setting_kind_boot_dir = {
    .name = "boot-dir",
    .read = setting_dir_read,
    .write = setting_dir_write,
    .equal = same,
    .boot_object = boot_dir_object,
};

static int grubby_path(char **ret);

static int grubby_arg_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *grubby = NULL, *out = NULL, *value = NULL, *err = NULL;
        const char *key = startswith(object, "grubby:"), *line;
        char *args, *end;
        int r;

        if (!key || grubby_path(&grubby) < 0)
                return -ENOENT;
        r = run_tool((char *const[]){grubby, (char *)"--info=DEFAULT", NULL}, &out, &err);
        if (r < 0)
                return r;
        line = strstr(out, "\nargs=\"");
        if (!line && startswith(out, "args=\""))
                line = out - 1;
        if (!line)
                return -EIO;
        args = xstrdup(line + strlen("\nargs=\""));
        end = strchr(args, '\n');
        if (end)
                *end = 0;
        end = strrchr(args, '"');
        if (end)
                *end = 0;
        r = cmdline_find(args, key, &value);
        free(args);
        *ret = r <= 0 ? xstrdup("absent") : value ? xasprintf("%s=%s", key, value) : xstrdup(key);
        return 0;
}

static int grubby_arg_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *grubby = NULL, *opt = NULL, *err = NULL;
        const char *key = startswith(object, "grubby:");
        int r;

        if (!key)
                return -EINVAL;
        r = grubby_path(&grubby);
        if (r < 0)
                return r;
        opt = streq(value, "absent") ? xasprintf("--remove-args=%s", key) : xasprintf("--args=%s", value);
        r = run_tool((char *const[]){grubby, (char *)"--update-kernel=ALL", opt, NULL}, NULL, &err);
        if (r < 0 && err)
                fprintf(stderr, "%s\n", err);
        return r;
}

/* A kernel command line key as grubby takes it: never an option of its own. */
static bool grubby_object(const char *object)
{
        const char *key = startswith(object, "grubby:");

        if (!key || !*key || key[0] == '-' || strlen(key) > 255)
                return false;
        for (const char *c = key; *c; c++)
                if (!g_ascii_isalnum(*c) && !strchr("_.-", *c))
                        return false;
        return true;
}

const SettingKind setting_kind_grubby_arg = {
    .name = "grubby-arg",
    .read = grubby_arg_read,
    .write = grubby_arg_write,
    .equal = same,
    .boot_object = grubby_object,
};

void bootloader_kinds_register(void)
{
        static const SettingKind *const kinds[] = {&setting_kind_boot_file, &setting_kind_boot_dir,
                                                   &setting_kind_grubby_arg};

        setting_kinds_register(kinds, ELEMENTSOF(kinds));
}

/* --- detection ------------------------------------------------------------------------------------- */

static int find_tool(const char *name, char **ret)
{
        static const char *const dirs[] = {"/usr/sbin", "/usr/bin", "/sbin", "/bin"};

        for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", dirs[i], name);
                if (sys_access(p, X_OK) >= 0) {
                        *ret = TAKE_PTR(p);
                        return 0;
                }
        }
        return -ENOENT;
}

static int grubby_path(char **ret)
{
        return find_tool("grubby", ret);
}

static bool systemd_boot_installed(void)
{
        static const char *const esp[] = {"/boot", "/efi", "/boot/efi"};

        for (size_t i = 0; i < ELEMENTSOF(esp); i++) {
                _cleanup_free_ char *p = xasprintf("%s/loader/loader.conf", esp[i]);
                if (sys_exists(p))
                        return true;
        }
        return false;
}

int bootloader_detect(BootLoader *ret, char **ret_error)
{
        char *tool = NULL;

        assert(ret);

        if (find_tool("grubby", &tool) >= 0)
                *ret = (BootLoader){.tool = BOOT_TOOL_GRUBBY, .command = tool};
        else if (systemd_boot_installed() && find_tool("kernel-install", &tool) >= 0)
                *ret = (BootLoader){.tool = BOOT_TOOL_SYSTEMD_BOOT, .command = tool};
        else if (sys_exists("/etc/default/grub") && find_tool("update-grub", &tool) >= 0)
                *ret = (BootLoader){.tool = BOOT_TOOL_GRUB, .command = tool};
        else if (sys_exists(BOOTARGS_KERNEL_CMDLINE) && find_tool("kernel-install", &tool) >= 0)
                *ret = (BootLoader){.tool = BOOT_TOOL_SYSTEMD_BOOT, .command = tool};
        else {
                *ret_error = xasprintf(
                    "cannot tell how this machine boots%s%s: looked for grubby (Fedora and the like), "
                    "systemd-boot (loader/loader.conf in /boot, /efi or /boot/efi, or /etc/kernel/cmdline, "
                    "with kernel-install) and GRUB (/etc/default/grub with update-grub), in /usr/sbin, "
                    "/usr/bin, /sbin and /bin",
                    isempty(sysroot()) ? "" : " under ", sysroot());
                return -ENOENT;
        }
        return 0;
}

void bootloader_clear(BootLoader *l)
{
        assert(l);

        free(l->command);
        *l = (BootLoader){};
}

const char *bootloader_name(const BootLoader *l)
{
        assert(l);

        switch (l->tool) {
        case BOOT_TOOL_GRUB:
                return "grub";
        case BOOT_TOOL_SYSTEMD_BOOT:
                return "systemd-boot";
        case BOOT_TOOL_GRUBBY:
                return "grubby";
        }
        return "unknown";
}

const char *bootloader_target(const BootLoader *l)
{
        assert(l);

        switch (l->tool) {
        case BOOT_TOOL_GRUB:
                return BOOTARGS_GRUB_DROPIN;
        case BOOT_TOOL_SYSTEMD_BOOT:
                return BOOTARGS_KERNEL_CMDLINE;
        case BOOT_TOOL_GRUBBY:
                return "grubby --update-kernel=ALL";
        }
        return "";
}

char *bootargs_journal_path(void)
{
        _cleanup_free_ char *state = rtctl_state_dir();
        _cleanup_free_ char *rel = xasprintf("%s/bootargs.json", state);

        return sys_path(rel);
}

int bootargs_journal_open(Journal **ret, char **ret_error)
{
        _cleanup_free_ char *path = bootargs_journal_path();

        assert(ret);

        return journal_open(path, JOURNAL_BOOTARGS, ret, ret_error);
}

/* --- planning -------------------------------------------------------------------------------------- */

static bool is_ours(const BootArgs *b, const char *word)
{
        for (size_t i = 0; i < b->n; i++) {
                size_t k = strlen(b->args[i].key);
                if (strneq(word, b->args[i].key, k) && (word[k] == 0 || word[k] == '='))
                        return true;
        }
        return false;
}

/* The command line kernel-install uses when /etc/kernel/cmdline does not exist: /usr/lib/kernel/cmdline,
 * else the running kernel's (without what the boot loader adds). */
static char *kernel_cmdline_base(const Journal *journal)
{
        const JournalEntry *e = journal_find(journal, BOOTARGS_KERNEL_CMDLINE);
        _cleanup_strv_free_ char **words = NULL;
        _cleanup_free_ char *s = NULL;
        g_autoptr(GString) out = g_string_new(NULL);
        const char *c;

        if (e && (c = startswith(e->original, "content:")))
                return xstrdup(c);
        if (!e && sys_read(BOOTARGS_KERNEL_CMDLINE, &s) >= 0)
                return xasprintf("%s\n", s);
        if (sys_read("/usr/lib/kernel/cmdline", &s) >= 0)
                return xasprintf("%s\n", s);
        if (sys_read("/proc/cmdline", &s) < 0)
                return xstrdup("");
        /* The loader's own words are not part of the command line to keep. */
        words = strv_split(s, " \t\n");
        for (char **w = words; w && *w; w++)
                if (!isempty(*w) && !startswith(*w, "BOOT_IMAGE=") && !startswith(*w, "initrd="))
                        g_string_append_printf(out, "%s%s", out->len ? " " : "", *w);
        g_string_append_c(out, '\n');
        return xstrdup(out->str);
}

/* base with rtctl's keys taken out and b added at the end, one line. */
static char *cmdline_with(const char *base, const BootArgs *b)
{
        _cleanup_strv_free_ char **words = strv_split(base, " \t\n");
        _cleanup_free_ char *add = bootargs_format(b);
        g_autoptr(GString) s = g_string_new(NULL);

        for (char **w = words; w && *w; w++)
                if (!isempty(*w) && !is_ours(b, *w))
                        g_string_append_printf(s, "%s%s", s->len ? " " : "", *w);
        if (!isempty(add))
                g_string_append_printf(s, "%s%s", s->len ? " " : "", add);
        g_string_append_c(s, '\n');
        return xstrdup(s->str);
}

static char *grub_dropin(const BootArgs *b)
{
        _cleanup_free_ char *args = bootargs_format(b);

        return xasprintf("content:# Written by `rtctl bootargs apply`; `rtctl bootargs revert` removes it.\n"
                         "GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT %s\"\n",
                         args);
}

static bool planned(const Plan *plan, const char *object)
{
        for (size_t i = 0; i < plan->n; i++)
                if (streq(plan->settings[i].object, object))
                        return true;
        return false;
}

void bootloader_plan(const BootLoader *l, const BootArgs *b, const Journal *journal, Plan *plan)
{
        unsigned phase = 0;

        assert(l);

        switch (l->tool) {
        case BOOT_TOOL_GRUB:
                if (b->n == 0)
                        break; /* nothing to add: only restores */
                plan_add(plan, &setting_kind_boot_dir, "bootargs", 0, xstrdup(BOOTARGS_GRUB_DROPIN_DIR),
                         xstrdup("present"));
                plan_add(plan, &setting_kind_boot_file, "bootargs", 1, xstrdup(BOOTARGS_GRUB_DROPIN),
                         grub_dropin(b));
                phase = 2;
                break;
        case BOOT_TOOL_SYSTEMD_BOOT: {
                _cleanup_free_ char *base = kernel_cmdline_base(journal);
                char *content = cmdline_with(base, b);
                plan_add(plan, &setting_kind_boot_dir, "bootargs", 0, xstrdup(BOOTARGS_KERNEL_CMDLINE_DIR),
                         xstrdup("present"));
                plan_add(plan, &setting_kind_boot_file, "bootargs", 1, xstrdup(BOOTARGS_KERNEL_CMDLINE),
                         xasprintf("content:%s", content));
                free(content);
                phase = 2;
                break;
        }
        case BOOT_TOOL_GRUBBY:
                for (size_t i = 0; i < b->n; i++)
                        plan_add(plan, &setting_kind_grubby_arg, "bootargs", 0,
                                 xasprintf("grubby:%s", b->args[i].key), boot_arg_format(&b->args[i]));
                phase = 1;
                break;
        }
        /* What an earlier apply set and this one does not: put back, newest first. */
        for (size_t i = journal_size(journal); i-- > 0;) {
                const JournalEntry *e = journal_entry(journal, i);
                if (planned(plan, e->object))
                        continue;
                plan_add(plan, e->kind, "bootargs", phase, xstrdup(e->object), xstrdup(e->original))
                    ->restore = true;
        }
}

void bootloader_plan_revert(const Journal *journal, Plan *plan)
{
        assert(plan);

        for (size_t i = journal_size(journal); i-- > 0;) {
                const JournalEntry *e = journal_entry(journal, i);
                plan_add(plan, e->kind, "bootargs", 0, xstrdup(e->object), xstrdup(e->original))->restore =
                    true;
        }
}

/* --- applying -------------------------------------------------------------------------------------- */

static int regenerate(const BootLoader *l, char **ret_error)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;
        unsigned n = 0;
        int r;

        switch (l->tool) {
        case BOOT_TOOL_GRUBBY:
                return 0; /* grubby edits the entries itself */
        case BOOT_TOOL_GRUB:
                return run_tool((char *const[]){l->command, NULL}, NULL, ret_error);
        case BOOT_TOOL_SYSTEMD_BOOT:
                break;
        }
        /* Every installed kernel gets the new command line, not only the next one installed. */
        d = sys_opendir("/usr/lib/modules");
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *image = NULL;
                if (de->d_name[0] == '.')
                        continue;
                image = xasprintf("/usr/lib/modules/%s/vmlinuz", de->d_name);
                if (!sys_exists(image)) {
                        free(image);
                        image = xasprintf("/boot/vmlinuz-%s", de->d_name);
                        if (!sys_exists(image))
                                continue;
                }
                r = run_tool((char *const[]){l->command, (char *)"add", de->d_name, image, NULL}, NULL,
                             ret_error);
                if (r < 0)
                        return r;
                n++;
        }
        if (n == 0) {
                *ret_error = xstrdup("no installed kernel found in /usr/lib/modules for kernel-install");
                return -ENOENT;
        }
        return 0;
}

int bootloader_apply(const BootLoader *l, Plan *plan, Journal *journal, ApplyStats *ret_stats,
                     char **ret_error)
{
        _cleanup_free_ char *dir = xstrdup(journal_path(journal));
        g_autoptr(GHashTable) done = g_hash_table_new(g_str_hash, g_str_equal);
        SettingContext ctx;
        int r;

        assert(plan);

        *strrchr(dir, '/') = 0;
        r = mkdir_p(dir, 0755);
        if (r < 0) {
                *ret_error = xasprintf("cannot create %s: %s", dir, strerror(-r));
                return r;
        }
        setting_context_init(&ctx, NULL);
        applier_apply(plan, journal, &ctx, ret_stats);
        setting_context_clear(&ctx);

        for (size_t i = 0; i < plan->n; i++) {
                Setting *s = &plan->settings[i];
                /* Nothing here goes with a device: a file that cannot be created is a failure. */
                if (s->result == SETTING_FAILED || s->result == SETTING_BUSY ||
                    (s->result == SETTING_GONE && !s->restore)) {
                        *ret_error = xasprintf("%s: %s", s->object, strempty(s->message));
                        (void)journal_save(journal);
                        return s->error < 0 ? s->error : -EIO;
                }
                if (s->restore)
                        g_hash_table_add(done, s->object);
        }
        /* Run even when nothing changed: an apply that stopped after the files and before the tool (a
         * crash, a failing update-grub) is finished by the next one. */
        r = regenerate(l, ret_error);
        journal_forget_set(journal, done);
        (void)journal_save(journal);
        return r;
}
