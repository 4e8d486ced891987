/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Times whole passes on a machine fixture: topology load + plan + apply of a profile, then the restore,
 * alternately, so every apply really writes. Writes go to the fixture's files and are put back.
 *
 *   bench-pass --fixture DIR --profile NAME [--conf DIR] [--runs N]
 *
 * Prints one JSON object: median/min/max microseconds of a topology load (rtctld does one at start and on
 * CPU events), of apply passes, of no-op passes (everything in place) and of restores. */
#include <getopt.h>
#include <inttypes.h>
#include <time.h>

#include "core/reconcile.h"
#include "shared/sysfs.h"
#include "tuners/registry.h"

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
        return x < y ? -1 : x > y;
}

static void report(const char *name, uint64_t *v, int n, bool last)
{
        qsort(v, (size_t)n, sizeof(uint64_t), cmp_u64);
        printf("  \"%s\": {\"median_us\": %" PRIu64 ", \"min_us\": %" PRIu64 ", \"max_us\": %" PRIu64
               "}%s\n",
               name, v[n / 2], v[0], v[n - 1], last ? "" : ",");
}

/* As in rtctld: the topology is loaded at start and on CPU events, not for every pass. */
static Topology *topology;

static uint64_t pass(const Policy *p, Journal *j, size_t *ret_settings, unsigned *ret_changed)
{
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        Dirty all = {};
        PassResult res;

        dirty_mark_all(&all);
        reconcile_pass(p, topology, j, &all, false, &res);
        *ret_settings = res.plan.n;
        *ret_changed = res.stats.changed;
        for (size_t k = 0; k < res.plan.n; k++)
                if (res.plan.settings[k].result == SETTING_FAILED)
                        fprintf(stderr, "%s: %s\n", res.plan.settings[k].object,
                                res.plan.settings[k].message);
        pass_result_clear(&res);
        dirty_clear(&all);
        return now_usec(CLOCK_MONOTONIC) - start;
}

int main(int argc, char *argv[])
{
        const char *fixture = NULL, *profile = "desktop", *conf = RTCTL_SOURCE_CONFDIR;
        int runs = 20, c;
        static const struct option options[] = {
            {"fixture", required_argument, NULL, 'f'},
            {"profile", required_argument, NULL, 'p'},
            {"conf", required_argument, NULL, 'c'},
            {"runs", required_argument, NULL, 'n'},
            {},
        };

        tuners_register_all();
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'f':
                        fixture = optarg;
                        break;
                case 'p':
                        profile = optarg;
                        break;
                case 'c':
                        conf = optarg;
                        break;
                case 'n':
                        runs = atoi(optarg);
                        break;
                default:
                        return 2;
                }
        if (!fixture || runs < 1) {
                fprintf(stderr,
                        "Usage: bench-pass --fixture DIR [--profile NAME] [--conf DIR] [--runs N]\n");
                return 2;
        }
        sysroot_set(fixture);

        char *search[] = {(char *)conf, NULL};
        _cleanup_free_ char *err = NULL, *jpath = xasprintf("/tmp/rtctl-bench-pass-%d.json", (int)getpid());
        _cleanup_policy_ Policy *p = NULL;
        _cleanup_journal_ Journal *j = NULL;
        uint64_t *apply = xmalloc0(sizeof(uint64_t) * (size_t)runs),
                 *noop = xmalloc0(sizeof(uint64_t) * (size_t)runs),
                 *restore = xmalloc0(sizeof(uint64_t) * (size_t)runs),
                 *topo = xmalloc0(sizeof(uint64_t) * (size_t)runs);
        size_t settings = 0, dummy;
        unsigned changed = 0, restored = 0, unchanged_changes = 0;

        if (policy_load(search, profile, &p, &err) < 0 ||
            journal_open(jpath, JOURNAL_RUNTIME, &j, &err) < 0) {
                fprintf(stderr, "%s\n", err);
                return 1;
        }
        for (int i = 0; i < runs; i++) {
                uint64_t t0 = now_usec(CLOCK_MONOTONIC);
                topology_free(topology);
                topology = NULL;
                if (topology_load(NULL, &topology) < 0) {
                        fprintf(stderr, "cannot load the fixture's topology\n");
                        return 1;
                }
                topo[i] = now_usec(CLOCK_MONOTONIC) - t0;
                apply[i] = pass(p, j, &settings, &changed);
                noop[i] = pass(p, j, &dummy, &unchanged_changes);
                restore[i] = pass(NULL, j, &dummy, &restored);
        }
        printf("{\n  \"fixture\": \"%s\", \"profile\": \"%s\", \"runs\": %d, \"settings\": %zu, \"writes\": "
               "%u, "
               "\"noop_writes\": %u, \"restored\": %u,\n",
               fixture, profile, runs, settings, changed, unchanged_changes, restored);
        report("topology_load", topo, runs, false);
        report("apply", apply, runs, false);
        report("noop", noop, runs, false);
        report("restore", restore, runs, true);
        printf("}\n");
        unlink(jpath);
        return 0;
}
