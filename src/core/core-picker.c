/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <inttypes.h>

#include "core/core-picker.h"

static const char *const preference_names[] = {
    [CORE_PREFER_FAST] = "fast",
    [CORE_PREFER_EFFICIENT] = "efficient",
    [CORE_PREFER_CACHE] = "cache",
};

const char *core_preference_to_string(CorePreference p)
{
        return preference_names[p];
}

int core_preference_from_string(const char *s, CorePreference *ret)
{
        for (size_t i = 0; i < sizeof(preference_names) / sizeof(preference_names[0]); i++)
                if (streq(s, preference_names[i])) {
                        *ret = (CorePreference)i;
                        return 0;
                }
        return -EINVAL;
}

/* A slower tier starts where a CPU's performance is more than 15% below the next faster CPU's: far
 * enough apart for E-cores (about 60% of a P-core) and LITTLE cores, close enough that the preferred-core
 * ranking AMD reports in highest_perf (a few percent a step) does not split one kind of core. */
#define TIER_GAP_PERCENT 85

static unsigned cpu_speed(const CpuInfo *c, int source)
{
        return source == 0 ? c->capacity : source == 1 ? c->highest_perf : c->max_freq_khz;
}

static int cmp_unsigned_desc(const void *a, const void *b)
{
        unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
        return x < y ? 1 : x > y ? -1 : 0;
}

int *cores_tiers(const Topology *t, unsigned *ret_n_tiers)
{
        assert(t);

        int *tiers = xmalloc0(sizeof(int) * (t->n_cpus ? t->n_cpus : 1));
        _cleanup_free_ unsigned *speeds = NULL, *sorted_tier = NULL;
        unsigned n_tiers = 1, n = 0;
        int source = -1;

        if (t->hybrid) {
                for (unsigned c = 0; c < t->n_cpus; c++)
                        if (t->cpus[c].type == CORE_TYPE_EFFICIENT) {
                                tiers[c] = 1;
                                n_tiers = 2;
                        }
                goto done;
        }

        /* The first measure every online CPU reports. */
        for (int s = 0; s < 3 && source < 0; s++) {
                bool all = !cpuset_empty(t->online);
                FOREACH_CPU (c, t->online)
                        if (cpu_speed(&t->cpus[c], s) == 0)
                                all = false;
                if (all)
                        source = s;
        }
        if (source < 0)
                goto done;

        speeds = xmalloc0(sizeof(unsigned) * t->n_cpus);
        FOREACH_CPU (c, t->online)
                speeds[n++] = cpu_speed(&t->cpus[c], source);
        qsort(speeds, n, sizeof(unsigned), cmp_unsigned_desc);
        /* The tier at each place of the sorted speeds, fastest first. */
        sorted_tier = xmalloc0(sizeof(unsigned) * n);
        for (unsigned i = 1; i < n; i++)
                sorted_tier[i] = sorted_tier[i - 1] +
                                 ((uint64_t)speeds[i] * 100 < (uint64_t)speeds[i - 1] * TIER_GAP_PERCENT);
        n_tiers = sorted_tier[n - 1] + 1;
        for (unsigned c = 0; c < t->n_cpus; c++) {
                unsigned v = cpu_speed(&t->cpus[c], source), lo = 0, hi = n;

                if (v == 0)
                        continue;
                /* The last place whose speed is v or more: v's tier. */
                while (lo < hi) {
                        unsigned mid = (lo + hi) / 2;
                        if (speeds[mid] >= v)
                                lo = mid + 1;
                        else
                                hi = mid;
                }
                tiers[c] = lo > 0 ? (int)sorted_tier[lo - 1] : 0;
        }
done:
        if (ret_n_tiers)
                *ret_n_tiers = n_tiers;
        return tiers;
}

typedef struct Core {
        CpuSet *cpus; /* its present CPUs */
        int top;      /* its highest present CPU */
        int llc;
        int cluster;
        int tier; /* its slowest CPU's */
} Core;

typedef struct Llc {
        int id;
        unsigned ordinal; /* LLC 0, 1, ... in CPU order, as status names them */
        int top;          /* its highest present CPU */
        uint64_t bytes;
        bool housekeeping; /* CPU 0's, or unknown (CPUs offline since boot): never preferred */
} Llc;

typedef struct Choice {
        Core *cores;
        size_t n_cores;
        Llc *llcs;
        size_t n_llcs;
        unsigned n_tiers;
} Choice;

static void choice_clear(Choice *ch)
{
        for (size_t i = 0; i < ch->n_cores; i++)
                cpuset_free(ch->cores[i].cpus);
        free(ch->cores);
        free(ch->llcs);
}

