/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <glib.h>
#include <json-c/json.h>
#include <sys/file.h>

#include "core/journal-read.h"
#include "core/tasks.h"

struct Journal {
        char *path;
        JournalScope scope;
        JournalEntry *entries;
        size_t n;
        size_t alloc;
        GHashTable *index; /* object -> position + 1 */
        JournalLoss *lost;
        size_t n_lost, lost_allocated;
        char *damaged; /* the copy of a damaged file, beside path */
        bool dirty;
};

static void entry_clear(JournalEntry *e)
{
        free(e->object);
        free(e->original);
        free(e->tuner);
}

static void reindex(Journal *j)
{
        g_hash_table_remove_all(j->index);
        for (size_t i = 0; i < j->n; i++)
                g_hash_table_insert(j->index, j->entries[i].object, GSIZE_TO_POINTER(i + 1));
}

void journal_append(Journal *j, const SettingKind *kind, const char *tuner, const char *object,
                    const char *original, unsigned long long starttime)
{
        assert(j);

        if (j->n == j->alloc) {
                GREEDY_REALLOC(j->entries, j->alloc, j->n + 1);
                reindex(j);
        }
        j->entries[j->n] = (JournalEntry){.kind = kind,
                                          .object = xstrdup(object),
                                          .original = xstrdup(original),
                                          .tuner = xstrdup(tuner),
                                          .starttime = starttime};
        g_hash_table_insert(j->index, j->entries[j->n].object, GSIZE_TO_POINTER(j->n + 1));
        j->n++;
}

/* Losses reach the log and the bus, which take UTF-8 only; a message that echoes a damaged journal's text
 * cut at a byte count ("%.64s") may split a character. Invalid bytes become U+FFFD. */
static char *valid_utf8(char *s)
{
        if (!s || g_utf8_validate(s, -1, NULL))
                return s;
        char *v = g_utf8_make_valid(s, -1), *r = xstrdup(v);
        g_free(v);
        free(s);
        return r;
}

void journal_add_loss(Journal *j, const char *object, char *reason)
{
        assert(j);

        GREEDY_REALLOC(j->lost, j->lost_allocated, j->n_lost + 1);
        j->lost[j->n_lost++] = (JournalLoss){.object = valid_utf8(object ? xstrdup(object) : NULL),
                                             .reason = valid_utf8(reason)};
}

void journal_set_damaged_copy(Journal *j, char *path)
{
        assert(j);

        free(j->damaged);
        j->damaged = path;
}

int journal_open(const char *path, JournalScope scope, Journal **ret, char **ret_error)
{
        Journal *j = xmalloc0(sizeof(Journal));
        bool damaged;
        int r;

        assert(path);
        assert(ret);

        j->path = xstrdup(path);
        j->scope = scope;
        j->index = g_hash_table_new(g_str_hash, g_str_equal);
        r = journal_read(j, &damaged, ret_error);
        if (r < 0) {
                journal_free(j);
                return r;
        }
        j->dirty = damaged;
        *ret = j;
        return 0;
}

void journal_free(Journal *j)
{
        if (!j)
                return;
        for (size_t i = 0; i < j->n; i++)
                entry_clear(&j->entries[i]);
        free(j->entries);
        g_hash_table_destroy(j->index);
        journal_forget_lost(j);
        free(j->path);
        free(j);
}

const char *journal_path(const Journal *j)
{
        assert(j);

        return j->path;
}

JournalScope journal_scope(const Journal *j)
{
        assert(j);

        return j->scope;
}

size_t journal_size(const Journal *j)
{
        assert(j);

        return j->n;
}

const JournalEntry *journal_entry(const Journal *j, size_t i)
{
        assert(j);

        return i < j->n ? &j->entries[i] : NULL;
}

const JournalEntry *journal_find(const Journal *j, const char *object)
{
        assert(j);

        gpointer v = g_hash_table_lookup(j->index, object);
        return v ? &j->entries[GPOINTER_TO_SIZE(v) - 1] : NULL;
}

bool journal_object_task(const char *object, unsigned *ret_pid)
{
        unsigned pid, tid;
        int n = -1;

        if (sscanf(object, "/proc/%u/task/%u/%n", &pid, &tid, &n) == 2 && n > 0) {
                *ret_pid = tid;
                return true;
        }
        n = -1;
        if (sscanf(object, "/proc/%u/%n", &pid, &n) == 1 && n > 0) {
                *ret_pid = pid;
                return true;
        }
        return false;
}

bool journal_entry_task_gone(const JournalEntry *e)
{
        TaskInfo t;
        unsigned pid;

        if (!journal_object_task(e->object, &pid))
                return false;
        return e->starttime == 0 || task_info(pid, &t) < 0 || t.starttime != e->starttime;
}

void journal_remember(Journal *j, const SettingKind *kind, const char *tuner, const char *object,
                      const char *original)
{
        unsigned long long starttime = 0;
        unsigned pid;
        TaskInfo t;

        assert(j);
        assert(kind);
        assert(object);

        if (journal_find(j, object))
                return;
        if (journal_object_task(object, &pid) && task_info(pid, &t) >= 0)
                starttime = t.starttime;
        journal_append(j, kind, tuner, object, original, starttime);
        j->dirty = true;
}

bool journal_covered(const Journal *j, const char *object)
{
        assert(j);
        assert(object);

        _cleanup_free_ char *prefix = xstrdup(object);
        char *slash;

        while ((slash = strrchr(prefix, '/')) && slash != prefix) {
                const JournalEntry *e;

                *slash = 0;
                e = journal_find(j, prefix);
                if (e && e->kind->owns_children && streq(e->original, "absent"))
                        return true;
        }
        return false;
}

