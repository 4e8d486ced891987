/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <json-c/json.h>
#include <limits.h>

#include "core/journal-read.h"

/* Longer than any name or value the kernel or systemd has: such a string came from damage. */
#define OBJECT_MAX   4096
#define ORIGINAL_MAX 65536
#define WORD_MAX     64 /* a kind or tuner name */

static void json_object_putp(json_object **o)
{
        json_object_put(*o);
}
#define _cleanup_json_ _cleanup_(json_object_putp)

/* Reading a journal whatever it holds. The daemon writes it whole (JSON_C_TO_STRING_PRETTY):
 *   {"version": 1, "damaged": PATH, "lost": [{"object", "reason"}...], "entries": [{"kind", "tuner",
 *   "object", "original"}...]}
 * so every entry is a flat object of strings. What is valid JSON is read entry by entry, and a bad entry
 * costs that entry. What is not (cut off, overwritten) is salvaged: every complete flat object is read
 * where it stands, and the text between them tells what was lost. */
typedef struct Loader {
        Journal *j;
        const char *buf;
        size_t size;
        size_t n_entries;  /* entries met so far: messages number them from 1 */
        char *last_object; /* the object of the last entry met, where it names one */
        bool damaged;      /* not as the daemon wrote it: keep a copy, rewrite on the next save */
        json_tokener *flat;
        JournalCheck check;
} Loader;

static const char *type_phrase(json_object *v)
{
        switch (json_object_get_type(v)) {
        case json_type_null:
                return "null";
        case json_type_boolean:
                return "a boolean";
        case json_type_double:
        case json_type_int:
                return "a number";
        case json_type_object:
                return "an object";
        case json_type_array:
                return "an array";
        case json_type_string:
                return "a string";
        }
        return "of no JSON type";
}

/* Member key of object o when it is a string fit to use, else NULL and, if asked, why not. Fit means
 * UTF-8 as well: json-c does not check, and what the journal names goes to the log and the bus. */
static const char *string_member(json_object *o, const char *key, size_t max, char **ret_problem)
{
        json_object *v;
        const char *s;
        size_t len;
        char *problem;

        if (!json_object_object_get_ex(o, key, &v))
                problem = xasprintf("it has no %s", key);
        else if (!json_object_is_type(v, json_type_string))
                problem = xasprintf("its %s is %s, not a string", key, type_phrase(v));
        else {
                s = json_object_get_string(v);
                len = (size_t)json_object_get_string_len(v);
                if (strlen(s) == len && len <= max && g_utf8_validate(s, (gssize)len, NULL))
                        return s;
                problem = strlen(s) != len ? xasprintf("its %s has a NUL byte", key)
                          : len > max      ? xasprintf("its %s is %zu bytes long", key, len)
                                           : xasprintf("its %s is not UTF-8", key);
        }
        if (ret_problem)
                *ret_problem = problem;
        else
                free(problem);
        return NULL;
}

/* The optional start time of an entry's process: digits in a string, as the daemon writes it. */
static bool starttime_member(json_object *e, unsigned long long *ret, char **ret_problem)
{
        const char *s;
        char *end;

        if (!json_object_object_get_ex(e, "starttime", NULL))
                return true;
        s = string_member(e, "starttime", 20, ret_problem);
        if (!s)
                return false;
        errno = 0;
        *ret = strtoull(s, &end, 10);
        if (!g_ascii_isdigit(s[0]) || *end || errno != 0 || *ret == 0) {
                *ret_problem = xasprintf("its starttime '%s' is not a start time", s);
                return false;
        }
        return true;
}

static bool object_name_valid(const char *s)
{
        return s[0] == '/' || startswith(s, "systemd:") || startswith(s, "grubby:");
}

