/* SPDX-License-Identifier: GPL-2.0-or-later */
/* IRQ affinity, the job irqbalance does, aware of the CPU split: every movable interrupt gets one CPU of
 * the balancing set (housekeeping, by default), chosen by its rate, NUMA-local to its device, with one
 * device's queues on different CPUs of one cluster, core type or LLC where they fit; rules and run-time pins
 * place chosen interrupts (the sound card's). An interrupt moves only when that gains enough, so a replan of
 * a settled machine changes nothing. */
#include <glib.h>
#include <sched.h>
#include <stdlib.h>

#include "tuners/registry.h"
#include "shared/sysfs.h"
#include "tuners/irq.h"

static void rule_clear(IrqRule *r)
{
        free(r->name);
        strv_free(r->match);
        cpu_spec_clear(&r->cpus);
}

void irq_config_free(void *p)
{
        IrqConfig *c = p;

        if (!c)
                return;
        for (size_t i = 0; i < c->n_rules; i++)
                rule_clear(&c->rules[i]);
        free(c->rules);
        cpu_spec_clear(&c->cpus);
        free(c);
}

static bool parse_thread(ConfSection *s, IrqRule *r, char ***errors)
{
        ConfKey *pol = conf_key(s, "ThreadPolicy"), *prio = conf_key(s, "ThreadPriority");
        unsigned v;

        if (pol) {
                if (streq(pol->value, "fifo"))
                        r->policy = SCHED_FIFO;
                else if (streq(pol->value, "rr"))
                        r->policy = SCHED_RR;
                else if (streq(pol->value, "other"))
                        r->policy = SCHED_OTHER;
                else {
                        strv_push(errors, conf_key_error(pol, "expected fifo, rr or other"));
                        return false;
                }
        }
        if (prio) {
                if (safe_atou(prio->value, &v) < 0 || v < 1 || v > 99) {
                        strv_push(errors,
                                  conf_key_error(prio, "expected a real-time priority from 1 to 99"));
                        return false;
                }
                if (r->policy == SCHED_OTHER) {
                        strv_push(errors, conf_key_error(prio, "ThreadPolicy=other has no priority"));
                        return false;
                }
                r->priority = (int)v;
                if (r->policy < 0)
                        r->policy = SCHED_FIFO;
        } else if (r->policy == SCHED_FIFO || r->policy == SCHED_RR)
                r->priority = 50; /* the kernel's own priority for IRQ threads */
        return true;
}

static bool parse_rule(ConfSection *s, const char *name, IrqRule *r, char ***errors)
{
        _cleanup_free_ char *why = NULL;
        ConfKey *k;
        bool ok = true;

        *r = (IrqRule){.name = xstrdup(name), .policy = -1, .priority = -1};
        k = conf_key(s, "Match");
        if (!k) {
                strv_push(errors, conf_section_error(s, "an IRQ rule needs Match=, e.g. Match=class:audio"));
                return false;
        }
        r->match = strv_split(k->value, " \t");
        why = irq_match_check(r->match);
        if (why || !r->match[0]) {
                strv_push(errors, conf_key_error(k, "%s", why ? why : "no condition"));
                ok = false;
        }
        k = conf_key(s, "CPUs");
        if (k)
                ok = cpu_spec_parse_key(k, &r->cpus, errors) && ok;
        ok = parse_thread(s, r, errors) && ok;
        return ok;
}

