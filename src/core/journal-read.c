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
 * It is read entry by entry, and a bad entry costs that entry. */
typedef struct Loader {
        Journal *j;
        const char *buf;
        size_t size;
        size_t n_entries; /* entries met so far: messages number them from 1 */
        bool damaged;     /* not as the daemon wrote it: keep a copy, rewrite on the next save */
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

/* Member key of object o when it is a string fit to use, else NULL and, if asked, why not. */
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
                if (strlen(s) == len && len <= max)
                        return s;
                problem = strlen(s) != len ? xasprintf("its %s has a NUL byte", key)
                                           : xasprintf("its %s is %zu bytes long", key, len);
        }
        if (ret_problem)
                *ret_problem = problem;
        else
                free(problem);
        return NULL;
}

static bool object_name_valid(const char *s)
{
        return s[0] == '/' || startswith(s, "systemd:");
}

/* Keeps one entry, or records why its original is lost: by object where the entry names one. */
static void load_entry(Loader *l, json_object *e, size_t number)
{
        _cleanup_free_ char *problem = NULL;
        const char *object = NULL, *name, *original = NULL, *tuner;
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
                original = string_member(e, "original", ORIGINAL_MAX, &problem);
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
                journal_append(l->j, kind, tuner, object, original);
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
                journal_add_loss(l->j, NULL, xstrdup("journal unreadable: any originals it held are lost"));
                return;
        }
        /* Trailing garbage: the journal before it is whole. */
        if (end < l->size && !blank(l->buf + end, l->size - end))
                l->damaged = true;
        problem = format_problem(root);
        if (problem) {
                l->damaged = true;
                journal_add_loss(
                    l->j, NULL,
                    xasprintf("journal is not in rtctl's format (%s): any originals it held are lost",
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

int journal_read(Journal *j, bool *ret_damaged, char **ret_error)
{
        _cleanup_free_ char *buf = NULL;
        Loader l = {.j = j};
        size_t size;
        int r;

        *ret_damaged = false;
        r = read_full_file(journal_path(j), &buf, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                *ret_error = xasprintf("Cannot read the journal %s: %s", journal_path(j), strerror(-r));
                return r;
        }
        l.buf = buf;
        l.size = size;
        load_text(&l);
        if (!l.damaged)
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
