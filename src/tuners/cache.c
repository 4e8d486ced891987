/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Cache partitioning through resctrl (Intel RDT CAT, AMD PQoS): [CPU] CacheWays= gives the isolated
 * CPUs L3 ways that housekeeping cannot fill. A group of ours holds the isolated CPUs (cpus_list) and
 * those ways (schemata); the default group, which everything else runs in, loses them on the caches the
 * isolated CPUs share. Everything is derived from the isolated set and the online CPUs, so the pass that
 * follows a hotplug moves the group's CPUs and ways along. */
#include "core/resctrl.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"

#define GROUP     RESCTRL_ROOT "/rtctl-isolated"
#define L3_INFO   RESCTRL_ROOT "/info/L3"
#define MOUNT_CMD "mount -t resctrl resctrl " RESCTRL_ROOT

enum {
        PHASE_GROUP,
        PHASE_WAYS,
        PHASE_CPUS,
};

typedef struct CacheConfig {
        unsigned ways;    /* a number of ways, or */
        unsigned percent; /* a share of them */
        char *where;      /* "file:line: CacheWays=value", for what only the machine can refuse */
} CacheConfig;

static void cache_free_config(void *p)
{
        CacheConfig *c = p;

        if (c)
                free(c->where);
        free(c);
}

static void *cache_parse(Conf *conf, char ***errors)
{
        ConfSection *cpu = conf_section(conf, "CPU");
        ConfKey *k = conf_key(cpu, "CacheWays"), *iso = conf_key(cpu, "Isolate");
        _cleanup_free_ char *num = NULL;
        bool percent;
        unsigned n;

        if (!k || isempty(k->value))
                return NULL;
        percent = endswith(k->value, "%");
        num = xstrndup(k->value, strlen(k->value) - (percent ? 1 : 0));
        if (safe_atou(num, &n) < 0 || (percent && n > 99)) {
                strv_push(errors, conf_key_error(k, "expected a number of L3 ways (4) or a share of them "
                                                    "from 1%% to 99%% (25%%); 0 or empty: no partition"));
                return NULL;
        }
        if (n == 0)
                return NULL;
        if (!iso || isempty(iso->value)) {
                strv_push(errors, conf_key_error(k, "cache ways go to the isolated CPUs, and this profile "
                                                    "isolates none ([CPU] Isolate=)"));
                return NULL;
        }
        CacheConfig *c = xmalloc0(sizeof(CacheConfig));
        *(percent ? &c->percent : &c->ways) = n;
        c->where = xasprintf("%s:%u: %s=%s", k->file, k->line, k->key, k->value);
        return c;
}

/* Whether resctrl can partition the L3 here; if not, a note says why and how to get it. */
static bool resctrl_ready(PlanNotes *notes)
{
        const char *why = NULL;

        if (!sys_exists(RESCTRL_ROOT))
                why = "CacheWays= not applied: " RESCTRL_ROOT " is absent (the kernel needs "
                      "CONFIG_X86_CPU_RESCTRL, the CPU Intel RDT or AMD PQoS); where both are there, "
                      "mount it with: " MOUNT_CMD;
        else if (!sys_exists(RESCTRL_ROOT "/info"))
                why = "CacheWays= not applied: resctrl is not mounted; mount it with: " MOUNT_CMD
                      " (or an fstab line: resctrl " RESCTRL_ROOT " resctrl defaults 0 0)";
        else if (sys_exists(RESCTRL_ROOT "/info/L3CODE"))
                why = "CacheWays= not applied: resctrl is mounted with code/data prioritization (-o cdp); "
                      "remount it without: umount " RESCTRL_ROOT " && " MOUNT_CMD;
        else if (!sys_exists(L3_INFO))
                why = "CacheWays= not applied: this machine's CPUs offer no L3 cache allocation "
                      "(no info/L3 under " RESCTRL_ROOT ")";
        if (why)
                plan_notes_add(notes, "cache", xstrdup(RESCTRL_ROOT), xstrdup(why));
        return !why;
}

static int read_hex(const char *path, uint64_t *ret)
{
        _cleanup_free_ char *s = NULL;
        char *end;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        errno = 0;
        *ret = strtoull(strstrip(s), &end, 16);
        return errno || *end || end == s ? -EINVAL : 0;
}

/* The id of the L3 a CPU belongs to: resctrl's domain. -ENOENT when it has none (offline on x86). */
static int l3_id(unsigned cpu, unsigned *ret)
{
        for (unsigned i = 0;; i++) {
                _cleanup_free_ char *dir = xasprintf("/sys/devices/system/cpu/cpu%u/cache/index%u", cpu, i),
                                    *level = xasprintf("%s/level", dir), *id = xasprintf("%s/id", dir);
                unsigned l;

                if (sys_read_uint(level, &l) < 0)
                        return -ENOENT;
                if (l == 3)
                        return sys_read_uint(id, ret);
        }
}

/* n contiguous ways at one end of mask (which holds the ways from bit 0): the low end unless ways there
 * are shared with devices (shareable_bits: I/O, a GPU) that would fill them anyway. */