static bool parse_main(ConfSection *s, IrqConfig *c, char ***errors)
{
        ConfKey *k;
        bool ok = true;

        c->has_irq_section = true;
        k = conf_key(s, "Balance");
        if (!k || streq(k->value, "housekeeping"))
                c->balance = IRQ_BALANCE_HOUSEKEEPING;
        else if (streq(k->value, "all"))
                c->balance = IRQ_BALANCE_ALL;
        else if (streq(k->value, "off"))
                c->balance = IRQ_BALANCE_OFF;
        else {
                strv_push(errors, conf_key_error(k, "expected off, housekeeping or all"));
                ok = false;
        }
        k = conf_key(s, "CPUs");
        if (k)
                ok = cpu_spec_parse_key(k, &c->cpus, errors) && ok;
        k = conf_key(s, "RebalanceSec");
        if (k && (safe_atou(k->value, &c->rebalance_sec) < 0 || c->rebalance_sec > 86400)) {
                strv_push(errors, conf_key_error(k, "expected seconds from 0 (events only) to 86400"));
                ok = false;
        }
        return ok;
}

/* [CPU] Isolate= names CPUs; whether they make sense is the cpuset tuner's to say. */
static bool isolates(Conf *conf)
{
        ConfKey *k = conf_key(conf_section(conf, "CPU"), "Isolate");

        return k && !isempty(k->value);
}

IrqConfig *irq_config_parse(Conf *conf, char ***errors)
{
        IrqConfig *c = xmalloc0(sizeof(IrqConfig));
        size_t allocated = 0;
        bool any = false, ok = true;

        assert(conf);

        for (size_t i = 0; i < conf->n_sections; i++) {
                ConfSection *s = &conf->sections[i];
                const char *name = startswith(s->name, "IRQ");
                IrqRule r;

                if (!name || (*name != 0 && *name != ' '))
                        continue;
                s->used = true;
                any = true;
                name += strspn(name, " ");
                if (!*name) {
                        ok = parse_main(s, c, errors) && ok;
                        continue;
                }
                if (!parse_rule(s, name, &r, errors)) {
                        rule_clear(&r);
                        ok = false;
                        continue;
                }
                GREEDY_REALLOC(c->rules, allocated, c->n_rules + 1);
                c->rules[c->n_rules++] = r;
        }
        if (!ok || (!any && !isolates(conf))) {
                irq_config_free(c);
                return NULL;
        }
        /* An isolated CPU that still takes device interrupts is not isolated: a profile that isolates
         * and has no [IRQ] section balances over housekeeping, as [IRQ] Balance=housekeeping would
         * ([IRQ] Balance=off says to leave them). Otherwise rules alone (thread priorities) place
         * nothing unless they say CPUs=. */
        if (!c->has_irq_section)
                c->balance = isolates(conf) ? IRQ_BALANCE_HOUSEKEEPING : IRQ_BALANCE_OFF;
        return c;
}

CpuSet *cpu_spec_resolve(const CpuSpec *spec, const PlanContext *ctx)
{
        assert(spec);

        switch (spec->kind) {
        case CPU_SPEC_LIST:
                return cpuset_dup(spec->list);
        case CPU_SPEC_HOUSEKEEPING:
                return cpuset_dup(ctx->housekeeping);
        case CPU_SPEC_ISOLATED:
                return cpuset_dup(ctx->isolated);
        default:
                return cpuset_dup(ctx->topology->online);
        }
}

int irq_table_for_pass(const PlanContext *ctx, const char *tuner, PlanNotes *notes, const IrqTable **ret,
                       IrqTable **ret_owned)
{
        IrqState *state = ctx->state;
        IrqTable *t = NULL;
        int r;

        assert(ctx);

        *ret_owned = NULL;
        if (state && state->seen && state->seen->timestamp_usec >= ctx->pass_start_usec) {
                *ret = state->seen;
                return 0;
        }
        r = irq_table_load(0, ctx->topology->n_cpus, &t);
        if (r < 0) {
                plan_notes_fail(notes, tuner, xstrdup("/proc/interrupts"), -r,
                                xasprintf("cannot be read (%s): the IRQs stay as they are", strerror(-r)));
                return r;
        }
        if (!state)
                *ret_owned = t;
        else {
                irq_table_free(state->seen);
                state->seen = t;
        }
        *ret = t;
        return 0;
}

