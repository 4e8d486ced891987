/* SPDX-License-Identifier: GPL-2.0-or-later */
/* What every libFuzzer harness shares. A harness checks what the code promises of what it accepted and
 * calls fuzz_fail() when that does not hold: libFuzzer keeps the input as a crash. */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shared/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a string, cut at its first NUL: what a file read whole, or a D-Bus string, gives. */
static inline char *fuzz_string(const uint8_t *data, size_t size)
{
        char *s = xmalloc0(size + 1);
        memcpy(s, data, size);
        return s;
}

#define fuzz_check(cond)                                                                                    \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);            \
                        abort();                                                                            \
                }                                                                                           \
        } while (0)
