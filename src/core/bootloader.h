/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/applier.h"
#include "core/bootargs.h"
#include "core/journal.h"

/* Puts boot arguments on the kernel command line through the machine's own boot tooling, and takes them
 * off again. Every change is a Setting in a journal of its own that outlives reboots (the point of boot
 * arguments), so `rtctl bootargs revert` puts back exactly what was there, also after a crash mid-way.
 * The tools (update-grub, kernel-install, grubby) are run from under the root prefix, so a fixture tree's
 * stand-ins show what would run. */

typedef enum BootTool {
        BOOT_TOOL_GRUB,         /* Debian, Ubuntu: /etc/default/grub.d/rtctl.cfg + update-grub */
        BOOT_TOOL_SYSTEMD_BOOT, /* /etc/kernel/cmdline + kernel-install add, per installed kernel */
        BOOT_TOOL_GRUBBY,       /* Fedora and the like: grubby --update-kernel=ALL */
} BootTool;

typedef struct BootLoader {
        BootTool tool;
        char *command; /* the tool's path as the machine names it ("/usr/sbin/update-grub") */
} BootLoader;

#define BOOTARGS_GRUB_DROPIN_DIR    "/etc/default/grub.d"
#define BOOTARGS_GRUB_DROPIN        BOOTARGS_GRUB_DROPIN_DIR "/rtctl.cfg"
#define BOOTARGS_KERNEL_CMDLINE_DIR "/etc/kernel"
#define BOOTARGS_KERNEL_CMDLINE     BOOTARGS_KERNEL_CMDLINE_DIR "/cmdline"

/* A whole file: "absent", or "content:" and its bytes. Written atomically and synced, keeping the mode
 * of the file it replaces. */
extern const SettingKind setting_kind_boot_file;
/* A directory rtctl may create for a drop-in: "present" or "absent" (removed only when empty). */
extern const SettingKind setting_kind_boot_dir;
/* grubby:KEY: the argument KEY on the kernels grubby manages, "absent" or "KEY=VALUE" / "KEY", read
 * from the default kernel's entry. */
extern const SettingKind setting_kind_grubby_arg;
/* The three above, for the one binary that uses them (rtctl): setting_kinds_register(). */
void bootloader_kinds_register(void);

/* Finds the boot tooling under the root prefix. -ENOENT with a message naming everything looked for. */
int bootloader_detect(BootLoader *ret, char **ret_error);
void bootloader_clear(BootLoader *l);
const char *bootloader_name(const BootLoader *l);
/* What apply changes, as the user would look for it: a file, or "grubby". */
const char *bootloader_target(const BootLoader *l);

/* Where the boot journal lives: <root>/var/lib/rtctl/bootargs.json (the state directory). */
char *bootargs_journal_path(void);
int bootargs_journal_open(Journal **ret, char **ret_error);

/* The settings that put b in place (an empty b: none of rtctl's arguments), and a restore of every
 * journalled object the new settings no longer cover. */
void bootloader_plan(const BootLoader *l, const BootArgs *b, const Journal *journal, Plan *plan);
/* The settings that put every journalled original back, newest first. */
void bootloader_plan_revert(const Journal *journal, Plan *plan);

/* Apply a plan (from either function above): journal, write, then regenerate the boot loader's
 * configuration (update-grub; kernel-install add for each installed kernel). Restored objects leave the
 * journal. 0, or negative errno with ret_error when a setting failed or the tool did. */
int bootloader_apply(const BootLoader *l, Plan *plan, Journal *journal, ApplyStats *ret_stats,
                     char **ret_error);