/* The config is parsed here for both IRQ tuners; the IRQ thread tuner reads it too. */
static void *irq_parse(Conf *conf, char ***errors)
{
        return irq_config_parse(conf, errors);
}

bool irq_config_places(const IrqConfig *c)
{
        bool places = c && (c->balance != IRQ_BALANCE_OFF || c->has_irq_section);

        for (size_t i = 0; c && i < c->n_rules; i++)
                places = places || c->rules[i].cpus.kind != CPU_SPEC_UNSET;
        return places;
}

static unsigned irq_interval(const void *config)
{
        const IrqConfig *c = config;
        return c->balance != IRQ_BALANCE_OFF ? c->rebalance_sec : 0;
}

/* Where an IRQ may go and how loaded each CPU is, while the greedy placement runs. */
typedef struct Placer {
        const PlanContext *ctx;
        unsigned n_cpus;
        uint64_t *load;      /* interrupts since the last pass, per CPU */
        unsigned *count;     /* IRQs per CPU */
        GHashTable *devices; /* PCI address -> 1-based index */
        unsigned *dev_count; /* [device index * n_cpus + cpu]: that device's IRQs on the CPU */
        unsigned n_devices;
        size_t dev_rows;    /* dev_count has room for this many devices of n_cpus counts each */
        CpuSet **node_cpus; /* online CPUs of each NUMA node, built on first use */
        unsigned n_nodes;
        GHashTable *pending; /* PCI address -> its balanced IRQs not placed yet */
} Placer;

static unsigned device_index(Placer *p, const char *device)
{
        gpointer v;

        if (!device)
                return 0;
        v = g_hash_table_lookup(p->devices, device);
        if (v)
                return GPOINTER_TO_UINT(v);
        p->n_devices++;
        g_hash_table_insert(p->devices, (gpointer)device, GUINT_TO_POINTER(p->n_devices));
        greedy_realloc((void **)&p->dev_count, &p->dev_rows, p->n_devices + 1, sizeof(unsigned) * p->n_cpus);
        memset(p->dev_count + (size_t)p->n_devices * p->n_cpus, 0, sizeof(unsigned) * p->n_cpus);
        return p->n_devices;
}

static const CpuSet *node_cpus(Placer *p, int node)
{
        const Topology *t = p->ctx->topology;

        if (node < 0 || node >= 1024)
                return NULL;
        if ((unsigned)node >= p->n_nodes) {
                p->node_cpus = xreallocarray(p->node_cpus, (unsigned)(node + 1), sizeof(CpuSet *));
                for (unsigned i = p->n_nodes; i <= (unsigned)node; i++)
                        p->node_cpus[i] = NULL;
                p->n_nodes = (unsigned)node + 1;
        }
        if (!p->node_cpus[node]) {
                p->node_cpus[node] = cpuset_new(t->n_cpus);
                FOREACH_CPU (cpu, t->online)
                        if (t->cpus[cpu].node == node)
                                cpuset_add(p->node_cpus[node], (unsigned)cpu);
        }
        return p->node_cpus[node];
}

static void placer_account(Placer *p, const CpuSet *cpus, const char *device, uint64_t rate)
{
        unsigned n = cpuset_count(cpus), dev = device_index(p, device);

        if (n == 0)
                return;
        FOREACH_CPU (cpu, cpus) {
                if ((unsigned)cpu >= p->n_cpus)
                        break;
                p->load[cpu] += rate / n;
                p->count[cpu]++;
                p->dev_count[(size_t)dev * p->n_cpus + (unsigned)cpu] += dev ? 1 : 0;
        }
}

static bool better(const Placer *p, unsigned dev, int a, int b)
{
        const unsigned *dc = p->dev_count + (size_t)dev * p->n_cpus;

        if (dc[a] != dc[b])
                return dc[a] < dc[b];
        if (p->load[a] != p->load[b])
                return p->load[a] < p->load[b];
        return p->count[a] < p->count[b];
}

