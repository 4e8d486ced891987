/* SPDX-License-Identifier: GPL-2.0-or-later */
/* [Hold] rules of the base profile at run time: a matching process holds the rule's profile, as `rtctl
 * hold` would, until the last process the rule matched exits. Followed through the same process events
 * as [Attach] rules (manager-rules.c), and found by one /proc scan when the rules change or events were
 * lost (once the backlog of an overflow is read: the kernel keeps dropping events until then). Events
 * are not trusted alone: each sync, and one a second while a rule's hold is in force, checks that every
 * match still runs with its start time, so an exit the kernel dropped, or never sent, ends a hold all
 * the same, a second or two late, and a PID reused by another process is no match. The hold is an
 * ordinary one: ranked with the others, shown in Holds and in power-profiles-daemon's
 * ActiveProfileHolds with the rule's name as its application id; nobody's bus name keeps it, so only
 * the rule (or whom polkit lets release another's hold) ends it.
 *
 * Events only keep the matches; holds are taken and released from a timer, never inside the event
 * handler. A release waits until the rule has matched nothing for HOLD_RELEASE_USEC: a program that
 * renames itself back and forth (comm: rules; prctl(PR_SET_NAME) is free) or restarts costs one take and
 * at most one release a second, not a profile load and a pass per event. */
#include <time.h>

#include "daemon/manager.h"
#include "shared/log.h"

#define HOLD_RELEASE_USEC (1000ULL * 1000ULL)
/* The check of the matches while a hold is in force: one read of /proc/PID/stat per match (a DAW or
 * two), so a lost exit costs a second more of the held profile at most, and the wake-up comes only
 * while a program holds a profile, a time the machine is tuned for it, never for power. */
#define HOLD_VERIFY_USEC (1000ULL * 1000ULL)

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

static void sync_holds(Manager *m);

static int on_hold_timer(sd_event_source *s, uint64_t usec, void *userdata)
{
        Manager *m = userdata;

        (void)s;
        (void)usec;
        if (!m->stopping)
                sync_holds(m);
        return 0;
}

/* The timer, at usec from now (sooner if it is armed sooner). */
static void schedule(Manager *m, uint64_t usec)
{
        uint64_t now, at, armed;
        int r;

        if (!m->event || m->stopping)
                return;
        (void)sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        at = now + usec;
        if (!m->hold_timer) {
                r = sd_event_add_time(m->event, &m->hold_timer, CLOCK_MONOTONIC, at, 0, on_hold_timer, m);
                if (r < 0)
                        log_warning_errno(r, "Cannot arm the [Hold] rules' timer: %m");
                return;
        }
        if (sd_event_source_get_enabled(m->hold_timer, NULL) > 0 &&
            sd_event_source_get_time(m->hold_timer, &armed) >= 0 && armed <= at)
                return;
        (void)sd_event_source_set_time(m->hold_timer, at);
        (void)sd_event_source_set_enabled(m->hold_timer, SD_EVENT_ONESHOT);
}

/* A rule's state after a change of its matches. */
static void note_match(Manager *m, unsigned rule)
{
        HoldRuleState *st = &m->hold_state[rule];

        if (rule_matched(m, rule)) {
                st->unmatched_since = 0;
                st->gone_unseen = false;
                if (!st->tried)
                        schedule(m, 0);
        } else if (!st->unmatched_since) {
                st->unmatched_since = now_usec(CLOCK_MONOTONIC);
                if (st->tried)
                        schedule(m, HOLD_RELEASE_USEC);
        }
}

static void drop(Manager *m, HoldMatch *x)
{
        unsigned rule = x->rule;

        memmove(x, x + 1, sizeof(HoldMatch) * (m->n_hold_matches - (size_t)(x - m->hold_matches) - 1));
        m->n_hold_matches--;
        note_match(m, rule);
}

/* Whether pid matches a rule now; adds, moves or drops its match. */
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
        /* A zombie whose exit was lost is found here by the same flag its check reads. */
        if (rule < 0 || task_info(pid, &t) < 0 || (t.flags & PF_KTHREAD) || task_info_ended(&t) ||
            pid == 1) {
                if (x)
                        drop(m, x);
                return;
        }
        if (x && x->rule == (unsigned)rule && x->starttime == t.starttime)
                return;
        if (x)
                drop(m, x);
        if (m->n_hold_matches >= RULE_MATCHES_MAX) {
                /* Not kept: before a rule is found to match nothing, /proc is scanned again. */
                m->hold_matches_full = true;
                return;
        }
        GREEDY_REALLOC(m->hold_matches, m->hold_matches_allocated, m->n_hold_matches + 1);
        m->hold_matches[m->n_hold_matches++] =
            (HoldMatch){.pid = pid, .starttime = t.starttime, .rule = (unsigned)rule};
        HoldRuleState *st = &m->hold_state[rule];
        if (!st->tried && !st->program) {
                st->pid = pid;
                st->uid = uid;
                st->program = xstrdup(exe ? exe : t.comm);
        }
        note_match(m, (unsigned)rule);
}

