/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/topology.h"
#include "shared/sysfs.h"

static int read_cpulist(const char *path, unsigned size, CpuSet **ret)
{
        _cleanup_free_ char *s = NULL;
        int r;

        r = sys_read(path, &s);
        if (r < 0)
                return r;
        if (isempty(strstrip(s))) {
                *ret = cpuset_new(size);
                return 0;
        }
        return cpuset_parse_list(strstrip(s), size, ret, NULL);
}

static int possible_size(unsigned *ret)
{
        _cleanup_free_ char *s = NULL;
        _cleanup_cpuset_ CpuSet *set = NULL;
        const char *p;
        unsigned max = 0;
        int r;

        r = sys_read("/sys/devices/system/cpu/possible", &s);
        if (r < 0)
                return r;
        /* The highest number is the last one in the list. */
        p = strrchr(s, ',');
        p = p ? p + 1 : s;
        if (strchr(p, '-'))
                p = strchr(p, '-') + 1;
        r = safe_atou(strstrip((char *)p), &max);
        if (r < 0 || max >= CPUSET_MAX_CPUS)
                return -EINVAL;
        /* Validate the whole list. */
        r = cpuset_parse_list(strstrip(s), max + 1, &set, NULL);
        if (r < 0)
                return r;
        *ret = max + 1;
        return 0;
}

static int read_topology_int(unsigned cpu, const char *attr, int *ret)
{
        _cleanup_free_ char *path = xasprintf("/sys/devices/system/cpu/cpu%u/topology/%s", cpu, attr);

        return sys_read_int(path, ret);
}

static int first_of_list(const char *path, unsigned size, int *ret)
{
        _cleanup_cpuset_ CpuSet *set = NULL;
        int r;

        r = read_cpulist(path, size, &set);
        if (r < 0)
                return r;
        *ret = cpuset_next(set, -1);
        return *ret >= 0 ? 0 : -ENOENT;
}

/* Cache sizes read "32768K" (or "96M"). */
static uint64_t read_cache_size(const char *path)
{
        _cleanup_free_ char *s = NULL;
        unsigned v;
        char *unit;

        if (sys_read(path, &s) < 0)
                return 0;
        unit = s + strspn(s, "0123456789");
        if (unit == s)
                return 0;
        switch (*unit) {
        case 'K':
                *unit = 0;
                return safe_atou(s, &v) < 0 ? 0 : (uint64_t)v << 10;
        case 'M':
                *unit = 0;
                return safe_atou(s, &v) < 0 ? 0 : (uint64_t)v << 20;
        default:
                return safe_atou(s, &v) < 0 ? 0 : v;
        }
}

/* The last-level cache is the highest-level unified (or data) cache listed under cpuN/cache. */
static void read_llc(unsigned cpu, unsigned size, CpuInfo *info)
{
        int best_level = -1;

        for (unsigned k = 0;; k++) {
                _cleanup_free_ char *dir = xasprintf("/sys/devices/system/cpu/cpu%u/cache/index%u", cpu, k);
                _cleanup_free_ char *type_path = xasprintf("%s/type", dir);
                _cleanup_free_ char *level_path = xasprintf("%s/level", dir);
                _cleanup_free_ char *list_path = xasprintf("%s/shared_cpu_list", dir);
                _cleanup_free_ char *size_path = xasprintf("%s/size", dir);
                _cleanup_free_ char *type = NULL;
                unsigned level;
                int first;

                if (!sys_exists(dir))
                        break;
                if (sys_read(type_path, &type) < 0 || streq(type, "Instruction"))
                        continue;
                if (sys_read_uint(level_path, &level) < 0 || (int)level <= best_level)
                        continue;
                if (first_of_list(list_path, size, &first) < 0)
                        continue;
                best_level = (int)level;
                info->llc = first;
                info->llc_bytes = read_cache_size(size_path);
        }
}

static void read_cluster(unsigned cpu, unsigned size, CpuInfo *info)
{
        _cleanup_free_ char *path =
            xasprintf("/sys/devices/system/cpu/cpu%u/topology/cluster_cpus_list", cpu);

        if (first_of_list(path, size, &info->cluster) < 0)
                info->cluster = -1;
}

static void read_speed(unsigned cpu, CpuInfo *info)
{
        _cleanup_free_ char *cap = xasprintf("/sys/devices/system/cpu/cpu%u/cpu_capacity", cpu);
        _cleanup_free_ char *perf = xasprintf("/sys/devices/system/cpu/cpu%u/acpi_cppc/highest_perf", cpu);
        _cleanup_free_ char *freq = xasprintf("/sys/devices/system/cpu/cpu%u/cpufreq/cpuinfo_max_freq", cpu);

        if (sys_read_uint(cap, &info->capacity) < 0)
                info->capacity = 0;
        if (sys_read_uint(perf, &info->highest_perf) < 0)
                info->highest_perf = 0;
        if (sys_read_uint(freq, &info->max_freq_khz) < 0)
                info->max_freq_khz = 0;
}

/* The PMU devices of a hybrid part list the CPUs of each core type. */
static void read_core_types(Topology *t)
{
        static const struct {
                const char *path;
                CoreType type;
        } pmus[] = {
            {"/sys/devices/cpu_core/cpus", CORE_TYPE_PERFORMANCE},
            {"/sys/devices/cpu_atom/cpus", CORE_TYPE_EFFICIENT},
        };

        for (size_t i = 0; i < sizeof(pmus) / sizeof(pmus[0]); i++) {
                _cleanup_cpuset_ CpuSet *set = NULL;

                if (read_cpulist(pmus[i].path, t->n_cpus, &set) < 0)
                        continue;
                t->hybrid = true;
                FOREACH_CPU (cpu, set)
                        t->cpus[cpu].type = pmus[i].type;
        }
}