static uint64_t pick_ways(uint64_t cbm, unsigned ways, unsigned n, uint64_t shareable)
{
        uint64_t run = n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1;
        uint64_t high = run << (ways - n);

        return (run & shareable) && !(high & shareable) ? high & cbm : run & cbm;
}

typedef struct L3Info {
        uint64_t cbm;
        uint64_t shareable;
        unsigned ways;
        unsigned min_bits;
        unsigned closids;
} L3Info;

static int read_l3_info(L3Info *ret)
{
        int r;

        *ret = (L3Info){};
        r = read_hex(L3_INFO "/cbm_mask", &ret->cbm);
        if (r >= 0)
                r = sys_read_uint(L3_INFO "/min_cbm_bits", &ret->min_bits);
        if (r >= 0)
                r = sys_read_uint(L3_INFO "/num_closids", &ret->closids);
        if (r < 0)
                return r;
        if (read_hex(L3_INFO "/shareable_bits", &ret->shareable) < 0)
                ret->shareable = 0;
        ret->ways = (unsigned)__builtin_popcountll(ret->cbm);
        return ret->ways > 0 ? 0 : -EINVAL;
}

/* How many ways the config asks for on this L3; 0 (and a failure note) when it cannot have them. The
 * default group keeps at least min_cbm_bits ways, and one at the least. */
static unsigned ways_wanted(const CacheConfig *c, const L3Info *l3, PlanNotes *notes)
{
        unsigned keep = MAX(l3->min_bits, 1u), n = c->ways;

        if (c->percent)
                n = MAX((l3->ways * c->percent + 50) / 100, keep);
        if (n < keep || n + keep > l3->ways) {
                plan_notes_fail(notes, "cache", xstrdup(L3_INFO "/cbm_mask"), EINVAL,
                                xasprintf("%s: the L3 has %u ways and each group, the default one too, "
                                          "needs at least %u: CacheWays= can be %u to %u here",
                                          c->where, l3->ways, keep, keep, l3->ways - keep));
                return 0;
        }
        return n;
}

static int cache_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                      PlanNotes *notes)
{
        const CacheConfig *c = config;
        _cleanup_cpuset_ CpuSet *cpus = NULL;
        _cleanup_free_ char *line = NULL;
        Schemata root = {}, group = {};
        L3Info l3;
        uint64_t mine;
        unsigned n;
        int r;

        if (cpuset_empty(ctx->isolated) || !resctrl_ready(notes))
                return 0;
        r = read_l3_info(&l3);
        if (r < 0)
                return r;
        if (l3.closids < 2) {
                plan_notes_add(
                    notes, "cache", xstrdup(L3_INFO "/num_closids"),
                    xstrdup("CacheWays= not applied: the L3 offers one class of service only, the "
                            "default group's"));
                return 0;
        }
        n = ways_wanted(c, &l3, notes);
        if (n == 0)
                return 0;
        r = setting_kind_schemata.read(NULL, RESCTRL_ROOT "/schemata", "L3:0=0", &line);
        if (r < 0)
                return r;
        r = schemata_parse(line, &root);
        if (r < 0)
                return r;

        mine = pick_ways(l3.cbm, l3.ways, n, l3.shareable);
        group = (Schemata){
            .resource = xstrdup("L3"), .entries = xmalloc0(sizeof(SchemataEntry) * root.n), .n = root.n};
        for (size_t i = 0; i < root.n; i++) {
                group.entries[i] = (SchemataEntry){.domain = root.entries[i].domain, .mask = mine};
                root.entries[i].mask = l3.cbm;
        }
        cpus = cpuset_dup(ctx->isolated);
        cpuset_and(cpus, ctx->topology->online);
        FOREACH_CPU (cpu, cpus) {
                unsigned id;
                SchemataEntry *e;
                if (l3_id(cpu, &id) >= 0 && (e = schemata_find(&root, id)))
                        e->mask = l3.cbm & ~mine;
        }

        plan_add(plan, &setting_kind_resctrl_group, "cache", PHASE_GROUP, xstrdup(GROUP),
                 xstrdup("present"));
        plan_add(plan, &setting_kind_schemata, "cache", PHASE_WAYS, xstrdup(GROUP "/schemata"),
                 schemata_format(&group));
        plan_add(plan, &setting_kind_schemata, "cache", PHASE_WAYS, xstrdup(RESCTRL_ROOT "/schemata"),
                 schemata_format(&root));
        /* The kernel gives an offline CPU back to the default group; none online: nothing to write. */
        if (!cpuset_empty(cpus))
                plan_add(plan, &setting_kind_cpulist, "cache", PHASE_CPUS, xstrdup(GROUP "/cpus_list"),
                         cpuset_format_list(cpus));
        schemata_clear(&root);
        schemata_clear(&group);
        return 0;
}

const Tuner tuner_cache = {
    .name = "cache",
    .cpu_dependent = true,
    .parse = cache_parse,
    .free_config = cache_free_config,
    .plan = cache_plan,
};
