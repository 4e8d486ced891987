/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Each boot-loader layout as a tree under a root prefix, its tools replaced by scripts that record how
 * they were run: apply writes the expected files and runs the expected commands, revert puts every file
 * back byte for byte (and for grubby, removes only what rtctl added). */
#include <sys/stat.h>

#include "core/bootloader.h"
#include "shared/sysfs.h"
#include "test.h"

static BootArg wanted[] = {
    {.key = (char *)"isolcpus", .value = (char *)"managed_irq,2-3"},
    {.key = (char *)"nohz_full", .value = (char *)"2-3"},
    {.key = (char *)"threadirqs"},
};
static const BootArgs args = {.args = wanted, .n = ELEMENTSOF(wanted)};

static char *read_rel(const char *root, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);
        char *s = NULL;

        if (read_full_file(p, &s, NULL) < 0)
                return NULL;
        return s;
}

static void tool(const char *root, const char *rel, const char *script)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", root, rel);

        test_write(root, rel, script);
        CHECK(chmod(p, 0755) == 0);
}

/* A tool that appends its arguments to ROOT/commands.log. */
#define RECORDER "#!/bin/sh\necho \"${0##*/} $*\" >>\"$RTCTL_SYSROOT/commands.log\"\n"

static char *machine(const char *name)
{
        char *root = xasprintf("%s/%s", test_tmpdir(), name);

        test_write(root, "proc/cmdline", "BOOT_IMAGE=/vmlinuz-6.1.0 root=/dev/vda1 ro quiet\n");
        /* setenv, not sysroot_set: the tools read RTCTL_SYSROOT from their environment. */
        setenv("RTCTL_SYSROOT", root, 1);
        sysroot_set(root);
        return root;
}

static int run(bool apply, const BootArgs *b, char **ret_error)
{
        _cleanup_journal_ Journal *j = NULL;
        BootLoader l = {};
        ApplyStats st;
        Plan plan = {};
        int r;

        bootloader_kinds_register(); /* as rtctl does */
        r = bootloader_detect(&l, ret_error);
        if (r < 0)
                return r;
        CHECK_INTEQ(bootargs_journal_open(&j, ret_error), 0);
        if (apply)
                bootloader_plan(&l, b, j, &plan);
        else
                bootloader_plan_revert(j, &plan);
        r = bootloader_apply(&l, &plan, j, &st, ret_error);
        plan_clear(&plan);
        bootloader_clear(&l);
        return r;
}

#define APPLY(b)                                                                                            \
        do {                                                                                                \
                _cleanup_free_ char *e_ = NULL;                                                             \
                CHECK_INTEQ(run(true, (b), &e_), 0);                                                        \
                CHECK(e_ == NULL);                                                                          \
        } while (0)
#define REVERT()                                                                                            \
        do {                                                                                                \
                _cleanup_free_ char *e_ = NULL;                                                             \
                CHECK_INTEQ(run(false, NULL, &e_), 0);                                                      \
                CHECK(e_ == NULL);                                                                          \
        } while (0)

TEST(debian_grub_dropin_and_update_grub)
{
        _cleanup_free_ char *root = machine("grub"), *cfg = NULL, *log = NULL, *after = NULL, *other = NULL;
        _cleanup_free_ char *dir = NULL;
        struct stat st;

        test_write(root, "etc/default/grub", "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");
        tool(root, "usr/sbin/update-grub", RECORDER);
        APPLY(&args);
        cfg = read_rel(root, "etc/default/grub.d/rtctl.cfg");
        CHECK_CONTAINS(cfg,
                       "\nGRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT isolcpus=managed_irq,2-3 "
                       "nohz_full=2-3 threadirqs\"\n");
        log = read_rel(root, "commands.log");
        CHECK_STREQ(log, "update-grub \n");
        /* /etc/default/grub itself is never touched. */
        other = read_rel(root, "etc/default/grub");
        CHECK_STREQ(other, "GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");

        REVERT();
        after = read_rel(root, "etc/default/grub.d/rtctl.cfg");
        CHECK(after == NULL);
        /* grub.d did not exist before: it goes too. */
        dir = xasprintf("%s/etc/default/grub.d", root);
        CHECK(stat(dir, &st) < 0 && errno == ENOENT);
        free(log);
        log = read_rel(root, "commands.log");
        CHECK_STREQ(log, "update-grub \nupdate-grub \n");
        /* The journal is gone with the last original it held. */
        CHECK(read_rel(root, "var/lib/rtctl/bootargs.json") == NULL);
}