static void take(Manager *m, unsigned rule)
{
        const AttachRule *r = hold_rule(m, rule);
        HoldRuleState *st = &m->hold_state[rule];
        _cleanup_free_ char *reason = NULL, *holder = NULL, *err = NULL, *shown = NULL;
        uint32_t cookie = 0;
        int q;

        st->tried = true;
        shown = text_escape(strempty(st->program));
        reason = xasprintf("%s runs (PID %u), rule %s", shown, st->pid, r->name);
        holder = xasprintf("[Hold %s]", r->name);
        q = manager_hold(m, r->profile, reason, r->name, holder, st->uid, &cookie, &err);
        if (q < 0)
                log_warning("Rule [Hold %s]: cannot hold profile %s for %s: %s", r->name, r->profile, shown,
                            err ? err : strerror(-q));
        else
                st->cookie = cookie;
}

/* The rule's own hold, if it is still there: a cookie polkit's release-other-hold ended could be drawn
 * again for another holder's. */
static bool own_hold(Manager *m, unsigned rule)
{
        const HoldRuleState *st = &m->hold_state[rule];
        _cleanup_free_ char *holder = xasprintf("[Hold %s]", hold_rule(m, rule)->name);
        const Hold *h = st->cookie ? manager_find_hold(m, st->cookie) : NULL;

        return h && streq(h->bus_name, holder);
}

static void release(Manager *m, unsigned rule)
{
        HoldRuleState *st = &m->hold_state[rule];

        if (own_hold(m, rule)) {
                if (st->gone_unseen)
                        log_notice(
                            "Rule [Hold %s]: its last process is gone, its exit unseen (process events "
                            "were lost); its hold ends.",
                            hold_rule(m, rule)->name);
                else
                        log_info("Rule [Hold %s]: no matching process for a second; its hold ends.",
                                 hold_rule(m, rule)->name);
                (void)manager_release(m, st->cookie);
        }
        st->cookie = 0;
        st->tried = false;
        st->gone_unseen = false;
        free(st->program);
        st->program = NULL;
}

static void rescan_matches(Manager *m)
{
        TaskScan scan = {};
        const TaskInfo *t;
        size_t n;

        m->n_hold_matches = 0;
        m->hold_matches_full = false;
        t = task_scan_all(&scan, &n);
        for (size_t i = 0; i < n; i++)
                if (!(t[i].flags & PF_KTHREAD))
                        evaluate(m, t[i].pid, t[i].comm);
        task_scan_clear(&scan);
        for (unsigned r = 0; r < m->hold_rules->n; r++)
                note_match(m, r);
}

/* Drops the matches that no longer run as the process matched: gone, exiting (a zombie), or their PID
 * another process's (another start time). Events said none of it: theirs were lost. */
static void verify_matches(Manager *m)
{
        for (size_t i = m->n_hold_matches; i > 0; i--) {
                HoldMatch *x = &m->hold_matches[i - 1];
                unsigned rule = x->rule, pid = x->pid;
                TaskInfo t;

                if (task_info(pid, &t) >= 0 && t.starttime == x->starttime && !task_info_ended(&t))
                        continue;
                drop(m, x);
                log_debug("Rule [Hold %s]: process %u is gone, no exit event said so.",
                          hold_rule(m, rule)->name, pid);
                if (!rule_matched(m, rule))
                        m->hold_state[rule].gone_unseen = true;
        }
}

static bool holding(const Manager *m)
{
        for (unsigned r = 0; r < m->hold_rules->n; r++)
                if (m->hold_state[r].cookie)
                        return true;
        return false;
}

/* Takes the holds of the rules that match, and ends those of the rules that have matched nothing long
 * enough. manager_hold() and manager_release() may apply a profile (and scan /proc for [Attach] rules):
 * nothing of the matches is held across them. */
