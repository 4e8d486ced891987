/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "core/tuner.h"
#include "tuners/irq.h"
#include "tuners/power-config.h"

static void set_clear(PowerSet *s)
{
        free(s->section);
        cpu_spec_clear(&s->cpus);
        free(s->governor);
        free(s->epp);
        free(s->min_freq);
}

void power_config_free(void *p)
{
        PowerConfig *c = p;

        if (!c)
                return;
        for (size_t i = 0; i < c->n; i++)
                set_clear(&c->sets[i]);
        free(c->sets);
        free(c);
}

static const char *const governors[] = {"performance",  "powersave", "schedutil", "ondemand",
                                        "conservative", "userspace", NULL};
static const char *const epps[] = {"default",       "performance", "balance_performance",
                                   "balance_power", "power",       NULL};

static bool in(const char *const *l, const char *s)
{
        for (; *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

static bool parse_bool(const char *s, int *ret)
{
        if (streq(s, "1") || streq(s, "yes") || streq(s, "on") || streq(s, "true"))
                *ret = 1;
        else if (streq(s, "0") || streq(s, "no") || streq(s, "off") || streq(s, "false"))
                *ret = 0;
        else
                return false;
        return true;
}

static bool valid_min_freq(const char *s)
{
        unsigned v;
        size_t n = strlen(s);

        if (streq(s, "max"))
                return true;
        if (n > 1 && s[n - 1] == '%') {
                _cleanup_free_ char *num = xstrndup(s, n - 1);
                return safe_atou(num, &v) >= 0 && v <= 100;
        }
        return safe_atou(s, &v) >= 0 && v > 0;
}

static bool parse_latency(ConfKey *k, bool per_cpu, int *ret, char ***errors)
{
        unsigned v;

        if (per_cpu && streq(k->value, "shallowest")) {
                *ret = POWER_LATENCY_SHALLOWEST;
                return true;
        }
        if (safe_atou(k->value, &v) < 0 || v > 2000000000) {
                strv_push(errors,
                          conf_key_error(k, per_cpu ? "expected microseconds, 0 or more (0: poll only), "
                                                      "or shallowest"
                                                    : "expected microseconds, 0 or more (0: poll only)"));
                return false;
        }
        *ret = (int)v;
        return true;
}

static bool parse_set(ConfSection *s, const char *name, PowerConfig *c, PowerSet *r, char ***errors)
{
        ConfKey *k;
        bool ok = true;

        *r =
            (PowerSet){.section = xstrdup(s->name), .boost = -1, .max_exit_latency_us = POWER_LATENCY_UNSET};
        if ((k = conf_key(s, "CPUs")) && !cpu_spec_parse_key(k, &r->cpus, errors))
                ok = false;
        if ((k = conf_key(s, "Governor"))) {
                if (in(governors, k->value))
                        r->governor = xstrdup(k->value);
                else {
                        strv_push(errors,
                                  conf_key_error(k, "unknown governor (performance, powersave, schedutil, "
                                                    "ondemand, conservative, userspace)"));
                        ok = false;
                }
        }
        if ((k = conf_key(s, "EnergyPerformancePreference"))) {
                unsigned v;
                if (in(epps, k->value) || (safe_atou(k->value, &v) >= 0 && v <= 255))
                        r->epp = xstrdup(k->value);
                else {
                        strv_push(errors,
                                  conf_key_error(k, "expected default, performance, balance_performance, "
                                                    "balance_power, power or 0-255"));
                        ok = false;
                }
        }
        if ((k = conf_key(s, "MinFreq"))) {
                if (valid_min_freq(k->value))
                        r->min_freq = xstrdup(k->value);
                else {
                        strv_push(errors,
                                  conf_key_error(k, "expected kHz, a percentage of the maximum, or max"));
                        ok = false;
                }
        }
        if ((k = conf_key(s, "Boost")) && !parse_bool(k->value, &r->boost)) {
                strv_push(errors, conf_key_error(k, "expected yes or no"));
                ok = false;
        }
        if ((k = conf_key(s, "MaxExitLatencyUs")))
                ok = parse_latency(k, true, &r->max_exit_latency_us, errors) && ok;
        if ((k = conf_key(s, "GlobalMaxExitLatencyUs"))) {
                if (*name) {
                        strv_push(errors, conf_key_error(k, "the system-wide request belongs in [Power]"));
                        ok = false;
                } else
                        ok = parse_latency(k, false, &c->global_max_exit_latency_us, errors) && ok;
        }
        return ok;
}

PowerConfig *power_config_parse(Conf *conf, char ***errors)
{
        PowerConfig *c = xmalloc0(sizeof(PowerConfig));
        size_t allocated = 0;
        bool any = false, ok = true;

        assert(conf);

        c->global_max_exit_latency_us = -1;
        for (size_t i = 0; i < conf->n_sections; i++) {
                ConfSection *s = &conf->sections[i];
                const char *name = startswith(s->name, "Power");
                PowerSet r;

                if (!name || (*name != 0 && *name != ' '))
                        continue;
                s->used = true;
                any = true;
                name += strspn(name, " ");
                if (!parse_set(s, name, c, &r, errors)) {
                        set_clear(&r);
                        ok = false;
                        continue;
                }
                GREEDY_REALLOC(c->sets, allocated, c->n + 1);
                c->sets[c->n++] = r;
        }
        if (!any || !ok) {
                power_config_free(c);
                return NULL;
        }
        return c;
}

bool power_config_has_cpufreq(const PowerConfig *c)
{
        for (size_t i = 0; c && i < c->n; i++)
                if (c->sets[i].governor || c->sets[i].epp || c->sets[i].min_freq || c->sets[i].boost >= 0)
                        return true;
        return false;
}

bool power_config_has_idle(const PowerConfig *c)
{
        if (c && c->global_max_exit_latency_us >= 0)
                return true;
        for (size_t i = 0; c && i < c->n; i++)
                if (c->sets[i].max_exit_latency_us != POWER_LATENCY_UNSET)
                        return true;
        return false;
}

void power_config_note_beyond(const PowerConfig *c, const PlanContext *ctx, PlanNotes *notes)
{
        for (size_t i = 0; c && i < c->n; i++)
                cpu_spec_note_beyond(&c->sets[i].cpus, ctx->topology, "power", notes);
}

CpuSet *power_set_cpus(const PowerSet *s, const PlanContext *ctx)
{
        assert(s);

        /* All means every present CPU: an offline one keeps what survives hotplug (its PM QoS). */
        if (s->cpus.kind == CPU_SPEC_UNSET || s->cpus.kind == CPU_SPEC_ALL)
                return cpuset_dup(ctx->topology->present);
        return cpu_spec_resolve(&s->cpus, ctx);
}