TEST(grub_dropin_of_the_same_name_comes_back_byte_for_byte)
{
        static const char mine[] = "# the admin's own, no newline at the end";
        _cleanup_free_ char *root = machine("grub-own"), *after = NULL, *other = NULL;

        test_write(root, "etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");
        test_write(root, "etc/default/grub.d/rtctl.cfg", mine);
        test_write(root, "etc/default/grub.d/init-select.cfg", "# Debian's\n");
        tool(root, "usr/sbin/update-grub", RECORDER);
        APPLY(&args);
        /* A second apply (another profile, fewer arguments) still reverts to the first original. */
        BootArgs fewer = {.args = wanted, .n = 1};
        APPLY(&fewer);
        REVERT();
        after = read_rel(root, "etc/default/grub.d/rtctl.cfg");
        CHECK_STREQ(after, mine);
        other = read_rel(root, "etc/default/grub.d/init-select.cfg");
        CHECK_STREQ(other, "# Debian's\n");
}

TEST(systemd_boot_kernel_cmdline_and_kernel_install)
{
        static const char original[] = "root=UUID=1234 rw quiet threadirqs nohz_full=1\n";
        _cleanup_free_ char *root = machine("sdboot"), *cmdline = NULL, *log = NULL, *after = NULL;

        test_write(root, "boot/efi/loader/loader.conf", "timeout 3\n");
        test_write(root, "etc/kernel/cmdline", original);
        test_write(root, "usr/lib/modules/6.1.0-13-amd64/vmlinuz", "MZ");
        test_write(root, "usr/lib/modules/6.1.0-15-amd64/vmlinuz", "MZ");
        test_write(root, "usr/lib/modules/6.1.0-9-amd64/modules.dep", ""); /* modules left, no kernel */
        tool(root, "usr/bin/kernel-install", RECORDER);
        APPLY(&args);
        cmdline = read_rel(root, "etc/kernel/cmdline");
        /* The user's arguments kept in place, rtctl's keys replaced, not doubled. */
        CHECK_STREQ(cmdline, "root=UUID=1234 rw quiet isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs\n");
        log = read_rel(root, "commands.log");
        CHECK_CONTAINS(log, "kernel-install add 6.1.0-13-amd64 /usr/lib/modules/6.1.0-13-amd64/vmlinuz\n");
        CHECK_CONTAINS(log, "kernel-install add 6.1.0-15-amd64 /usr/lib/modules/6.1.0-15-amd64/vmlinuz\n");
        CHECK(!strstr(log, "6.1.0-9-amd64"));

        REVERT();
        after = read_rel(root, "etc/kernel/cmdline");
        CHECK_STREQ(after, original);
}

TEST(systemd_boot_without_kernel_cmdline_starts_from_the_running_one)
{
        _cleanup_free_ char *root = machine("sdboot-new"), *cmdline = NULL;

        _cleanup_free_ char *dir = xasprintf("%s/etc/kernel", root);
        struct stat st;

        test_write(root, "efi/loader/loader.conf", "");
        test_write(root, "etc/hostname", "fixture\n");
        test_write(root, "boot/vmlinuz-6.1.0", "MZ");
        test_write(root, "usr/lib/modules/6.1.0/modules.dep", "");
        tool(root, "usr/bin/kernel-install", RECORDER);
        APPLY(&args);
        cmdline = read_rel(root, "etc/kernel/cmdline");
        CHECK_STREQ(cmdline, "root=/dev/vda1 ro quiet isolcpus=managed_irq,2-3 nohz_full=2-3 threadirqs\n");
        REVERT();
        CHECK(read_rel(root, "etc/kernel/cmdline") == NULL);
        CHECK(stat(dir, &st) < 0 && errno == ENOENT);
}

