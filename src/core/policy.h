/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "core/attach.h"
#include "core/topology.h"
#include "core/tuner.h"

/* The CPU set words every section understands. */
typedef enum CpuSpecKind {
        CPU_SPEC_UNSET,
        CPU_SPEC_LIST,
        CPU_SPEC_ALL,
        CPU_SPEC_HOUSEKEEPING,
        CPU_SPEC_ISOLATED,
        CPU_SPEC_AUTO, /* auto:N, N whole physical cores */
} CpuSpecKind;

typedef struct CpuSpec {
        CpuSpecKind kind;
        CpuSet *list;
        unsigned auto_cores;
} CpuSpec;

int cpu_spec_parse(const char *s, CpuSpec *ret, char **ret_error);
void cpu_spec_clear(CpuSpec *s);
char *cpu_spec_format(const CpuSpec *s);

/* A profile, loaded with its includes and drop-ins, validated by every tuner. */
typedef struct Policy {
        char *name;
        char *description;
        int rank; /* [Profile] Rank=: among held profiles and the base one, the highest is in force */
        CpuSpec isolate;
        AttachRules *attach; /* [Attach NAME] rules; NULL when none */
        void *config[N_TUNERS];
} Policy;

bool profile_name_valid(const char *name);

/* -ENOENT: no such profile (ret_error says so); -EINVAL: invalid, ret_error holds one
 * "file:line: Key=value: why" line per problem. */
int policy_load(char *const *search_path, const char *name, Policy **ret, char **ret_error);
void policy_free(Policy *p);
static inline void policy_freep(Policy **p)
{
        policy_free(*p);
}
#define _cleanup_policy_ _cleanup_(policy_freep)

/* Isolated and housekeeping CPUs of the policy on this machine. Isolating CPU 0 or every CPU is
 * refused: the kernel and the rest of the system need somewhere to run. */
int policy_cpus(const Policy *p, const Topology *t, CpuSet **ret_isolated, CpuSet **ret_housekeeping,
                char **ret_error);

typedef struct ProfileInfo {
        char *name;
        char *description;
} ProfileInfo;

/* Every profile in the search path, sorted by name. */
int profiles_list(char *const *search_path, ProfileInfo **ret, size_t *ret_n);
void profiles_free(ProfileInfo *l, size_t n);
