/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <ctype.h>
#include <dirent.h>

#include "core/bootargs.h"
#include "core/cgroupfs.h"
#include "shared/sysfs.h"

/* Whether this v2 kernel makes isolated partitions: cpuset.cpus.exclusive (6.7), the file the cpuset
 * tuner itself judges by, in any cgroup with the cpuset controller; or the root's cpuset.cpus.isolated
 * (6.8), for a tree where no child has the controller yet. */
static bool v2_has_partitions(const char *mount)
{
        _cleanup_free_ char *isolated = xasprintf("%s/cpuset.cpus.isolated", mount);
        _cleanup_closedir_ DIR *d = sys_opendir(mount);
        struct dirent *de;

        if (sys_exists(isolated))
                return true;
        while (d && (de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *excl = xasprintf("%s/%s/cpuset.cpus.exclusive", mount, de->d_name);
                if (sys_exists(excl))
                        return true;
        }
        return false;
}

void kernel_flavour_read(KernelFlavour *ret)
{
        _cleanup_free_ char *version = NULL, *rt = NULL;

        assert(ret);

        (void)sys_read("/proc/sys/kernel/version", &version);
        *ret = (KernelFlavour){
            .realtime = (sys_read("/sys/kernel/realtime", &rt) >= 0 && streq(strstrip(rt), "1")) ||
                        (version && strstr(version, "PREEMPT_RT")),
            .preempt_dynamic = (version && strstr(version, "PREEMPT_DYNAMIC")) ||
                               sys_exists("/sys/kernel/debug/sched/preempt"),
            .nohz_full = sys_exists("/sys/devices/system/cpu/nohz_full"),
        };
        CgroupInfo c = {};
        if (cgroup_discover(&c) >= 0 && c.mode == CGROUP_V2)
                ret->domain_at_boot = !v2_has_partitions(c.mount);
        cgroup_info_clear(&c);
}

static void add(BootArgs *b, const char *key, char *value, char *reason)
{
        b->args = g_renew(BootArg, b->args, b->n + 1);
        b->args[b->n++] = (BootArg){.key = xstrdup(key), .value = value, .reason = reason};
}

/* What the tuners the profile uses need from the kernel command line (BOOT_NEEDS_*), each asked. */
static unsigned boot_needs(const Policy *p)
{
        unsigned needs = 0;

        for (size_t i = 0; i < tuners_n(); i++)
                if (p->config[i] && tuner_nth(i)->boot_needs)
                        needs |= tuner_nth(i)->boot_needs(p->config[i]);
        return needs;
}

int bootargs_plan_for(const Policy *p, const Topology *t, const KernelFlavour *k, BootArgs *ret,
                      char **ret_error)
{
        _cleanup_cpuset_ CpuSet *iso = NULL, *hk = NULL;
        _cleanup_free_ char *err = NULL;
        BootArgs b = {};
        bool threads;
        int r;

        *ret = (BootArgs){};
        if (!p)
                return 0;
        r = policy_cpus(p, t, &iso, &hk, &err);
        if (r < 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(err);
                return r;
        }
        threads = boot_needs(p) & BOOT_NEEDS_IRQ_THREADS;

        if (!cpuset_empty(iso)) {
                _cleanup_free_ char *i = cpuset_format_list(iso), *h = cpuset_format_list(hk);

                /* The "domain" flag only where nothing at run time can do its part: elsewhere the
                 * cpuset partition (v2) or sched_load_balance (v1) keeps the scheduler's load
                 * balancing off these CPUs, and that is undone at stop, a boot-time domain only by a
                 * reboot. */
                if (k->domain_at_boot)
                        add(&b, "isolcpus", xasprintf("domain,managed_irq,%s", i),
                            xstrdup("takes the isolated CPUs out of the scheduler's load balancing, which "
                                    "this kernel cannot do at run time (no isolated cpuset partitions "
                                    "before 6.7), and keeps kernel-managed IRQs (which rtctl cannot "
                                    "move) off them"));
                else
                        add(&b, "isolcpus", xasprintf("managed_irq,%s", i),
                            xstrdup("keeps kernel-managed IRQs (which rtctl cannot move) off the isolated "
                                    "CPUs"));
                if (k->nohz_full)
                        add(&b, "nohz_full", xstrdup(i),
                            xstrdup("stops the scheduler tick on an isolated CPU that runs one task"));
                add(&b, "rcu_nocbs", xstrdup(i),
                    xstrdup("runs RCU callbacks of the isolated CPUs on housekeeping CPUs"));
                add(&b, "irqaffinity", xstrdup(h),
                    xstrdup("IRQs start on housekeeping CPUs from boot, before rtctld places them"));
        }
        if (threads && !k->realtime)
                add(&b, "threadirqs", NULL,
                    xstrdup("IRQ handlers run in threads, so the profile's IRQ thread priorities apply"));
        if ((threads || !cpuset_empty(iso)) && k->preempt_dynamic && !k->realtime)
                add(&b, "preempt", xstrdup("full"),
                    xstrdup(
                        "full kernel preemption: a woken audio thread need not wait for a syscall to end"));
        *ret = b;
        return 0;
}

int bootargs_plan(const Policy *p, const Topology *t, BootArgs *ret)
{
        KernelFlavour k;

        kernel_flavour_read(&k);
        return bootargs_plan_for(p, t, &k, ret, NULL);
}

void bootargs_clear(BootArgs *b)
{
        assert(b);

        for (size_t i = 0; i < b->n; i++) {
                free(b->args[i].key);
                free(b->args[i].value);
                free(b->args[i].reason);
        }
        g_free(b->args);
        *b = (BootArgs){};
}

char *boot_arg_format(const BootArg *a)
{
        assert(a);

        return a->value ? xasprintf("%s=%s", a->key, a->value) : xstrdup(a->key);
}

static void append_word(char **s, const char *word)
{
        char *n = xasprintf("%s%s%s", strempty(*s), isempty(*s) ? "" : " ", word);
        free(*s);
        *s = n;
}

char *bootargs_format(const BootArgs *b)
{
        char *s = xstrdup("");

        assert(b);

        for (size_t i = 0; i < b->n; i++) {
                _cleanup_free_ char *w = boot_arg_format(&b->args[i]);
                append_word(&s, w);
        }
        return s;
}

/* The next word of a command line; double quotes group blanks into a value (param="a b"), as the
 * kernel's parser allows. NULL at the end. */
static char *next_word(const char **p)
{
        const char *s = *p, *start;
        bool quoted = false;
        char *w, *o;

        while (*s && isspace((unsigned char)*s))
                s++;
        if (!*s)
                return NULL;
        start = s;
        for (; *s && (quoted || !isspace((unsigned char)*s)); s++)
                if (*s == '"')
                        quoted = !quoted;
        *p = s;
        w = xstrndup(start, (size_t)(s - start));
        for (o = strchr(w, '"'); o; o = strchr(o, '"'))
                memmove(o, o + 1, strlen(o));
        return w;
}

int cmdline_find(const char *cmdline, const char *key, char **ret_value)
{
        assert(key);

        const char *p = cmdline;
        size_t klen = strlen(key);
        char *w, *found = NULL;
        bool have = false;

        while ((w = next_word(&p))) {
                if (streq(w, "--")) {
                        free(w);
                        break;
                }
                if (strneq(w, key, klen) && (w[klen] == 0 || w[klen] == '=')) {
                        free(found);
                        found = w[klen] == '=' ? xstrdup(w + klen + 1) : NULL;
                        have = true;
                }
                free(w);
        }
        if (ret_value)
                *ret_value = found;
        else
                free(found);
        return have;
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "managed_irq,domain,2-3" -> flags "domain managed_irq" (sorted) and CPUs 2-3. */
static bool split_flags(const char *value, char **ret_flags, CpuSet **ret_cpus)
{
        _cleanup_strv_free_ char **flags = NULL;
        _cleanup_free_ char *cpus = NULL, *copy = xstrdup(value);
        char *save = NULL;
        GString *f;

        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (isalpha((unsigned char)tok[0]))
                        strv_push(&flags, xstrdup(tok));
                else
                        append_word(&cpus, tok);
        }
        if (cpus)
                for (char *c = cpus; *c; c++)
                        if (*c == ' ')
                                *c = ',';
        if (cpuset_parse_list(strempty(cpus), CPUSET_MAX_CPUS, ret_cpus, NULL) < 0)
                return false;
        if (flags)
                qsort(flags, strv_length(flags), sizeof(char *), cmp_str);
        f = g_string_new(NULL);
        for (char **s = flags; s && *s; s++)
                g_string_append_printf(f, "%s%s", f->len ? " " : "", *s);
        *ret_flags = g_string_free(f, false);
        return true;
}

static bool values_equal(const char *a, const char *b)
{
        _cleanup_free_ char *fa = NULL, *fb = NULL;
        _cleanup_cpuset_ CpuSet *ca = NULL, *cb = NULL;
        bool ok_a, ok_b;

        if (!a || !b)
                return a == b;
        if (streq(a, b))
                return true;
        ok_a = split_flags(a, &fa, &ca);
        ok_b = split_flags(b, &fb, &cb);
        return ok_a && ok_b && streq(fa, fb) && cpuset_equal(ca, cb);
}

bool boot_arg_in_cmdline(const BootArg *a, const char *cmdline)
{
        _cleanup_free_ char *v = NULL;

        assert(a);

        if (cmdline_find(cmdline, a->key, &v) <= 0)
                return false;
        return values_equal(a->value, v);
}

char *bootargs_missing(const BootArgs *b, const char *running_cmdline)
{
        char *s = NULL;

        assert(b);

        for (size_t i = 0; i < b->n; i++)
                if (!boot_arg_in_cmdline(&b->args[i], strempty(running_cmdline))) {
                        _cleanup_free_ char *w = boot_arg_format(&b->args[i]);
                        append_word(&s, w);
                }
        return s;
}