/* How close two CPUs sit: sharing a cluster (an L2 shared by E-cores, or one core's SMT siblings), a
 * core type within one last-level cache (hybrid parts only), a last-level cache. */
typedef enum Closeness { SAME_CLUSTER, SAME_TYPE_AND_LLC, SAME_LLC, N_CLOSENESS } Closeness;

static bool close_at(const Topology *t, Closeness level, int a, int b)
{
        const CpuInfo *x = &t->cpus[a], *y = &t->cpus[b];

        switch (level) {
        case SAME_CLUSTER:
                return x->cluster >= 0 && x->cluster == y->cluster;
        case SAME_TYPE_AND_LLC:
                return t->hybrid && x->llc >= 0 && x->llc == y->llc && x->type == y->type;
        default:
                return x->llc >= 0 && x->llc == y->llc;
        }
}

static CpuSet *group_of(const Placer *p, const CpuSet *cand, Closeness level, int cpu)
{
        CpuSet *g = cpuset_new(p->n_cpus);

        FOREACH_CPU (c, cand)
                if ((unsigned)c < p->n_cpus && close_at(p->ctx->topology, level, c, cpu))
                        cpuset_add(g, (unsigned)c);
        return g;
}

static unsigned free_in(const unsigned *dc, const CpuSet *g, unsigned n_cpus)
{
        unsigned n = 0;

        FOREACH_CPU (c, g)
                if ((unsigned)c < n_cpus && dc[c] == 0)
                        n++;
        return n;
}

/* One device's vectors stay close together where housekeeping allows it (intel-lpmd #25: a device whose
 * IRQs land on a P-core and an E-core, or on two CCDs, wakes two clusters and splits its cache).
 * The device's first vector goes to the smallest group (cluster, then core type, then LLC) with a CPU
 * for each of its vectors, the one holding its current CPU if that qualifies; later ones to the
 * smallest group around the first that still has a CPU without one of them. The current CPU of a vector
 * stays a candidate while its LLC does, so that a settled placement does not move. */
static void keep_device_close(Placer *p, const char *device, unsigned dev, int cur, CpuSet *cand)
{
        const unsigned *dc = p->dev_count + (size_t)dev * p->n_cpus;
        unsigned need = GPOINTER_TO_UINT(g_hash_table_lookup(p->pending, device));
        int anchor = -1;

        FOREACH_CPU (c, cand)
                if ((unsigned)c < p->n_cpus && dc[c] > 0) {
                        anchor = c;
                        break;
                }
        for (Closeness level = 0; level < N_CLOSENESS; level++) {
                _cleanup_cpuset_ CpuSet *keep = cpuset_new(p->n_cpus);

                if (anchor >= 0) {
                        CpuSet *g = group_of(p, cand, level, anchor);
                        if (free_in(dc, g, p->n_cpus) > 0)
                                cpuset_or(keep, g);
                        cpuset_free(g);
                } else {
                        _cleanup_cpuset_ CpuSet *seen = cpuset_new(p->n_cpus);
                        FOREACH_CPU (c, cand) {
                                if ((unsigned)c >= p->n_cpus || cpuset_has(seen, (unsigned)c))
                                        continue;
                                CpuSet *g = group_of(p, cand, level, c);
                                cpuset_add(g, (unsigned)c);
                                cpuset_or(seen, g);
                                if (free_in(dc, g, p->n_cpus) >= need)
                                        cpuset_or(keep, g);
                                cpuset_free(g);
                        }
                }
                if (cpuset_empty(keep))
                        continue;
                if (cur >= 0 && cpuset_has(keep, (unsigned)cur) && anchor < 0) {
                        _cleanup_cpuset_ CpuSet *own = group_of(p, cand, level, cur);
                        cpuset_and(keep, own);
                } else if (cur >= 0 && (unsigned)cur < p->n_cpus && cpuset_has(cand, (unsigned)cur) &&
                           dc[cur] == 0 && anchor >= 0 && close_at(p->ctx->topology, SAME_LLC, cur, anchor))
                        cpuset_add(keep, (unsigned)cur);
                cpuset_and(cand, keep);
                return;
        }
}