/* Keeps one entry, or records why its original is lost: by object where the entry names one. */
static void load_entry(Loader *l, json_object *e, size_t number)
{
        _cleanup_free_ char *problem = NULL;
        const char *object = NULL, *name, *original = NULL, *tuner;
        unsigned long long starttime = 0;
        const SettingKind *kind = NULL;
        const JournalEntry *first;

        if (!json_object_is_type(e, json_type_object))
                problem = xasprintf("it is %s, not an object", type_phrase(e));
        else if ((object = string_member(e, "object", OBJECT_MAX, &problem)) && !object_name_valid(object))
                problem = xasprintf("its object '%.64s' is not a kernel object", object);
        if (problem) {
                l->damaged = true;
                journal_add_loss(l->j, NULL,
                                 xasprintf("journal entry %zu: original lost: %s", number, problem));
                return;
        }
        if ((name = string_member(e, "kind", WORD_MAX, &problem)) && !(kind = setting_kind_from_name(name)))
                problem = xasprintf("unknown kind '%s'", name);
        if (kind)
                problem = journal_check_entry(&l->check, kind, object);
        if (kind && !problem)
                original = string_member(e, "original", ORIGINAL_MAX, &problem);
        if (original && (problem = journal_check_original(&l->check, kind, original)))
                original = NULL;
        if (original && !starttime_member(e, &starttime, &problem))
                original = NULL;
        if (!original) {
                l->damaged = true;
                journal_add_loss(l->j, object, xasprintf("original lost: %s", problem));
                return;
        }
        /* Not needed to restore: the tuner only decides when a profile no longer wants the object. */
        tuner = string_member(e, "tuner", WORD_MAX, NULL);
        if (!tuner) {
                l->damaged = true;
                tuner = "unknown";
        }

        first = journal_find(l->j, object);
        if (!first) {
                journal_append(l->j, kind, tuner, object, original, starttime);
                return;
        }
        /* The daemon never journals an object twice. The first entry is the older, true original, as
         * journal_remember() keeps it. */
        l->damaged = true;
        if (first->kind != kind || !streq(first->original, original))
                journal_add_loss(
                    l->j, object,
                    xasprintf("original uncertain: a later entry says '%.64s', the first entry's '%.64s' "
                              "is restored",
                              original, first->original));
}

static void load_loss(Journal *j, json_object *o)
{
        const char *object = string_member(o, "object", OBJECT_MAX, NULL);
        const char *reason = string_member(o, "reason", ORIGINAL_MAX, NULL);

        if (reason && !*reason)
                reason = NULL; /* a loss says why, or the default does */
        if (object || reason)
                journal_add_loss(j, object, xstrdup(reason ?: "original lost"));
}

static void load_tree(Loader *l, json_object *root, json_object *entries)
{
        const char *damaged = string_member(root, "damaged", PATH_MAX, NULL);
        json_object *lost;

        if (damaged)
                journal_set_damaged_copy(l->j, xstrdup(damaged));
        if (json_object_object_get_ex(root, "lost", &lost) && json_object_is_type(lost, json_type_array))
                for (size_t i = 0; i < json_object_array_length(lost); i++)
                        load_loss(l->j, json_object_array_get_idx(lost, i));
        for (size_t i = 0; i < json_object_array_length(entries); i++)
                load_entry(l, json_object_array_get_idx(entries, i), ++l->n_entries);
}

/* The text without white space, NUL bytes shown as '?': what a structure check compares. */
static char *squeeze(const char *p, size_t len)
{
        char *s = xmalloc0(len + 1), *w = s;

        for (size_t i = 0; i < len; i++)
                if (!p[i])
                        *w++ = '?';
                else if (!strchr(" \t\r\n", p[i]))
                        *w++ = p[i];
        return s;
}

/* True when p is the start of a JSON value that the end of the file cut off. */
static bool cut_off(const char *p, size_t len)
{
        json_tokener *tok = json_tokener_new();
        json_object *o;
        bool r;

        if (!tok)
                abort();
        o = json_tokener_parse_ex(tok, p, (int)MIN(len, (size_t)INT_MAX));
        r = !o && json_tokener_get_error(tok) == json_tokener_continue;
        json_object_put(o);
        json_tokener_free(tok);
        return r;
}

static const char *skip_blank(const char *p, const char *end)
{
        while (p < end && *p && strchr(" \t\r\n", *p))
                p++;
        return p;
}

static bool blank(const char *p, size_t len)
{
        return skip_blank(p, p + len) == p + len;
}

/* The object named at p in damaged text ("object": "/sys/..."), or NULL. */
static json_object *named_object(const char *p, const char *end)
{
        json_tokener *tok;
        json_object *v;
        const char *s;

        p = skip_blank(p, end);
        if (p >= end || *p != ':')
                return NULL;
        p = skip_blank(p + 1, end);
        if (p >= end || *p != '"')
                return NULL;
        tok = json_tokener_new_ex(1);
        if (!tok)
                abort();
        v = json_tokener_parse_ex(tok, p, (int)MIN((size_t)(end - p), (size_t)INT_MAX));
        json_tokener_free(tok);
        s = json_object_get_string(v);
        if (!json_object_is_type(v, json_type_string) ||
            strlen(s) != (size_t)json_object_get_string_len(v) || strlen(s) > OBJECT_MAX ||
            !g_utf8_validate(s, -1, NULL) || !object_name_valid(s)) {
                json_object_put(v);
                return NULL;
        }
        return v;
}

