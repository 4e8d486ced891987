/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/util.h"

/* How a kernel object is read, written and compared. Each kind is one small ops table; the journal
 * stores the kind's name, so restore after a restart knows how to put a value back. */
typedef struct SettingKind {
        const char *name;
        int (*read)(const char *object, char **ret); /* -ENOENT when the object does not exist */
        int (*write)(const char *object, const char *value);
        bool (*equal)(const char *current, const char *desired);
} SettingKind;

/* A plain sysfs/procfs attribute; values compare with white space folded. */
extern const SettingKind setting_kind_file;
/* An attribute listing choices with the active one in brackets: "none [mq-deadline] kyber". */
extern const SettingKind setting_kind_choice;

const SettingKind *setting_kind_from_name(const char *name);

typedef enum SettingResult {
        SETTING_PENDING,
        SETTING_UNCHANGED, /* already at the desired value: nothing written */
        SETTING_CHANGED,
        SETTING_FAILED,
} SettingResult;

/* One desired value of one kernel object. Tuners fill object, desired, kind and phase; the applier
 * fills the rest. */
typedef struct Setting {
        const SettingKind *kind;
        const char *tuner;
        char *object; /* the kernel path, without root prefix */
        char *desired;
        bool restore;   /* puts a journalled original back: the policy no longer wants this object */
        unsigned phase; /* applied in phase order: a block queue's iosched/ tunables only exist after
                           its scheduler switch */
        SettingResult result;
        char *current; /* as read before writing (or instead of writing, in a dry run) */
        int error;     /* negative errno when FAILED */
        char *message; /* a sentence for the status when FAILED */
} Setting;

typedef struct Plan {
        Setting *settings;
        size_t n;
        size_t alloc;
} Plan;

void plan_init(Plan *p);
void plan_clear(Plan *p);
Setting *plan_add(Plan *p, const SettingKind *kind, const char *tuner, unsigned phase, char *object,
                  char *desired); /* takes object and desired */
Setting *plan_find(Plan *p, const char *object);
