/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <string.h>
#include <unistd.h>

/* Preconditions are assert()s (not the errors a caller can cause, which are return values), and they stay
 * in every build: a broken precondition stops the daemon where it broke rather than somewhere later. */
#ifdef NDEBUG
#error "rtctl is built without NDEBUG (meson's b_ndebug=false): its assert()s state preconditions"
#endif

#define _cleanup_(f)    __attribute__((cleanup(f)))
#define _printf_(a, b)  __attribute__((format(printf, a, b)))
#define ELEMENTSOF(x)   (sizeof(x) / sizeof((x)[0]))
#define streq(a, b)     (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)
#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif
#ifndef MAX
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#endif

static inline void freep(void *p)
{
        free(*(void **)p);
}
static inline void closep(int *fd)
{
        if (*fd >= 0)
                close(*fd);
}
static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}
#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Hand a pointer over to the caller and forget it here, so a cleanup attribute does not free it. */
#define TAKE_PTR(p)                                                                                         \
        ({                                                                                                  \
                __typeof__(p) _p_ = (p);                                                                    \
                (p) = NULL;                                                                                 \
                _p_;                                                                                        \
        })

static inline bool streq_ptr(const char *a, const char *b)
{
        return a && b ? streq(a, b) : a == b;
}

static inline bool isempty(const char *s)
{
        return !s || !*s;
}

static inline const char *strempty(const char *s)
{
        return s ?: "";
}

static inline const char *strna(const char *s)
{
        return s ? s : "n/a";
}

const char *startswith(const char *s, const char *prefix);
bool endswith(const char *s, const char *suffix);
char *strstrip(char *s);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);
void *xmalloc0(size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* realloc(p, n * size) with the multiplication checked: an overflow aborts, as running out of memory does.
 * For an array grown to a size known in advance. */
void *xreallocarray(void *p, size_t n, size_t size);
/* Makes room for need elements of size bytes in *p, which has room for *allocated: grows to twice need,
 * so appending n elements one at a time copies O(n) of them, not O(n^2). Aborts when memory runs out or
 * need elements of size bytes do not fit in a size_t (a bug, not input to recover from). Returns *p. */
void *greedy_realloc(void **p, size_t *allocated, size_t need, size_t size);
#define GREEDY_REALLOC(array, allocated, need)                                                              \
        ((__typeof__(array))greedy_realloc((void **)&(array), &(allocated), (need), sizeof((array)[0])))
/* Text from someone else (a D-Bus caller, a device, a file) fit to show on one line: text_printable()
 * says whether s is well-formed UTF-8 free of control characters (C0, DEL, C1), line and paragraph
 * separators and bidirectional controls; text_escape() writes each byte of anything else, and every
 * backslash, as \xNN, so a newline cannot start a forged line (in a log, systemd's STATUS=, a table) nor
 * ESC drive a terminal, and no caller can write text that reads as an escape.
 * text_escape_n() escapes the first n bytes at most. */
bool text_printable(const char *s);
char *text_escape(const char *s);
char *text_escape_n(const char *s, size_t n);
/* As text_escape(), but a backslash stays as it is: for text that may already hold escapes (a log line). */
char *text_escape_controls(const char *s);
/* How many of s's bytes fit in max without splitting a UTF-8 character: strlen(s) when all do. */
size_t utf8_cut(const char *s, size_t max);
/* What a message may echo of someone else's text: s itself up to ECHO_MAX bytes, else its first
 * ECHO_MAX bytes (cut at a UTF-8 character boundary) and "...(N bytes)"; escaped as text_escape_controls()
 * does. */
#define ECHO_MAX 64
char *echo_text(const char *s);
/* NULL when g is a well-formed fnmatch(3) pattern, else why not: a '[' without its ']', or a trailing
 * backslash. fnmatch() takes either as a literal character, so such a pattern quietly matches nothing
 * that was meant. */
char *glob_error(const char *g);

/* A NULL-terminated vector of strings. */
void strv_free(char **l);
static inline void strv_freep(char ***l)
{
        strv_free(*l);
}
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *l);
int strv_push(char ***l, char *s); /* takes s */
/* strv_push for a vector built only by strv_append, whose length is *n: for long ones. Takes s. */
void strv_append(char ***l, size_t *n, char *s);
bool strv_contains(char *const *l, const char *s);
char **strv_split(const char *s, const char *separators);

/* Parse an unsigned decimal, rejecting signs, trailing junk and overflow. */
/* A scheduling policy as the profiles spell it ("fifo", "rr", "other", "batch", "idle", "deadline"),
 * SCHED_RESET_ON_FORK ignored; "?" for anything else, a failed sched_getscheduler() included. */
const char *sched_policy_name(int policy);

int safe_atou(const char *s, unsigned *ret);
int safe_atoi(const char *s, int *ret);

int read_full_file(const char *path, char **ret, size_t *ret_size);
/* A profile or rtctl.conf: only a regular file (never waits on a FIFO, never reads /dev/zero), at most max
 * bytes; an error names the file and what was wrong. */
#define CONFIG_FILE_MAX (1024 * 1024)
int read_config_file(const char *path, size_t max, char **ret, size_t *ret_size, char **ret_error);
/* Writes all of data, retrying short writes and EINTR. */
int write_all(int fd, const void *data, size_t size);
/* Writes via a temporary file and rename(2), so readers see the old or the new content, never half.
 * durable: fsync before the rename, for files that must survive a power loss. */
int write_file_atomic(const char *path, const char *content, bool durable);
/* Creates path holding size bytes of data; -EEXIST when the name is taken: never replaces a file. */
int write_file_new(const char *path, const void *data, size_t size);
int mkdir_p(const char *path, mode_t mode);

uint64_t now_usec(int clock);
