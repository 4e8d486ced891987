/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [Hold] rules of the base profile at run time: a matching process holds the rule's profile, as `rtctl
 * hold` would, until the last process the rule matched exits. Followed through the same process events
 * as [Attach] rules (manager-rules.c), and found by one /proc scan when the rules change or events were
 * lost. The hold is an ordinary one: ranked with the others, shown in Holds and in power-profiles-
 * daemon's ActiveProfileHolds with the rule's name as its application id; nobody's bus name keeps it,
 * so only the rule (or whom polkit lets release another's hold) ends it. */
#include "daemon/manager.h"
#include "shared/log.h"

static const AttachRule *hold_rule(const Manager *m, unsigned i)
{
        return &m->hold_rules->rules[i];
}

static HoldMatch *find_match(Manager *m, unsigned pid)
{
        for (size_t i = 0; i < m->n_hold_matches; i++)
                if (m->hold_matches[i].pid == pid)
                        return &m->hold_matches[i];
        return NULL;
}

static bool rule_matched(const Manager *m, unsigned rule)
{
        for (size_t i = 0; i < m->n_hold_matches; i++)
                if (m->hold_matches[i].rule == rule)
                        return true;
        return false;
}

/* The first process of a rule: its hold taken (tried once until the rule matches nothing again). */
static void take(Manager *m, unsigned rule, unsigned pid, uid_t uid, const char *program)
{
        const AttachRule *r = hold_rule(m, rule);
        _cleanup_free_ char *reason = NULL, *holder = NULL, *err = NULL, *shown = NULL;
        uint32_t cookie = 0;
        int q;

        if (m->hold_tried[rule])
                return;
        m->hold_tried[rule] = true;
        shown = text_escape(program);
        reason = xasprintf("%s runs (PID %u), rule %s", shown, pid, r->name);
        holder = xasprintf("[Hold %s]", r->name);
        q = manager_hold(m, r->profile, reason, r->name, holder, uid, &cookie, &err);
        if (q < 0) {
                log_warning("Rule [Hold %s]: cannot hold profile %s for %s: %s", r->name, r->profile, shown,
                            err ? err : strerror(-q));
                return;
        }
        m->hold_cookies[rule] = cookie;
}

/* The rule matches nothing any more: its hold ends, if nobody ended it already. */
static void release(Manager *m, unsigned rule)
{
        uint32_t cookie = m->hold_cookies[rule];

        m->hold_cookies[rule] = 0;
        m->hold_tried[rule] = false;
        if (cookie && manager_find_hold(m, cookie)) {
                log_info("Rule [Hold %s]: the last matching process exited.", hold_rule(m, rule)->name);
                (void)manager_release(m, cookie);
        }
}

static void drop(Manager *m, HoldMatch *x)
{
        unsigned rule = x->rule;

        memmove(x, x + 1, sizeof(HoldMatch) * (m->n_hold_matches - (size_t)(x - m->hold_matches) - 1));
        m->n_hold_matches--;
        if (!rule_matched(m, rule))
                release(m, rule);
}

/* Whether pid matches a rule now; adds, moves or drops its match, and takes or ends holds. */
static void evaluate(Manager *m, unsigned pid, const char *comm)
{
        HoldMatch *x = find_match(m, pid);
        _cleanup_free_ char *exe = NULL;
        AttachProc p;
        TaskInfo t;
        uid_t uid = 0;
        int rule;

        attach_proc_init(&p, pid, comm);
        rule = attach_rules_match(m->hold_rules, &p, m->active_uids, m->n_active_uids);
        if (rule >= 0) {
                exe = p.exe ? xstrdup(p.exe) : NULL;
                uid = p.have_uid && p.uid_error >= 0 ? p.uid : 0;
        }
        attach_proc_clear(&p);
        if (rule < 0 || task_info(pid, &t) < 0 || (t.flags & PF_KTHREAD) || pid == 1) {
                if (x)
                        drop(m, x);
                return;
        }
        if (x && x->rule == (unsigned)rule && x->starttime == t.starttime)
                return;
        if (x)
                drop(m, x);
        if (m->n_hold_matches >= RULE_MATCHES_MAX)
                return; /* the rule has matches enough to keep its hold */
        GREEDY_REALLOC(m->hold_matches, m->hold_matches_allocated, m->n_hold_matches + 1);
        m->hold_matches[m->n_hold_matches++] =
            (HoldMatch){.pid = pid, .starttime = t.starttime, .rule = (unsigned)rule};
        take(m, (unsigned)rule, pid, uid, exe ? exe : t.comm);
}

void manager_hold_rules_rescan(Manager *m, const char *why)
{
        TaskScan scan = {};
        const TaskInfo *t;
        size_t n;

        assert(m);

        if (!m->hold_rules)
                return;
        log_debug("Scanning /proc for [Hold] rules (%s).", why);
        /* Matches start over; a rule that still matches keeps its hold (it is not tried again). */
        m->n_hold_matches = 0;
        t = task_scan_all(&scan, &n);
        for (size_t i = 0; i < n; i++)
                if (!(t[i].flags & PF_KTHREAD))
                        evaluate(m, t[i].pid, t[i].comm);
        task_scan_clear(&scan);
        for (unsigned r = 0; r < m->hold_rules->n; r++)
                if (!rule_matched(m, r))
                        release(m, r);
}

void manager_hold_rules_event(Manager *m, const ProcEvent *ev)
{
        HoldMatch *x;

        assert(m);
        assert(ev);

        if (!m->hold_rules)
                return;
        switch (ev->type) {
        case PROC_EV_EXEC:
                evaluate(m, ev->pid, NULL);
                break;
        case PROC_EV_COMM:
                if (ev->tid == ev->pid)
                        evaluate(m, ev->pid, ev->comm);
                break;
        case PROC_EV_FORK:
                /* A child runs its parent's program until it execs. */
                if (ev->pid == ev->tid && find_match(m, ev->parent_pid))
                        evaluate(m, ev->pid, NULL);
                break;
        case PROC_EV_EXIT:
                if (ev->tid == ev->pid && (x = find_match(m, ev->pid)))
                        drop(m, x);
                break;
        case PROC_EV_OVERRUN:
                manager_hold_rules_rescan(m, "process events lost");
                break;
        }
}

bool manager_hold_rules_use_active(const Manager *m)
{
        assert(m);

        return m->hold_rules && m->hold_rules->uses_active;
}

void manager_hold_rules_set(Manager *m, AttachRules *rules)
{
        AttachRules *old = m->hold_rules;
        _cleanup_free_ uint32_t *old_cookies = m->hold_cookies;
        _cleanup_free_ bool *old_tried = m->hold_tried;

        assert(m);

        m->hold_rules = rules;
        m->hold_cookies = rules ? xmalloc0(sizeof(uint32_t) * rules->n) : NULL;
        m->hold_tried = rules ? xmalloc0(sizeof(bool) * rules->n) : NULL;
        m->n_hold_matches = 0;
        /* A rule kept by name and profile (a reload) keeps its hold: the profile in force does not flicker
         * from the held one to the base and back. */
        for (unsigned o = 0; old && o < old->n; o++)
                for (unsigned r = 0; rules && r < rules->n; r++)
                        if (old_cookies[o] && streq(old->rules[o].name, rules->rules[r].name) &&
                            streq(old->rules[o].profile, rules->rules[r].profile)) {
                                m->hold_cookies[r] = old_cookies[o];
                                old_cookies[o] = 0;
                                m->hold_tried[r] = old_tried[o];
                        }
        if (rules)
                log_info("Following %zu [Hold] rule%s of the base profile.", rules->n,
                         rules->n == 1 ? "" : "s");
        manager_rules_follow(m);
        manager_hold_rules_rescan(m, "hold rules");
        /* Then the holds of the rules that went. */
        for (unsigned o = 0; old && o < old->n; o++)
                if (old_cookies[o] && manager_find_hold(m, old_cookies[o]))
                        (void)manager_release(m, old_cookies[o]);
        attach_rules_free(old);
}

void manager_hold_rules_free(Manager *m)
{
        assert(m);

        attach_rules_free(m->hold_rules);
        free(m->hold_cookies);
        free(m->hold_tried);
        free(m->hold_matches);
        m->hold_rules = NULL;
}
