/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Setting kinds for resctrl: a group directory and one resource's line of a schemata file. */
#include <inttypes.h>

#include "core/resctrl.h"
#include "core/setting.h"
#include "shared/sysfs.h"

void schemata_clear(Schemata *s)
{
        assert(s);

        free(s->resource);
        free(s->entries);
        *s = (Schemata){};
}

SchemataEntry *schemata_find(const Schemata *s, unsigned domain)
{
        assert(s);

        for (size_t i = 0; i < s->n; i++)
                if (s->entries[i].domain == domain)
                        return &s->entries[i];
        return NULL;
}

static int parse_entry(const char *text, SchemataEntry *ret)
{
        _cleanup_free_ char *id = NULL;
        const char *eq = strchr(text, '=');
        char *end;

        if (!eq || eq == text || !eq[1])
                return -EINVAL;
        id = xstrndup(text, (size_t)(eq - text));
        if (safe_atou(id, &ret->domain) < 0)
                return -EINVAL;
        errno = 0;
        ret->mask = strtoull(eq + 1, &end, 16);
        return errno || *end ? -EINVAL : 0;
}

int schemata_parse(const char *line, Schemata *ret)
{
        assert(line);

        _cleanup_free_ char *flat = xmalloc0(strlen(line) + 1);
        _cleanup_strv_free_ char **parts = NULL;
        Schemata s = {};
        size_t allocated = 0;
        char *colon, *o = flat;

        /* The kernel pads resource names to one width ("  L3:0=fff"): no blank means anything. */
        for (const char *p = line; *p; p++)
                if (!strchr(" \t\n", *p))
                        *o++ = *p;
        colon = strchr(flat, ':');
        if (!colon || colon == flat)
                return -EINVAL;
        s.resource = xstrndup(flat, (size_t)(colon - flat));
        parts = strv_split(colon + 1, ";");
        for (char **p = parts; p && *p; p++) {
                SchemataEntry e;
                if (parse_entry(*p, &e) < 0 || schemata_find(&s, e.domain)) {
                        schemata_clear(&s);
                        return -EINVAL;
                }
                GREEDY_REALLOC(s.entries, allocated, s.n + 1);
                s.entries[s.n++] = e;
        }
        if (s.n == 0) {
                schemata_clear(&s);
                return -EINVAL;
        }
        *ret = s;
        return 0;
}

char *schemata_format(const Schemata *s)
{
        assert(s);

        char *out = xasprintf("%s:", s->resource);

        for (size_t i = 0; i < s->n; i++) {
                char *next = xasprintf("%s%s%u=%" PRIx64, out, i ? ";" : "", s->entries[i].domain,
                                       s->entries[i].mask);
                free(out);
                out = next;
        }
        return out;
}

/* A resctrl group: "present" or "absent". mkdir fails with ENOSPC when every CLOSID is taken by other
 * groups. Its removal gives its CPUs and tasks back to the default group and takes its files along. */
const SettingKind setting_kind_resctrl_group = {
    .name = "resctrl-group",
    .read = setting_dir_read,
    .write = setting_dir_write,
    .equal = setting_equal_folded,
    .owns_children = true,
};

/* The line of the resource that hint names. -ENODATA when the file has no such line. */
static int schemata_read(SettingContext *ctx, const char *object, const char *hint, char **ret)
{
        _cleanup_free_ char *s = NULL;
        _cleanup_strv_free_ char **lines = NULL;
        Schemata want = {};
        int r;

        if (!hint || schemata_parse(hint, &want) < 0)
                return -EINVAL;
        r = sys_read(object, &s);
        if (r < 0) {
                schemata_clear(&want);
                return r;
        }
        lines = strv_split(s, "\n");
        r = -ENODATA;
        for (char **l = lines; l && *l && r < 0; l++) {
                Schemata have;
                if (schemata_parse(*l, &have) < 0)
                        continue;
                if (streq(have.resource, want.resource)) {
                        *ret = schemata_format(&have);
                        r = 0;
                }
                schemata_clear(&have);
        }
        schemata_clear(&want);
        return r;
}

/* Domains compare where both name them: a domain whose CPUs are all offline is not in the file, and a
 * value that names it cannot be told from one that does not. */
static bool schemata_equal(const char *current, const char *desired)
{
        Schemata a = {}, b = {};
        bool eq;

        if (!current || !desired || schemata_parse(current, &a) < 0 || schemata_parse(desired, &b) < 0) {
                schemata_clear(&a);
                return setting_equal_folded(current, desired);
        }
        eq = streq(a.resource, b.resource);
        for (size_t i = 0; i < b.n && eq; i++) {
                const SchemataEntry *e = schemata_find(&a, b.entries[i].domain);
                eq = !e || e->mask == b.entries[i].mask;
        }
        schemata_clear(&a);
        schemata_clear(&b);
        return eq;
}

/* Only the domains the file has now are written: the kernel refuses the whole line for a domain that
 * went offline (a journalled original may name one), and leaves the domains a line omits as they are. */
static int schemata_write(SettingContext *ctx, const char *object, const char *value)
{
        _cleanup_free_ char *cur = NULL, *line = NULL;
        Schemata want = {}, have = {};
        size_t n = 0;
        int r;

        r = schemata_parse(value, &want);
        if (r < 0)
                return r;
        if (schemata_read(ctx, object, value, &cur) >= 0 && schemata_parse(cur, &have) >= 0) {
                for (size_t i = 0; i < want.n; i++)
                        if (schemata_find(&have, want.entries[i].domain))
                                want.entries[n++] = want.entries[i];
                want.n = n;
        }
        schemata_clear(&have);
        if (want.n == 0) {
                schemata_clear(&want);
                return 0;
        }
        line = schemata_format(&want);
        schemata_clear(&want);
        free(cur);
        cur = xasprintf("%s\n", line);
        return sys_write(object, cur);
}

const SettingKind setting_kind_schemata = {
    .name = "schemata",
    .read = schemata_read,
    .write = schemata_write,
    .equal = schemata_equal,
};