static int cmp_core_top_desc(const void *a, const void *b)
{
        return ((const Core *)b)->top - ((const Core *)a)->top;
}

static Llc *llc_of(Choice *ch, int id)
{
        for (size_t i = 0; i < ch->n_llcs; i++)
                if (ch->llcs[i].id == id)
                        return &ch->llcs[i];
        return NULL;
}

/* Every present core but CPU 0's, highest first, and every LLC with a present CPU. */
static void choice_build(const Topology *t, Choice *ch)
{
        _cleanup_free_ int *tiers = cores_tiers(t, &ch->n_tiers);
        _cleanup_free_ int *index = xmalloc0(sizeof(int) * t->n_cpus);
        int cpu0_core = t->cpus[0].core >= 0 ? t->cpus[0].core : 0;

        ch->cores = xmalloc0(sizeof(Core) * t->n_cpus);
        ch->llcs = xmalloc0(sizeof(Llc) * t->n_cpus);
        for (unsigned c = 0; c < t->n_cpus; c++)
                index[c] = -1;
        FOREACH_CPU (c, t->present) {
                const CpuInfo *ci = &t->cpus[c];
                int key = ci->core >= 0 ? ci->core : c;
                Llc *l = llc_of(ch, ci->llc);

                if (!l) {
                        l = &ch->llcs[ch->n_llcs++];
                        *l = (Llc){.id = ci->llc, .housekeeping = ci->llc < 0 || ci->llc == t->cpus[0].llc};
                }
                l->top = c;
                if (ci->llc_bytes > l->bytes)
                        l->bytes = ci->llc_bytes;

                if (key == cpu0_core || c == 0)
                        continue;
                if (index[key] < 0) {
                        index[key] = (int)ch->n_cores++;
                        ch->cores[index[key]] = (Core){.cpus = cpuset_new(t->n_cpus),
                                                       .llc = ci->llc,
                                                       .cluster = ci->cluster,
                                                       .tier = tiers[c]};
                }
                Core *core = &ch->cores[index[key]];
                cpuset_add(core->cpus, (unsigned)c);
                core->top = c;
                if (tiers[c] > core->tier)
                        core->tier = tiers[c];
        }
        qsort(ch->cores, ch->n_cores, sizeof(Core), cmp_core_top_desc);

        /* LLC ids are the lowest CPU of each, so counting smaller ids gives the CPU order. */
        for (size_t i = 0; i < ch->n_llcs; i++)
                for (size_t k = 0; k < ch->n_llcs; k++)
                        if (ch->llcs[k].id >= 0 && ch->llcs[k].id < ch->llcs[i].id)
                                ch->llcs[i].ordinal++;
}

static int cmp_llc(const void *a, const void *b, void *userdata)
{
        const Llc *x = a, *y = b;
        const CorePreference *pref = userdata;

        if (*pref == CORE_PREFER_CACHE && x->bytes != y->bytes)
                return x->bytes < y->bytes ? 1 : -1;
        if (x->housekeeping != y->housekeeping)
                return x->housekeeping ? 1 : -1;
        return y->top - x->top;
}

static unsigned count_cores(const Choice *ch, int llc, int tier)
{
        unsigned n = 0;

        for (size_t i = 0; i < ch->n_cores; i++)
                if (ch->cores[i].llc == llc && ch->cores[i].tier == tier)
                        n++;
        return n;
}

/* The n highest cores of the LLC and tier; all from one cluster (a shared L2) when one has room. */
static CpuSet *take_cores(const Topology *t, const Choice *ch, int llc, int tier, unsigned n)
{
        CpuSet *pick = cpuset_new(t->n_cpus);
        int cluster = -1;
        unsigned got = 0;

        for (size_t i = 0; i < ch->n_cores && n > 1 && cluster < 0; i++) {
                const Core *c = &ch->cores[i];
                unsigned same = 0;

                if (c->llc != llc || c->tier != tier || c->cluster < 0)
                        continue;
                for (size_t k = 0; k < ch->n_cores; k++)
                        if (ch->cores[k].llc == llc && ch->cores[k].tier == tier &&
                            ch->cores[k].cluster == c->cluster)
                                same++;
                if (same >= n)
                        cluster = c->cluster;
        }
        for (size_t i = 0; i < ch->n_cores && got < n; i++) {
                const Core *c = &ch->cores[i];

                if (c->llc != llc || c->tier != tier || (cluster >= 0 && c->cluster != cluster))
                        continue;
                cpuset_or(pick, c->cpus);
                got++;
        }
        return pick;
}