static int current_cpu(const Irq *irq)
{
        return irq->affinity && cpuset_count(irq->affinity) == 1 ? cpuset_next(irq->affinity, -1) : -1;
}

/* The CPU for one IRQ: the least loaded of the candidates (first those NUMA-local to its device, then
 * those close to its device's other vectors), among them first those with fewest queues of the same
 * device. The current CPU stays unless moving gains more than the IRQ's own rate plus a quarter of the
 * current CPU's load. */
static int placer_choose(Placer *p, const CpuSet *targets, const Irq *irq, uint64_t rate)
{
        _cleanup_cpuset_ CpuSet *cand = cpuset_dup(targets);
        const CpuSet *local = node_cpus(p, irq->node);
        unsigned dev = device_index(p, irq->device);
        int best = -1, cur = current_cpu(irq);

        if (local && cpuset_intersects(cand, local))
                cpuset_and(cand, local);
        if (dev)
                keep_device_close(p, irq->device, dev, cur, cand);
        FOREACH_CPU (cpu, cand) {
                if ((unsigned)cpu >= p->n_cpus)
                        break;
                if (best < 0 || better(p, dev, cpu, best))
                        best = cpu;
        }
        if (best < 0)
                return -1;
        if (cur >= 0 && (unsigned)cur < p->n_cpus && cpuset_has(cand, (unsigned)cur) && cur != best) {
                const unsigned *dc = p->dev_count + (size_t)dev * p->n_cpus;
                uint64_t gap = p->load[cur] > p->load[best] ? p->load[cur] - p->load[best] : 0;
                /* Moving an IRQ can take at most its own rate off its CPU: a quiet one (or one too small
                 * to matter next to the imbalance, which the busier IRQs placed before it fix) stays, so
                 * loads that swing between passes do not drag every small IRQ along. */
                bool small = rate == 0 || rate * 16 < gap;
                if (dc[cur] <= dc[best] &&
                    (small || p->load[cur] <= p->load[best] + rate + p->load[cur] / 4))
                        best = cur;
        }
        return best;
}

typedef struct Balanced {
        const Irq *irq;
        uint64_t rate;
} Balanced;

static int cmp_balanced(const void *a, const void *b)
{
        const Balanced *x = a, *y = b;

        if (x->rate != y->rate)
                return x->rate > y->rate ? -1 : 1;
        return x->irq->num < y->irq->num ? -1 : x->irq->num > y->irq->num;
}

typedef struct NumList {
        unsigned *v;
        size_t n, allocated;
} NumList;

static void numlist_add(NumList *l, unsigned v)
{
        GREEDY_REALLOC(l->v, l->allocated, l->n + 1);
        l->v[l->n++] = v;
}

/* One note per kind (object "/proc/irq: KIND"), listing the IRQs by number. */
static void note_list(PlanNotes *notes, NumList *l, const char *kind, const char *what)
{
        _cleanup_free_ char *nums = NULL;

        if (l->n == 0)
                return;
        nums = format_ranges(l->v, l->n);
        plan_notes_add(notes, "irq", xasprintf("/proc/irq: %s", kind), xasprintf("IRQ %s: %s", nums, what));
        free(l->v);
        *l = (NumList){};
}

static const IrqRule *placing_rule(const IrqConfig *c, const Irq *irq)
{
        for (size_t i = 0; i < c->n_rules; i++)
                if (c->rules[i].cpus.kind != CPU_SPEC_UNSET && irq_match(c->rules[i].match, irq))
                        return &c->rules[i];
        return NULL;
}

