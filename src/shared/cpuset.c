/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>

#include "shared/cpuset.h"

#define BITS_PER_WORD (sizeof(unsigned long) * CHAR_BIT)
#define WORDS(size)   (((size) + BITS_PER_WORD - 1) / BITS_PER_WORD)

CpuSet *cpuset_new(unsigned size)
{
        CpuSet *s = xmalloc0(sizeof(CpuSet) + WORDS(size) * sizeof(unsigned long));
        s->size = size;
        return s;
}

CpuSet *cpuset_dup(const CpuSet *s)
{
        assert(s);

        CpuSet *c = cpuset_new(s->size);
        memcpy(c->bits, s->bits, WORDS(s->size) * sizeof(unsigned long));
        return c;
}

void cpuset_free(CpuSet *s)
{
        free(s);
}

/* cpuset_add, cpuset_has and cpuset_next state no assert(s): they are the innermost loop of an IRQ
 * placement (hundreds of millions of calls on a 1,024-CPU machine), where the check cost 1.3% of a whole
 * pass, and a NULL s faults on the next line anyway. */
void cpuset_add(CpuSet *s, unsigned cpu)
{
        if (cpu < s->size)
                s->bits[cpu / BITS_PER_WORD] |= 1UL << (cpu % BITS_PER_WORD);
}

bool cpuset_has(const CpuSet *s, unsigned cpu)
{
        return cpu < s->size && (s->bits[cpu / BITS_PER_WORD] >> (cpu % BITS_PER_WORD)) & 1;
}

unsigned cpuset_count(const CpuSet *s)
{
        unsigned n = 0;

        assert(s);

        for (size_t i = 0; i < WORDS(s->size); i++)
                n += (unsigned)__builtin_popcountl(s->bits[i]);
        return n;
}

bool cpuset_empty(const CpuSet *s)
{
        assert(s);

        for (size_t i = 0; i < WORDS(s->size); i++)
                if (s->bits[i])
                        return false;
        return true;
}

/* Sets of different sizes compare by their members. */
static unsigned long word(const CpuSet *s, size_t i)
{
        return i < WORDS(s->size) ? s->bits[i] : 0;
}

bool cpuset_equal(const CpuSet *a, const CpuSet *b)
{
        assert(a);
        assert(b);

        for (size_t i = 0; i < MAX(WORDS(a->size), WORDS(b->size)); i++)
                if (word(a, i) != word(b, i))
                        return false;
        return true;
}

bool cpuset_subset(const CpuSet *a, const CpuSet *of)
{
        assert(a);

        for (size_t i = 0; i < WORDS(a->size); i++)
                if (a->bits[i] & ~word(of, i))
                        return false;
        return true;
}

bool cpuset_intersects(const CpuSet *a, const CpuSet *b)
{
        assert(a);

        for (size_t i = 0; i < WORDS(a->size); i++)
                if (a->bits[i] & word(b, i))
                        return true;
        return false;
}

int cpuset_next(const CpuSet *s, int after)
{
        unsigned cpu = (unsigned)(after + 1);

        while (cpu < s->size) {
                unsigned long w = s->bits[cpu / BITS_PER_WORD] >> (cpu % BITS_PER_WORD);
                if (w) {
                        cpu += (unsigned)__builtin_ctzl(w);
                        return cpu < s->size ? (int)cpu : -1;
                }
                cpu = (cpu / BITS_PER_WORD + 1) * BITS_PER_WORD;
        }
        return -1;
}

void cpuset_or(CpuSet *s, const CpuSet *other)
{
        assert(s);

        for (size_t i = 0; i < WORDS(s->size); i++)
                s->bits[i] |= word(other, i);
        /* Bits of other beyond s->size cannot be held; callers size sets to the machine. */
}

void cpuset_and(CpuSet *s, const CpuSet *other)
{
        assert(s);

        for (size_t i = 0; i < WORDS(s->size); i++)
                s->bits[i] &= word(other, i);
}

void cpuset_andnot(CpuSet *s, const CpuSet *other)
{
        assert(s);

        for (size_t i = 0; i < WORDS(s->size); i++)
                s->bits[i] &= ~word(other, i);
}

_printf_(3, 4) static int fail(char **ret_error, int r, const char *fmt, ...)
{
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        abort();
                va_end(ap);
        }
        return r;
}

static int parse_cpu_number(const char **p, unsigned *ret)
{
        unsigned long v = 0;

        if (!isdigit((unsigned char)**p))
                return -EINVAL;
        while (isdigit((unsigned char)**p)) {
                v = v * 10 + (unsigned long)(**p - '0');
                if (v > CPUSET_MAX_CPUS * 16UL)
                        return -ERANGE;
                (*p)++;
        }
        *ret = (unsigned)v;
        return 0;
}

/* " ('ITEM')": the item of a CPU list at p, up to its comma, as much as echo_text() shows. */
static void item_detail(char *detail, size_t size, const char *item)
{
        _cleanup_free_ char *it = xstrndup(item, strcspn(item, ","));
        _cleanup_free_ char *shown = echo_text(it);

        snprintf(detail, size, " ('%s')", shown);
}