/* Every object named in damaged text lost its original. Returns how many there are. */
static size_t report_named(Loader *l, const char *p, size_t len)
{
        static const char key[] = "\"object\"";
        const char *end = p + len;
        size_t found = 0;

        while (p < end && (p = memmem(p, (size_t)(end - p), key, strlen(key)))) {
                _cleanup_json_ json_object *v = NULL;

                p += strlen(key);
                v = named_object(p, end);
                if (!v)
                        continue;
                journal_add_loss(l->j, json_object_get_string(v),
                                 xstrdup("original lost: its journal entry is damaged"));
                found++;
        }
        return found;
}

/* Where a stretch of text lies that is not a readable entry: what it should look like and what is said
 * of it when it does not. */
typedef enum Gap {
        GAP_HEAD,    /* before the first entry: ends with "entries": [ */
        GAP_BETWEEN, /* between two entries: a comma */
        GAP_TAIL,    /* after the last entry: ] } */
        GAP_ALL,     /* no entry at all: only "entries": [] can say that nothing was lost */
} Gap;

static bool gap_intact(Gap gap, const char *s)
{
        switch (gap) {
        case GAP_HEAD:
                return endswith(s, "\"entries\":[");
        case GAP_BETWEEN:
                return streq(s, ",");
        case GAP_TAIL:
                return startswith(s, "]}"); /* what follows a complete journal holds no entry */
        case GAP_ALL:
                return strstr(s, "\"entries\":[]");
        }
        return false;
}

/* Entries are counted as they could be read, so the object of the last one says where the damage is. */
static char *gap_message(Loader *l, Gap gap, const char *p, size_t len)
{
        _cleanup_free_ char *last = l->last_object ? xasprintf(" (%s)", l->last_object) : xstrdup("");
        const char *end = p + len;
        bool cut;

        switch (gap) {
        case GAP_HEAD:
                return xstrdup("journal damaged before entry 1: originals recorded there are lost");
        case GAP_BETWEEN:
                return xasprintf("journal damaged after entry %zu%s: originals recorded before the next "
                                 "readable entry are lost",
                                 l->n_entries, last);
        case GAP_TAIL:
                /* Cut between two entries, or inside one that has begun. */
                while (p < end && *p && strchr(", \t\r\n", *p))
                        p++;
                cut = p == end || cut_off(p, (size_t)(end - p));
                return xasprintf("journal %s after entry %zu%s: later originals lost",
                                 cut ? "truncated" : "damaged", l->n_entries, last);
        case GAP_ALL:
                p = skip_blank(l->buf, l->buf + l->size);
                cut = cut_off(p, (size_t)(l->buf + l->size - p));
                return xstrdup(
                    cut ? "journal truncated before its first entry: any originals it held are lost"
                        : "journal unreadable: any originals it held are lost");
        }
        return NULL;
}

/* Damaged text reports the objects it names. Said by position as well where it may hide more entries
 * than it names (a brace each), and always where it ends the file: what followed a cut is gone. */
static void check_gap(Loader *l, Gap gap, size_t from, size_t to)
{
        const char *p = l->buf + from;
        size_t len = to - from, named, braces = 0;
        _cleanup_free_ char *s = squeeze(p, len);

        if (gap_intact(gap, s))
                return;
        l->damaged = true;
        named = report_named(l, p, len);
        for (const char *c = s; (c = strchr(c, '{')); c++)
                braces++;
        if (named == 0 || braces > named || gap == GAP_TAIL || gap == GAP_ALL)
                journal_add_loss(l->j, NULL, gap_message(l, gap, p, len));
}

/* A flat object (one level: the shape of an entry) that starts at offset start, or NULL. */
static json_object *flat_object_at(Loader *l, size_t start, size_t *ret_end)
{
        json_object *o;

        json_tokener_reset(l->flat);
        o = json_tokener_parse_ex(l->flat, l->buf + start, (int)MIN(l->size - start, (size_t)INT_MAX));
        *ret_end = start + json_tokener_get_parse_end(l->flat);
        return o;
}

static bool has_member(json_object *o, const char *key)
{
        return json_object_object_get_ex(o, key, NULL);
}