/* The table was read in this pass: the applier need not read every affinity again. */
static void plan_affinity(Plan *plan, const Irq *irq, char *desired)
{
        Setting *s = plan_add(plan, &setting_kind_irq_affinity, "irq", 0,
                              xasprintf("/proc/irq/%u/smp_affinity_list", irq->num), desired);
        if (irq->affinity)
                s->current = cpuset_format_list(irq->affinity);
}

static int irq_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                    PlanNotes *notes)
{
        const IrqConfig *c = config;
        const Topology *topo = ctx->topology;
        _cleanup_irq_table_ IrqTable *owned = NULL;
        const IrqTable *t = NULL;
        _cleanup_cpuset_ CpuSet *targets = NULL;
        _cleanup_free_ Balanced *balanced = NULL;
        NumList managed = {}, managed_iso = {}, refused = {};
        size_t n_balanced = 0;
        Placer p = {.ctx = ctx, .n_cpus = topo->n_cpus};
        int r;

        if (!irq_config_places(c))
                return 0; /* thread priorities only: the IRQ thread tuner's */
        cpu_spec_note_beyond(&c->cpus, topo, "irq", notes);
        for (size_t i = 0; i < c->n_rules; i++)
                cpu_spec_note_beyond(&c->rules[i].cpus, topo, "irq", notes);
        r = irq_table_for_pass(ctx, "irq", notes, &t, &owned);
        if (r < 0)
                return r;
        if (c->balance != IRQ_BALANCE_OFF) {
                targets = c->cpus.kind != CPU_SPEC_UNSET
                              ? cpu_spec_resolve(&c->cpus, ctx)
                              : cpuset_dup(c->balance == IRQ_BALANCE_HOUSEKEEPING ? ctx->housekeeping
                                                                                  : topo->online);
                cpuset_and(targets, topo->online);
                if (cpuset_empty(targets)) {
                        cpuset_or(targets, topo->online);
                        cpuset_andnot(targets, ctx->isolated);
                }
                /* IRQs registered later start there. */
                if (!cpuset_empty(targets) && sys_exists("/proc/irq/default_smp_affinity"))
                        plan_add(plan, &setting_kind_cpumask, "irq", 0,
                                 xstrdup("/proc/irq/default_smp_affinity"), cpuset_format_list(targets));
        }

        p.load = xmalloc0(sizeof(uint64_t) * p.n_cpus);
        p.count = xmalloc0(sizeof(unsigned) * p.n_cpus);
        p.devices = g_hash_table_new(g_str_hash, g_str_equal);
        p.dev_count = xmalloc0(sizeof(unsigned) * p.n_cpus);
        p.dev_rows = 1; /* row 0: IRQs of no device */
        p.pending = g_hash_table_new(g_str_hash, g_str_equal);
        balanced = xmalloc0(sizeof(Balanced) * (t->n + 1));

        /* Fixed placements first (pins, rules, what the kernel keeps), so that balancing sees their load. */
        for (size_t i = 0; i < t->n; i++) {
                const Irq *irq = &t->irqs[i];
                const CpuSet *pin = irq_state_pin(ctx->state, irq->num);
                const IrqRule *rule = NULL;
                _cleanup_cpuset_ CpuSet *want = NULL;
                uint64_t rate = irq_state_delta(ctx->state, irq);

                if (irq->unmovable) {
                        if (streq(irq->unmovable, IRQ_UNMOVABLE_MANAGED)) {
                                numlist_add(&managed, irq->num);
                                if (irq->affinity && cpuset_intersects(irq->affinity, ctx->isolated))
                                        numlist_add(&managed_iso, irq->num);
                        }
                        if (irq->affinity)
                                placer_account(&p, irq->affinity, irq->device, rate);
                        continue;
                }
                if (irq_state_refused(ctx->state, irq->num)) {
                        numlist_add(&refused, irq->num);
                        if (irq->affinity)
                                placer_account(&p, irq->affinity, irq->device, rate);
                        continue;
                }
                if (pin)
                        want = cpuset_dup(pin);
                else if ((rule = placing_rule(c, irq)))
                        want = cpu_spec_resolve(&rule->cpus, ctx);
                if (want) {
                        cpuset_and(want, topo->online);
                        /* Pinned to CPUs that are all offline now: balanced until they return. */
                        if (!cpuset_empty(want)) {
                                placer_account(&p, want, irq->device, rate);
                                plan_affinity(plan, irq, cpuset_format_list(want));
                                continue;
                        }
                }
                if (!targets)
                        continue;
                balanced[n_balanced++] = (Balanced){.irq = irq, .rate = rate};
                if (irq->device) {
                        unsigned n = GPOINTER_TO_UINT(g_hash_table_lookup(p.pending, irq->device));
                        g_hash_table_insert(p.pending, irq->device, GUINT_TO_POINTER(n + 1));
                }
        }

        qsort(balanced, n_balanced, sizeof(Balanced), cmp_balanced);
        for (size_t i = 0; i < n_balanced; i++) {
                int cpu = placer_choose(&p, targets, balanced[i].irq, balanced[i].rate);
                const char *dev = balanced[i].irq->device;
                _cleanup_cpuset_ CpuSet *one = NULL;

                if (dev)
                        g_hash_table_insert(
                            p.pending, (gpointer)dev,
                            GUINT_TO_POINTER(GPOINTER_TO_UINT(g_hash_table_lookup(p.pending, dev)) - 1));
                if (cpu < 0)
                        continue;
                one = cpuset_new(topo->n_cpus);
                cpuset_add(one, (unsigned)cpu);
                placer_account(&p, one, balanced[i].irq->device, balanced[i].rate);
                plan_affinity(plan, balanced[i].irq, xasprintf("%d", cpu));
        }

        note_list(notes, &managed, "kernel-managed",
                  "kernel-managed affinity (smp_affinity is read-only): placed by the kernel");
        if (managed_iso.n) {
                _cleanup_free_ char *iso = cpuset_format_list(ctx->isolated);
                _cleanup_free_ char *what =
                    xasprintf("kernel-managed and allowed on isolated CPUs %s: only the boot "
                              "parameter isolcpus=managed_irq,%s keeps them off",
                              iso, iso);
                note_list(notes, &managed_iso, "managed on isolated CPUs", what);
        }
        note_list(notes, &refused, "refused",
                  "the kernel refused to move them (EIO/EPERM: kernel-managed on kernels that leave their "
                  "smp_affinity writable, or a chip that cannot move them): placed by the kernel");

        for (unsigned i = 0; i < p.n_nodes; i++)
                cpuset_free(p.node_cpus[i]);
        free(p.node_cpus);
        free(p.load);
        free(p.count);
        free(p.dev_count);
        g_hash_table_destroy(p.devices);
        g_hash_table_destroy(p.pending);
        return 0;
}

/* Rates, refusals and pins, kept from pass to pass and shared with the IRQ thread tuner, which reads
 * this tuner's config. */
static void *irq_state_new(void)
{
        return xmalloc0(sizeof(IrqState));
}

static void irq_state_free(void *state)
{
        if (!state)
                return;
        irq_state_clear(state);
        free(state);
}

static void irq_state_applied(void *state, const Plan *plan)
{
        irq_state_note_results(state, plan);
        irq_state_commit(state);
}

const Tuner tuner_irq = {
    .name = "irq",
    .sections = (const char *const[]){"IRQ", NULL},
    .subsystems = (const char *const[]){"pci", "usb", "sound", "net", "virtio", NULL},
    .cpu_dependent = true,
    .replan_whole = true,
    .parse = irq_parse,
    .free_config = irq_config_free,
    .plan = irq_plan,
    .interval_sec = irq_interval,
    .state_new = irq_state_new,
    .state_free = irq_state_free,
    .state_applied = irq_state_applied,
};