static void sync_holds(Manager *m)
{
        uint64_t now, wait = 0;

        if (!m->hold_rules)
                return;
        verify_matches(m);
        if (m->hold_resync) {
                m->hold_resync = false;
                manager_hold_rules_rescan(m, "process events lost");
        } else if (m->hold_matches_full) {
                bool releasing = false;
                for (unsigned r = 0; r < m->hold_rules->n; r++)
                        releasing |= m->hold_state[r].tried && m->hold_state[r].unmatched_since;
                if (releasing)
                        rescan_matches(m);
        }
        /* After the check: a match it dropped started its rule's second from now. */
        now = now_usec(CLOCK_MONOTONIC);
        for (unsigned r = 0; m->hold_rules && r < m->hold_rules->n; r++) {
                HoldRuleState *st = &m->hold_state[r];
                if (!st->unmatched_since) {
                        if (!st->tried && rule_matched(m, r))
                                take(m, r);
                } else if (st->tried) {
                        uint64_t since = now - st->unmatched_since;
                        if (since >= HOLD_RELEASE_USEC)
                                release(m, r);
                        else if (!wait || HOLD_RELEASE_USEC - since < wait)
                                wait = HOLD_RELEASE_USEC - since;
                }
        }
        if (m->hold_rules && holding(m))
                schedule(m, HOLD_VERIFY_USEC);
        if (wait)
                schedule(m, wait);
}

void manager_hold_rules_rescan(Manager *m, const char *why)
{
        assert(m);

        if (!m->hold_rules)
                return;
        log_debug("Scanning /proc for [Hold] rules (%s).", why);
        rescan_matches(m);
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
                /* Lost from here on, unsaid: whichever sync comes next scans /proc again. */
                m->hold_resync = true;
                break;
        case PROC_EV_CAUGHT_UP:
                m->hold_resync = true;
                schedule(m, 0);
                break;
        }
}

bool manager_hold_rules_use_active(const Manager *m)
{
        assert(m);

        return m->hold_rules && m->hold_rules->uses_active;
}

static void states_free(HoldRuleState *st, size_t n)
{
        for (size_t i = 0; st && i < n; i++)
                free(st[i].program);
        free(st);
}

void manager_hold_rules_set(Manager *m, AttachRules *rules)
{
        AttachRules *old = m->hold_rules;
        HoldRuleState *old_state = m->hold_state;

        assert(m);

        m->hold_rules = rules;
        m->hold_state = rules ? xmalloc0(sizeof(HoldRuleState) * rules->n) : NULL;
        m->n_hold_matches = 0;
        /* A rule kept by name and profile (a reload) keeps its hold: the profile in force does not flicker
         * from the held one to the base and back. */
        for (unsigned o = 0; old && o < old->n; o++)
                for (unsigned r = 0; rules && r < rules->n; r++)
                        if (old_state[o].cookie && streq(old->rules[o].name, rules->rules[r].name) &&
                            streq(old->rules[o].profile, rules->rules[r].profile)) {
                                m->hold_state[r] = old_state[o];
                                m->hold_state[r].unmatched_since = 0;
                                old_state[o] = (HoldRuleState){};
                        }
        if (rules) {
                manager_rules_follow(m);
                if (!m->procs) {
                        /* Without exits to follow, a hold would outlive its program. */
                        log_warning(
                            "Without process events the %zu [Hold] rule%s of the base profile cannot "
                            "tell when a program exits: not followed.",
                            rules->n, rules->n == 1 ? "" : "s");
                        for (unsigned r = 0; r < rules->n; r++)
                                if (own_hold(m, r))
                                        (void)manager_release(m, m->hold_state[r].cookie);
                        states_free(m->hold_state, rules->n);
                        m->hold_state = NULL;
                        attach_rules_free(rules);
                        m->hold_rules = NULL;
                } else {
                        log_info("Following %zu [Hold] rule%s of the base profile.", rules->n,
                                 rules->n == 1 ? "" : "s");
                        rescan_matches(m);
                        sync_holds(m); /* the programs already running hold at once */
                }
        }
        manager_rules_follow(m);
        /* Then the holds of the rules that went. */
        for (unsigned o = 0; old && o < old->n; o++) {
                _cleanup_free_ char *holder = xasprintf("[Hold %s]", old->rules[o].name);
                const Hold *h = old_state[o].cookie ? manager_find_hold(m, old_state[o].cookie) : NULL;
                if (h && streq(h->bus_name, holder))
                        (void)manager_release(m, old_state[o].cookie);
        }
        states_free(old_state, old ? old->n : 0);
        attach_rules_free(old);
}

void manager_hold_rules_free(Manager *m)
{
        assert(m);

        m->hold_timer = sd_event_source_disable_unref(m->hold_timer);
        states_free(m->hold_state, m->hold_rules ? m->hold_rules->n : 0);
        attach_rules_free(m->hold_rules);
        free(m->hold_matches);
        m->hold_state = NULL;
        m->hold_rules = NULL;
}