static void read_nodes(Topology *t)
{
        _cleanup_closedir_ DIR *d = NULL;
        struct dirent *de;

        d = sys_opendir("/sys/devices/system/node");
        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                _cleanup_cpuset_ CpuSet *set = NULL;
                unsigned node;

                if (!startswith(de->d_name, "node") || safe_atou(de->d_name + 4, &node) < 0)
                        continue;
                path = xasprintf("/sys/devices/system/node/%s/cpulist", de->d_name);
                if (read_cpulist(path, t->n_cpus, &set) < 0)
                        continue;
                FOREACH_CPU (cpu, set)
                        t->cpus[cpu].node = (int)node;
        }
}

static void number_cores(Topology *t)
{
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                CpuInfo *info = &t->cpus[cpu];

                if (info->core_id < 0)
                        continue;
                info->core = (int)cpu;
                for (unsigned c = 0; c < cpu; c++)
                        if (t->cpus[c].core_id == info->core_id && t->cpus[c].package == info->package &&
                            t->cpus[c].die == info->die) {
                                info->core = t->cpus[c].core;
                                break;
                        }
        }
}

/* What a CPU's own files say of where it sits, and of how fast it is (core and node are worked out
 * for the whole machine). */
static void copy_place(CpuInfo *info, const CpuInfo *old)
{
        info->package = old->package;
        info->die = old->die;
        info->core_id = old->core_id;
        info->llc = old->llc;
        info->llc_bytes = old->llc_bytes;
        info->cluster = old->cluster;
}

static void copy_speed(CpuInfo *info, const CpuInfo *old)
{
        info->capacity = old->capacity;
        info->highest_perf = old->highest_perf;
        info->max_freq_khz = old->max_freq_khz;
}

int topology_load(const Topology *previous, Topology **ret)
{
        _cleanup_topology_ Topology *t = xmalloc0(sizeof(Topology));
        int r;

        assert(ret);

        r = possible_size(&t->n_cpus);
        if (r < 0)
                return r;
        r = read_cpulist("/sys/devices/system/cpu/possible", t->n_cpus, &t->possible);
        if (r < 0)
                return r;
        r = read_cpulist("/sys/devices/system/cpu/present", t->n_cpus, &t->present);
        if (r < 0)
                t->present = cpuset_dup(t->possible);
        r = read_cpulist("/sys/devices/system/cpu/online", t->n_cpus, &t->online);
        if (r < 0)
                return r;

        t->cpus = xmalloc0(sizeof(CpuInfo) * t->n_cpus);
        for (unsigned cpu = 0; cpu < t->n_cpus; cpu++) {
                CpuInfo *info = &t->cpus[cpu];
                const CpuInfo *old = previous && cpu < previous->n_cpus ? &previous->cpus[cpu] : NULL;

                *info = (CpuInfo){.package = -1,
                                  .die = -1,
                                  .core_id = -1,
                                  .core = -1,
                                  .llc = -1,
                                  .cluster = -1,
                                  .node = -1};
                info->present = cpuset_has(t->present, cpu);
                info->online = cpuset_has(t->online, cpu);
                if (!cpuset_has(t->possible, cpu))
                        continue;

                /* Where a CPU sits and how fast it is do not change while it stays online (nor while
                 * it stays offline): what was read before is kept, and only a CPU that came online is
                 * read again. A CPU event costs the reads of the CPUs it moved, not of every CPU (a
                 * dozen files each). */
                if (old && old->present == info->present && old->online == info->online &&
                    old->core_id >= 0) {
                        copy_place(info, old);
                        copy_speed(info, old);
                        continue;
                }
                /* Nor does a CPU move when it goes offline and online again (only present and absent,
                 * a hot-add, can change it): a CPU back online keeps its place and has its speed read
                 * again, which may only be said while it is online (cpufreq, capacity). */
                if (old && old->present == info->present && info->online && old->core_id >= 0) {
                        copy_place(info, old);
                        read_speed(cpu, info);
                        if (!info->capacity && !info->highest_perf && !info->max_freq_khz)
                                copy_speed(info, old);
                        continue;
                }
                (void)read_topology_int(cpu, "physical_package_id", &info->package);
                if (read_topology_int(cpu, "die_id", &info->die) < 0)
                        info->die = info->package >= 0 ? 0 : -1;
                (void)read_topology_int(cpu, "core_id", &info->core_id);
                read_cluster(cpu, t->n_cpus, info);
                read_llc(cpu, t->n_cpus, info);
                read_speed(cpu, info);

                if (old && info->core_id < 0)
                        copy_place(info, old); /* an offline x86 CPU has no topology/ directory */
                if (old && !info->capacity && !info->highest_perf && !info->max_freq_khz)
                        copy_speed(info, old);
        }
        read_core_types(t);
        if (previous && previous->hybrid && previous->n_cpus == t->n_cpus)
                for (unsigned cpu = 0; cpu < t->n_cpus; cpu++)
                        if (t->cpus[cpu].type == CORE_TYPE_UNKNOWN) {
                                t->cpus[cpu].type = previous->cpus[cpu].type;
                                t->hybrid = true;
                        }
        number_cores(t);
        read_nodes(t);

        *ret = TAKE_PTR(t);
        return 0;
}

void topology_free(Topology *t)
{
        if (!t)
                return;
        cpuset_free(t->possible);
        cpuset_free(t->present);
        cpuset_free(t->online);
        free(t->cpus);
        free(t);
}