int cpuset_parse_list(const char *s, unsigned size, CpuSet **ret, char **ret_error)
{
        _cleanup_cpuset_ CpuSet *set = NULL;
        const char *p = s;
        char detail[128];
        _cleanup_free_ char *shown = NULL;

        assert(ret);

        if (isempty(s))
                return fail(ret_error, -EINVAL, "CPU list '%s' is empty%s", "", "");

        shown = echo_text(s); /* what the messages show of s: it may be anyone's input */
        set = cpuset_new(size);
        for (;;) {
                const char *item = p;
                unsigned lo, hi;

                if (*p == ',' || *p == 0)
                        return fail(ret_error, -EINVAL, "CPU list '%s' has an empty item%s", shown, "");
                if (*p == '-')
                        return fail(ret_error, -EINVAL, "CPU list '%s': negative CPU numbers do not exist%s",
                                    shown, "");
                if (parse_cpu_number(&p, &lo) < 0) {
                        item_detail(detail, sizeof detail, item);
                        return fail(ret_error, -EINVAL, "CPU list '%s' is not a list of CPU numbers%s",
                                    shown, detail);
                }
                hi = lo;
                if (*p == '-') {
                        p++;
                        if (parse_cpu_number(&p, &hi) < 0) {
                                item_detail(detail, sizeof detail, item);
                                return fail(ret_error, -EINVAL, "CPU list '%s' has a malformed range%s",
                                            shown, detail);
                        }
                        if (hi < lo) {
                                snprintf(detail, sizeof detail, "%u-%u", lo, hi);
                                return fail(ret_error, -EINVAL, "CPU list '%s': range %s runs backwards",
                                            shown, detail);
                        }
                }
                if (*p != ',' && *p != 0) {
                        item_detail(detail, sizeof detail, item);
                        return fail(ret_error, -EINVAL, "CPU list '%s' is not a list of CPU numbers%s",
                                    shown, detail);
                }
                if (hi >= size) {
                        /* At the kernel's limit the size says nothing about this machine. */
                        if (size >= CPUSET_MAX_CPUS)
                                snprintf(detail, sizeof detail, "%u, but Linux numbers CPUs 0-%u at most",
                                         hi, size - 1);
                        else
                                snprintf(detail, sizeof detail, "%u, but this machine's CPUs are 0-%u", hi,
                                         size - 1);
                        return fail(ret_error, -ERANGE, "CPU list '%s' names CPU %s", shown, detail);
                }
                for (unsigned c = lo; c <= hi; c++)
                        cpuset_add(set, c);
                if (*p == 0)
                        break;
                p++;
        }
        *ret = TAKE_PTR(set);
        return 0;
}

char *cpuset_format_list(const CpuSet *s)
{
        assert(s);

        size_t alloc = 64, len = 0;
        char *buf = xmalloc0(alloc);
        int cpu = cpuset_next(s, -1);

        while (cpu >= 0) {
                int end = cpu;
                char item[32];
                int n;

                while (cpuset_has(s, (unsigned)end + 1))
                        end++;
                n = end == cpu ? snprintf(item, sizeof item, "%s%d", len ? "," : "", cpu)
                               : snprintf(item, sizeof item, "%s%d-%d", len ? "," : "", cpu, end);
                GREEDY_REALLOC(buf, alloc, len + (size_t)n + 1);
                memcpy(buf + len, item, (size_t)n + 1);
                len += (size_t)n;
                cpu = cpuset_next(s, end);
        }
        return buf;
}

static int hexval(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char)tolower((unsigned char)c);
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

int cpuset_parse_mask(const char *s, unsigned size, CpuSet **ret, char **ret_error)
{
        _cleanup_cpuset_ CpuSet *set = NULL;
        size_t len, nwords = 1;
        const char *end;
        unsigned bit = 0;
        char detail[64];

        assert(ret);

        if (isempty(s))
                return fail(ret_error, -EINVAL, "CPU mask '%s' is empty%s", "", "");
        len = strlen(s);
        while (len > 0 && s[len - 1] == '\n')
                len--;
        for (size_t i = 0; i < len; i++)
                if (s[i] == ',')
                        nwords++;

        set = cpuset_new(size);
        /* Walk the words from the last (CPUs 0-31) to the first. */
        end = s + len;
        for (size_t w = 0; w < nwords; w++) {
                const char *start = end;
                while (start > s && start[-1] != ',')
                        start--;
                if (start == end || end - start > 8)
                        return fail(ret_error, -EINVAL,
                                    "CPU mask '%s' has a %s word; words are 1-8 hex digits", s,
                                    start == end ? "empty" : "too long a");
                for (const char *c = end - 1; c >= start; c--) {
                        int v = hexval(*c);
                        if (v < 0)
                                return fail(ret_error, -EINVAL, "CPU mask '%s' is not hexadecimal%s", s, "");
                        for (int b = 0; b < 4; b++, bit++)
                                if (v & (1 << b)) {
                                        if (bit >= size) {
                                                snprintf(detail, sizeof detail,
                                                         "%u, but this machine's CPUs are 0-%u", bit,
                                                         size - 1);
                                                return fail(ret_error, -ERANGE, "CPU mask '%s' names CPU %s",
                                                            s, detail);
                                        }
                                        cpuset_add(set, bit);
                                }
                }
                bit = (unsigned)(w + 1) * 32;
                end = start > s ? start - 1 : s;
        }
        *ret = TAKE_PTR(set);
        return 0;
}

char *cpuset_format_mask(const CpuSet *s)
{
        /* Like the kernel's %*pb: ceil(size/4) hex digits, a comma every 8 from the right. */
        unsigned ndigits = (s->size + 3) / 4;
        size_t alloc = ndigits + ndigits / 8 + 2, pos = 0;
        char *buf = xmalloc0(alloc);

        if (ndigits == 0)
                ndigits = 1;
        for (unsigned d = ndigits; d-- > 0;) {
                unsigned v = 0;
                for (unsigned b = 0; b < 4; b++)
                        if (cpuset_has(s, d * 4 + b))
                                v |= 1u << b;
                buf[pos++] = "0123456789abcdef"[v];
                if (d % 8 == 0 && d > 0)
                        buf[pos++] = ',';
        }
        buf[pos] = 0;
        return buf;
}
