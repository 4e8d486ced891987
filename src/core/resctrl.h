/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "shared/util.h"

/* The resctrl filesystem (Intel RDT, AMD PQoS): cache allocation by way masks, per cache domain. */
#define RESCTRL_ROOT "/sys/fs/resctrl"

typedef struct SchemataEntry {
        unsigned domain; /* the cache id: .../cache/indexN/id of that level */
        uint64_t mask;
} SchemataEntry;

/* One resource's line of a schemata file, "L3:0=ff0;1=fffff" (white space ignored). */
typedef struct Schemata {
        char *resource;
        SchemataEntry *entries;
        size_t n;
} Schemata;

int schemata_parse(const char *line, Schemata *ret);
char *schemata_format(const Schemata *s);
void schemata_clear(Schemata *s);
/* The entry of domain, or NULL. */
SchemataEntry *schemata_find(const Schemata *s, unsigned domain);
