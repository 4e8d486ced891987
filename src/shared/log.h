/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <syslog.h>

#include "shared/util.h"

/* Logging goes to the journal when stderr is connected to it (systemd sets $JOURNAL_STREAM), otherwise
 * to stderr. Library helpers in src/shared and src/core do not log; the binaries do. */
void log_setup(const char *ident);
void log_set_max_level(int level);

/* Logs and returns -abs(error), so a caller can write "return log_error_errno(r, ...)". %m in fmt is
 * replaced by strerror(error). About one object a tuner sets (a setting, a device): the line names both, and
 * in the journal they are fields of their own, RTCTL_TUNER= and RTCTL_OBJECT=, with ERRNO= when error is not
 * 0, so that `journalctl -u rtctld RTCTL_TUNER=irq` finds them. tuner or object may be NULL. */
int log_object_internal(int level, int error, const char *tuner, const char *object, const char *file,
                        int line, const char *func, const char *fmt, ...) _printf_(8, 9);

#define log_full_errno(level, error, ...)                                                                   \
        log_object_internal(level, error, NULL, NULL, __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_object(level, error, tuner, object, ...)                                                        \
        log_object_internal(level, error, tuner, object, __FILE__, __LINE__, __func__, __VA_ARGS__)
#define log_debug(...)            log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)             log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)           log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...)          log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)            log_full_errno(LOG_ERR, 0, __VA_ARGS__)
#define log_debug_errno(e, ...)   log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_ERR, e, __VA_ARGS__)