int journal_save(Journal *j)
{
        json_object *root, *entries;
        int r;

        assert(j);

        if (!j->dirty)
                return 0;
        if (j->n == 0 && j->n_lost == 0) {
                if (unlink(j->path) < 0 && errno != ENOENT)
                        return -errno;
                j->dirty = false;
                return 0;
        }
        root = json_object_new_object();
        entries = json_object_new_array_ext((int)j->n);
        json_object_object_add(root, "version", json_object_new_int(1));
        if (j->damaged)
                json_object_object_add(root, "damaged", json_object_new_string(j->damaged));
        /* Before the entries: a journal cut off later still tells what was lost before. */
        if (j->n_lost > 0) {
                json_object *lost = json_object_new_array_ext((int)j->n_lost);
                for (size_t i = 0; i < j->n_lost; i++) {
                        json_object *l = json_object_new_object();
                        if (j->lost[i].object)
                                json_object_object_add(l, "object",
                                                       json_object_new_string(j->lost[i].object));
                        json_object_object_add(l, "reason", json_object_new_string(j->lost[i].reason));
                        json_object_array_add(lost, l);
                }
                json_object_object_add(root, "lost", lost);
        }
        for (size_t i = 0; i < j->n; i++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "kind", json_object_new_string(j->entries[i].kind->name));
                json_object_object_add(e, "tuner", json_object_new_string(j->entries[i].tuner));
                json_object_object_add(e, "object", json_object_new_string(j->entries[i].object));
                json_object_object_add(e, "original", json_object_new_string(j->entries[i].original));
                if (j->entries[i].starttime > 0) {
                        char buf[32];
                        snprintf(buf, sizeof buf, "%llu", j->entries[i].starttime);
                        json_object_object_add(e, "starttime", json_object_new_string(buf));
                }
                json_object_array_add(entries, e);
        }
        json_object_object_add(root, "entries", entries);
        /* Not fsynced: the journal must outlive the daemon, which the page cache does; a machine that
         * crashes forgets the tuned values as well, which is why the journal lives in /run. */
        r = write_file_atomic(
            j->path,
            json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE),
            false);
        json_object_put(root);
        if (r < 0)
                return r;
        j->dirty = false;
        return 0;
}

/* Drops the entries forget() picks, in one sweep and one reindex. */
static void forget_if(Journal *j, bool (*forget)(const char *object, const void *data), const void *data)
{
        size_t w = 0;

        for (size_t i = 0; i < j->n; i++) {
                if (forget(j->entries[i].object, data)) {
                        entry_clear(&j->entries[i]);
                        j->dirty = true;
                        continue;
                }
                j->entries[w++] = j->entries[i];
        }
        j->n = w;
        reindex(j);
}

static bool in_set(const char *object, const void *set)
{
        return g_hash_table_contains((GHashTable *)set, object);
}

static bool under(const char *object, const void *prefix)
{
        return startswith(object, prefix) != NULL;
}

void journal_forget_set(Journal *j, GHashTable *objects)
{
        if (g_hash_table_size(objects) > 0)
                forget_if(j, in_set, objects);
}

void journal_forget_prefix(Journal *j, const char *prefix)
{
        assert(j);
        assert(prefix);

        forget_if(j, under, prefix);
}

static bool is_object(const char *object, const void *which)
{
        return streq(object, which);
}

void journal_forget(Journal *j, const char *object)
{
        assert(j);
        assert(object);

        if (journal_find(j, object))
                forget_if(j, is_object, object);
}

size_t journal_n_lost(const Journal *j)
{
        assert(j);

        return j->n_lost;
}

const JournalLoss *journal_lost(const Journal *j, size_t i)
{
        assert(j);

        return i < j->n_lost ? &j->lost[i] : NULL;
}

char *journal_loss_message(const JournalLoss *l)
{
        assert(l);

        return l->object ? xasprintf("%s: %s", l->object, l->reason) : xstrdup(l->reason);
}

void journal_forget_lost(Journal *j)
{
        assert(j);

        if (j->n_lost == 0 && !j->damaged)
                return;
        for (size_t i = 0; i < j->n_lost; i++) {
                free(j->lost[i].object);
                free(j->lost[i].reason);
        }
        free(j->lost);
        j->lost = NULL;
        j->n_lost = j->lost_allocated = 0;
        free(j->damaged);
        j->damaged = NULL;
        j->dirty = true;
}

const char *journal_damaged_copy(const Journal *j)
{
        assert(j);

        return j->damaged;
}

int journal_lock(const char *dir, const char *who, bool wait, int *ret_fd, char **ret_holder)
{
        assert(dir);
        assert(ret_fd);

        _cleanup_free_ char *path = xasprintf("%s/journal.lock", dir), *me = NULL;
        _cleanup_close_ int fd = -EBADF;

        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) < 0) {
                int r = -errno;
                char buf[256];
                ssize_t n;

                if (r == -EWOULDBLOCK && ret_holder) {
                        n = pread(fd, buf, sizeof(buf) - 1, 0);
                        buf[MAX(n, 0)] = 0;
                        *ret_holder = n > 0 ? xstrdup(strstrip(buf)) : NULL;
                }
                return r;
        }
        me = xasprintf("%s (PID %d)\n", who, (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, me, strlen(me), 0) < 0)
                return -errno;
        *ret_fd = fd;
        fd = -EBADF;
        return 0;
}