/* A grubby that keeps the default kernel's arguments in ROOT/grubby-args. */
#define FAKE_GRUBBY                                                                                         \
        "#!/bin/sh\n"                                                                                       \
        "f=\"$RTCTL_SYSROOT/grubby-args\"\n"                                                                \
        "echo \"grubby $*\" >>\"$RTCTL_SYSROOT/commands.log\"\n"                                            \
        "case \"$1\" in\n"                                                                                  \
        "--info=DEFAULT) printf 'index=0\\nkernel=\"/boot/vmlinuz-6.5\"\\nargs=\"%s\"\\n' \"$(cat "         \
        "\"$f\")\" "                                                                                        \
        ";;\n"                                                                                              \
        "--update-kernel=ALL)\n"                                                                            \
        "  case \"$2\" in\n"                                                                                \
        "  --args=*) a=${2#--args=}; k=${a%%=*}\n"                                                          \
        "    new=$(tr ' ' '\\n' <\"$f\" | grep -v -e \"^$k\\$\" -e \"^$k=\" | tr '\\n' ' ')\n"              \
        "    echo \"${new}$a\" | sed 's/^ *//' >\"$f\" ;;\n"                                                \
        "  --remove-args=*) k=${2#--remove-args=}\n"                                                        \
        "    tr ' ' '\\n' <\"$f\" | grep -v -e \"^$k\\$\" -e \"^$k=\" | tr '\\n' ' ' | sed 's/ *$//' "      \
        ">\"$f.n\"\n"                                                                                       \
        "    mv \"$f.n\" \"$f\" ;;\n"                                                                       \
        "  esac ;;\n"                                                                                       \
        "esac\n"

TEST(grubby_removes_only_what_rtctl_added)
{
        _cleanup_free_ char *root = machine("fedora"), *during = NULL, *after = NULL, *log = NULL;

        /* The user already boots with threadirqs, and with a nohz_full of their own. */
        test_write(root, "grubby-args", "ro rhgb quiet threadirqs nohz_full=1\n");
        tool(root, "usr/sbin/grubby", FAKE_GRUBBY);
        test_write(root, "etc/default/grub", "GRUB_CMDLINE_LINUX=\"rhgb quiet\"\n"); /* grubby still wins */
        APPLY(&args);
        during = read_rel(root, "grubby-args");
        CHECK_CONTAINS(during, "isolcpus=managed_irq,2-3");
        CHECK_CONTAINS(during, "nohz_full=2-3");
        CHECK_CONTAINS(during, " threadirqs");
        log = read_rel(root, "commands.log");
        CHECK_CONTAINS(log, "grubby --update-kernel=ALL --args=isolcpus=managed_irq,2-3\n");
        CHECK_CONTAINS(log, "grubby --update-kernel=ALL --args=nohz_full=2-3\n");
        /* threadirqs was there already: not added, so never removed. */
        CHECK(!strstr(log, "--args=threadirqs"));

        REVERT();
        after = read_rel(root, "grubby-args");
        CHECK_CONTAINS(after, "threadirqs");
        CHECK_CONTAINS(after, "nohz_full=1");
        CHECK(!strstr(after, "isolcpus"));
        free(log);
        log = read_rel(root, "commands.log");
        CHECK_CONTAINS(log, "grubby --update-kernel=ALL --remove-args=isolcpus\n");
        CHECK_CONTAINS(log, "grubby --update-kernel=ALL --args=nohz_full=1\n");
}

TEST(no_boot_tooling_is_a_clear_error)
{
        _cleanup_free_ char *root = machine("none"), *err = NULL;

        test_write(root, "etc/default/grub",
                   "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n"); /* but no update-grub */
        CHECK_INTEQ(run(true, &args, &err), -ENOENT);
        CHECK_CONTAINS(err, "cannot tell how this machine boots");
        CHECK_CONTAINS(err, "grubby");
        CHECK_CONTAINS(err, "loader/loader.conf");
        CHECK_CONTAINS(err, "/etc/default/grub with update-grub");
        CHECK(read_rel(root, "var/lib/rtctl/bootargs.json") == NULL);
}

TEST(failing_tool_is_reported_and_the_journal_kept)
{
        _cleanup_free_ char *root = machine("grub-fails"), *err = NULL, *journal = NULL;

        test_write(root, "etc/default/grub", "GRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\n");
        tool(root, "usr/sbin/update-grub", "#!/bin/sh\nexit 3\n");
        CHECK_INTEQ(run(true, &args, &err), -EIO);
        CHECK_STREQ(err, "/usr/sbin/update-grub exited with status 3");
        /* What was written can still be put back. */
        journal = read_rel(root, "var/lib/rtctl/bootargs.json");
        CHECK_CONTAINS(journal, "/etc/default/grub.d/rtctl.cfg");
}

TEST_MAIN(T(debian_grub_dropin_and_update_grub), T(grub_dropin_of_the_same_name_comes_back_byte_for_byte),
          T(systemd_boot_kernel_cmdline_and_kernel_install),
          T(systemd_boot_without_kernel_cmdline_starts_from_the_running_one),
          T(grubby_removes_only_what_rtctl_added), T(no_boot_tooling_is_a_clear_error),
          T(failing_tool_is_reported_and_the_journal_kept))
