/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/attach.h"
#include "core/core-picker.h"
#include "core/topology.h"
#include "core/tuner.h"

/* The CPU set words every section understands. */
typedef enum CpuSpecKind {
        CPU_SPEC_UNSET,
        CPU_SPEC_LIST,
        CPU_SPEC_ALL,
        CPU_SPEC_HOUSEKEEPING,
        CPU_SPEC_ISOLATED,
        CPU_SPEC_AUTO, /* auto:N[:fast|efficient|cache], N whole physical cores */
} CpuSpecKind;

typedef struct CpuSpec {
        CpuSpecKind kind;
        CpuSet *list;
        unsigned auto_cores;
        CorePreference auto_prefer;
        char *origin; /* "FILE:LINE: KEY=VALUE" it was read from, for messages; NULL when not from a file */
} CpuSpec;

int cpu_spec_parse(const char *s, CpuSpec *ret, char **ret_error);
void cpu_spec_clear(CpuSpec *s);
/* CPUs= of a section that places things ([IRQ], [IRQ NAME], [Power NAME]): a CPU list, all, housekeeping
 * or isolated (not auto:N, which only [CPU] Isolate= chooses). False with an error in errors. */
bool cpu_spec_parse_key(const ConfKey *k, CpuSpec *ret, char ***errors);
/* "CPUs LIST are not CPUs of this machine (its CPUs are 0-N)" when a CPU list names CPUs the machine can
 * never have (not possible, not merely offline), else NULL. */
char *cpu_spec_beyond(const CpuSpec *s, const Topology *t);
/* That, as a failure known before writing, once per key in notes, the key's FILE:LINE: KEY=VALUE its
 * object: the rest of the section still applies, over the CPUs that exist. */
void cpu_spec_note_beyond(const CpuSpec *s, const Topology *t, const char *tuner, PlanNotes *notes);
char *cpu_spec_format(const CpuSpec *s);

/* A profile, loaded with its includes and drop-ins, validated by every tuner. */
typedef struct Policy {
        char *name;
        char *description;
        int rank; /* [Profile] Rank=: among held profiles and the base one, the highest is in force */
        CpuSpec isolate;
        AttachRules *attach;      /* [Attach NAME] rules; NULL when none */
        AttachRules *holds;       /* [Hold NAME] rules (read from the base profile); NULL when none */
        void *config[TUNERS_MAX]; /* by the tuner's place (tuner_nth()) */
} Policy;

bool profile_name_valid(const char *name);

/* -ENOENT: no such profile (ret_error says so); -EINVAL: invalid, ret_error holds one
 * "file:line: Key=value: why" line per problem. */
int policy_load(char *const *search_path, const char *name, Policy **ret, char **ret_error);
/* Where profiles come from: load() parses relpath ("profiles/NAME.conf") or returns -ENOENT. policy_load()
 * reads the search path; tests and fuzzers give text. */
typedef struct ConfSource {
        int (*load)(void *userdata, const char *relpath, Conf **ret, char **ret_error);
        void *userdata;
} ConfSource;
int policy_load_from(const ConfSource *src, const char *name, Policy **ret, char **ret_error);
void policy_free(Policy *p);
static inline void policy_freep(Policy **p)
{
        policy_free(*p);
}
#define _cleanup_policy_ _cleanup_(policy_freep)
/* Some [Attach] rule of p (NULL: none) says Threads=realtime. */
static inline bool policy_uses_realtime(const Policy *p)
{
        return p && p->attach && p->attach->uses_realtime;
}

/* Isolated and housekeeping CPUs of the policy on this machine. Isolating CPU 0 or every CPU is
 * refused: the kernel and the rest of the system need somewhere to run. */
int policy_cpus(const Policy *p, const Topology *t, CpuSet **ret_isolated, CpuSet **ret_housekeeping,
                char **ret_error);
/* The same, and in ret_reason (NULL when Isolate= lists its CPUs or is unset) one line saying which
 * cores auto:N chose and why, for status. */
int policy_cpus_explained(const Policy *p, const Topology *t, CpuSet **ret_isolated,
                          CpuSet **ret_housekeeping, char **ret_reason, char **ret_error);

typedef struct ProfileInfo {
        char *name;
        char *description;
} ProfileInfo;

/* Every profile in the search path, sorted by name. */
int profiles_list(char *const *search_path, ProfileInfo **ret, size_t *ret_n);
void profiles_free(ProfileInfo *l, size_t n);
