/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "cli/local.h"
#include "core/config.h"
#include "core/daemon-conf.h"

char *local_default_profile(void)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_free_ char *state = rtctl_state_dir(), *err = NULL;
        DaemonConf conf;
        char *name;

        if (daemon_conf_load(search, &conf, &err) < 0)
                conf = daemon_conf_defaults();
        name = rtctl_initial_profile(state, conf.default_profile);
        daemon_conf_clear(&conf);
        return name;
}

int local_pass(const char *policy_name, bool dry_run, PassResult *ret, Journal **ret_journal,
               char **ret_error)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_free_ char *runtime = rtctl_runtime_dir();
        _cleanup_free_ char *journal_path = xasprintf("%s/journal.json", runtime);
        _cleanup_journal_ Journal *journal = NULL;
        _cleanup_topology_ Topology *topo = NULL;
        _cleanup_policy_ Policy *policy = NULL;
        Dirty all = {};
        int r;

        if (policy_name) {
                r = policy_load(search, policy_name, &policy, ret_error);
                if (r < 0)
                        return r;
        }
        r = topology_load(NULL, &topo);
        if (r < 0) {
                *ret_error = xasprintf("cannot read the CPU topology: %s", strerror(-r));
                return r;
        }
        r = journal_open(journal_path, JOURNAL_RUNTIME, &journal, ret_error);
        if (r < 0)
                return r;
        dirty_mark_all(&all);
        reconcile_pass(policy, topo, journal, &all, dry_run, ret);
        dirty_clear(&all);
        if (ret->error) {
                *ret_error = xstrdup(ret->error);
                return -EINVAL;
        }
        if (ret_journal)
                *ret_journal = TAKE_PTR(journal);
        return 0;
}