/* Reads every flat object there is from the text, as entries from the first that looks like one. */
static void salvage(Loader *l, bool check_gaps)
{
        size_t pos = 0, prev_end = 0;
        const char *p;

        l->flat = json_tokener_new_ex(2);
        if (!l->flat)
                abort();
        while (pos < l->size && (p = memchr(l->buf + pos, '{', l->size - pos))) {
                size_t start = (size_t)(p - l->buf), end;
                _cleanup_json_ json_object *o = flat_object_at(l, start, &end);

                if (!o) {
                        pos = start + 1;
                        continue;
                }
                pos = end;
                if (l->n_entries == 0 && !has_member(o, "kind") && !has_member(o, "object") &&
                    !has_member(o, "original") && !has_member(o, "tuner")) {
                        if (has_member(o, "reason")) {
                                load_loss(l->j, o);
                                prev_end = end;
                        }
                        continue;
                }
                if (check_gaps)
                        check_gap(l, l->n_entries == 0 ? GAP_HEAD : GAP_BETWEEN, prev_end, start);
                load_entry(l, o, ++l->n_entries);
                free(l->last_object);
                l->last_object = xstrdup(string_member(o, "object", OBJECT_MAX, NULL));
                prev_end = end;
        }
        if (check_gaps)
                check_gap(l, l->n_entries == 0 ? GAP_ALL : GAP_TAIL, prev_end, l->size);
        json_tokener_free(l->flat);
        l->flat = NULL;
        free(l->last_object);
        l->last_object = NULL;
}

static char *format_problem(json_object *root)
{
        json_object *entries;

        if (!json_object_is_type(root, json_type_object))
                return xasprintf("its root is %s", type_phrase(root));
        if (!json_object_object_get_ex(root, "entries", &entries))
                return xstrdup("it has no entries");
        if (!json_object_is_type(entries, json_type_array))
                return xasprintf("its entries are %s, not an array", type_phrase(entries));
        return NULL;
}

static void load_text(Loader *l)
{
        _cleanup_json_ json_object *root = NULL;
        _cleanup_free_ char *problem = NULL;
        json_object *entries = NULL;
        json_tokener *tok;
        bool valid;
        size_t end;

        if (blank(l->buf, l->size)) {
                l->damaged = true;
                journal_add_loss(l->j, NULL, xstrdup("journal empty: any originals it held are lost"));
                return;
        }
        tok = json_tokener_new();
        if (!tok)
                abort();
        /* With the terminating NUL: a value at the very end is complete. */
        root = json_tokener_parse_ex(tok, l->buf, (int)MIN(l->size + 1, (size_t)INT_MAX));
        valid = json_tokener_get_error(tok) == json_tokener_success;
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!valid) {
                l->damaged = true;
                salvage(l, true);
                return;
        }
        /* Trailing garbage: the journal before it is whole. */
        if (end < l->size && !blank(l->buf + end, l->size - end))
                l->damaged = true;
        problem = format_problem(root);
        if (problem) {
                l->damaged = true;
                salvage(l, false);
                journal_add_loss(
                    l->j, NULL,
                    xasprintf("journal is not in rtctl's format (%s): originals not found in it are lost",
                              problem));
                return;
        }
        (void)json_object_object_get_ex(root, "entries", &entries);
        load_tree(l, root, entries);
}

/* Keeps the damaged bytes beside the journal under the first name that is free or already holds them:
 * never over an earlier copy, and not once more on each start of a daemon that fails before it saves. */
static int keep_damaged_copy(Journal *j, const char *buf, size_t size)
{
        for (unsigned i = 0; i < 1000; i++) {
                _cleanup_free_ char *path = i == 0 ? xasprintf("%s.damaged", journal_path(j))
                                                   : xasprintf("%s.damaged.%u", journal_path(j), i);
                _cleanup_free_ char *old = NULL;
                size_t old_size;
                int r;

                r = write_file_new(path, buf, size);
                if (r == -EEXIST && (read_full_file(path, &old, &old_size) < 0 || old_size != size ||
                                     memcmp(old, buf, size) != 0))
                        continue;
                if (r < 0 && r != -EEXIST)
                        return r;
                journal_set_damaged_copy(j, TAKE_PTR(path));
                return 0;
        }
        return -EEXIST;
}

bool journal_load_text(Journal *j, const char *buf, size_t size)
{
        assert(j);
        assert(buf || size == 0);

        Loader l = {.j = j, .buf = buf, .size = size, .check = {.scope = journal_scope(j)}};

        load_text(&l);
        journal_check_clear(&l.check);
        return l.damaged;
}

int journal_read(Journal *j, bool *ret_damaged, char **ret_error)
{
        _cleanup_free_ char *buf = NULL;
        size_t size;
        int r;

        assert(j);
        assert(ret_damaged);

        *ret_damaged = false;
        r = read_full_file(journal_path(j), &buf, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                *ret_error = xasprintf("Cannot read the journal %s: %s", journal_path(j), strerror(-r));
                return r;
        }
        if (!journal_load_text(j, buf, size))
                return 0;
        r = keep_damaged_copy(j, buf, size);
        if (r < 0) {
                *ret_error = xasprintf("Cannot keep a copy of the damaged journal %s: %s", journal_path(j),
                                       strerror(-r));
                return r;
        }
        *ret_damaged = true;
        return 0;
}