static const char *tier_name(const Topology *t, unsigned n_tiers, int tier)
{
        if (t->hybrid)
                return tier == 0 ? "P-cores" : "E-cores";
        if (n_tiers == 1)
                return "cores";
        return tier == 0 ? "fastest cores" : "slower cores";
}

static char *format_size(uint64_t bytes)
{
        if (bytes >= (1 << 20) && bytes % (1 << 20) == 0)
                return xasprintf(" (%" PRIu64 " MB)", bytes >> 20);
        if (bytes > 0)
                return xasprintf(" (%" PRIu64 " KB)", bytes >> 10);
        return xstrdup("");
}

static char *explain(const Topology *t, const Choice *ch, CorePreference pref, const CpuSet *pick,
                     const Llc *llc, int tier, int wanted_tier, unsigned n)
{
        _cleanup_free_ char *cpus = cpuset_format_list(pick), *size = format_size(llc->bytes);
        _cleanup_free_ char *where = NULL, *fallback = NULL;
        _cleanup_free_ char *largest = NULL, *in = NULL;
        const Llc *hk = NULL;
        uint64_t max_bytes = 0;
        unsigned n_known = 0;

        for (size_t i = 0; i < ch->n_llcs; i++) {
                if (ch->llcs[i].id < 0)
                        continue;
                n_known++;
                if (ch->llcs[i].id == t->cpus[0].llc)
                        hk = &ch->llcs[i];
                if (ch->llcs[i].bytes > max_bytes)
                        max_bytes = ch->llcs[i].bytes;
        }
        if (pref != CORE_PREFER_CACHE)
                largest = xstrdup("");
        else if (llc->bytes == max_bytes)
                largest = xstrdup(", the largest last-level cache");
        else
                largest = xasprintf(", the largest last-level cache with %u free cores", n);
        if (n_known < 2 || !hk || llc->id < 0)
                where = xstrdup("");
        else if (!llc->housekeeping)
                where = xasprintf("%s, away from housekeeping's LLC %u", largest, hk->ordinal);
        else if (pref == CORE_PREFER_CACHE)
                where = xasprintf("%s, shared with housekeeping", largest);
        else
                where = xasprintf(", shared with housekeeping: no other LLC has %u such cores", n);
        if (tier != wanted_tier)
                fallback = xasprintf("; no LLC has %u %s besides CPU 0's", n,
                                     tier_name(t, ch->n_tiers, wanted_tier));
        in = llc->id >= 0 ? xasprintf(" in LLC %u%s", llc->ordinal, size) : xstrdup("");
        return xasprintf("%s on CPUs %s%s%s%s", tier_name(t, ch->n_tiers, tier), cpus, in, where,
                         strempty(fallback));
}

int cores_pick(const Topology *t, unsigned n, CorePreference pref, CpuSet **ret, char **ret_reason,
               char **ret_error)
{
        Choice ch = {};
        int r = -EINVAL;

        assert(t);

        if (t->n_cpus == 0) {
                *ret_error = xasprintf("auto:%u: this machine lists no CPUs", n);
                return -EINVAL;
        }
        choice_build(t, &ch);
        qsort_r(ch.llcs, ch.n_llcs, sizeof(Llc), cmp_llc, &pref);

        /* The fast and efficient rules choose the core type first, the cache rule the LLC first. */
        unsigned outer = pref == CORE_PREFER_CACHE ? ch.n_llcs : ch.n_tiers;
        unsigned inner = pref == CORE_PREFER_CACHE ? ch.n_tiers : ch.n_llcs;
        int first_tier = pref == CORE_PREFER_EFFICIENT ? (int)ch.n_tiers - 1 : 0;
        for (unsigned o = 0; o < outer && r < 0; o++)
                for (unsigned i = 0; i < inner && r < 0; i++) {
                        unsigned ti = pref == CORE_PREFER_CACHE ? i : o;
                        const Llc *llc = &ch.llcs[pref == CORE_PREFER_CACHE ? o : i];
                        int tier = pref == CORE_PREFER_EFFICIENT ? (int)(ch.n_tiers - 1 - ti) : (int)ti;

                        if (count_cores(&ch, llc->id, tier) < n)
                                continue;
                        *ret = take_cores(t, &ch, llc->id, tier, n);
                        if (ret_reason)
                                *ret_reason = explain(t, &ch, pref, *ret, llc, tier, first_tier, n);
                        r = 0;
                }
        if (r < 0)
                *ret_error =
                    xasprintf("auto:%u: no last-level cache group has %u whole cores besides CPU 0's", n, n);
        choice_clear(&ch);
        return r;
}
