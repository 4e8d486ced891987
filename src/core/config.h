/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include "shared/util.h"

/* INI files (rtctl.profile(5), SYNTAX), with the file and line of every section and key kept, because
 * every configuration error must name file:line:key. Our own parser: GKeyFile keeps no line numbers,
 * accepts what later breaks (bytes after a NUL, names that are not UTF-8, localized keys) and finds a key
 * by a scan, which made 80,000 keys take 20 s. */

typedef struct ConfKey {
        char *key;
        char *value;
        char *file;
        unsigned line;
        bool used; /* set when a consumer read it; what nobody read is an unknown key */
} ConfKey;

typedef struct ConfSection {
        char *name; /* "Block nvme": the whole text between the brackets */
        char *file;
        unsigned line;
        ConfKey *keys;
        size_t n_keys, keys_allocated;
        struct _GHashTable *index; /* key -> its position in keys, plus one */
        bool used;
} ConfSection;

typedef struct Conf {
        ConfSection *sections;
        size_t n_sections, sections_allocated;
        struct _GHashTable *index; /* section name -> its position in sections, plus one */
} Conf;

void conf_free(Conf *c);
static inline void conf_freep(Conf **c)
{
        conf_free(*c);
}
#define _cleanup_conf_ _cleanup_(conf_freep)

/* Only a regular file of at most CONFIG_FILE_MAX bytes is read. */
int conf_parse_file(const char *path, Conf **ret, char **ret_error);
/* The same for text of size bytes, which ends in a NUL at text[size]; path is what messages name. */
int conf_parse_data(const char *path, const char *text, size_t size, Conf **ret, char **ret_error);
/* Layers upper over lower: keys of a section both have are replaced, sections only upper has are put
 * before lower's (so rules of an including profile or a drop-in are tried first). upper is consumed. */
void conf_merge(Conf *lower, Conf *upper);

ConfSection *conf_section(Conf *c, const char *name);
/* Marks the key used. NULL when absent. */
ConfKey *conf_key(ConfSection *s, const char *key);
/* Every key of the section whose name is key, e.g. for [Sysctl], in file order. */

/* "file:line: Key=value: message" */
char *conf_key_error(const ConfKey *k, const char *fmt, ...) _printf_(2, 3);
char *conf_section_error(const ConfSection *s, const char *fmt, ...) _printf_(2, 3);

/* The directories searched, most important first: $RTCTL_CONF_PATH (colon-separated) when set;
 * otherwise /etc/rtctl, then the shipped directory (the source tree's conf.d when the binary runs from
 * its build tree, so a developer or a test needs no install). */
char **conf_search_path(void);
/* Finds relpath in the first directory that has it, then applies relpath.d/ drop-ins (one file name
 * taken from the first directory that has it, applied in file name order). -ENOENT when no directory
 * has the file itself. */
int conf_load_layered(char *const *search_path, const char *relpath, Conf **ret, char **ret_error);
