/* SPDX-License-Identifier: GPL-2.0-or-later */
#include "cli/local.h"
#include "core/config.h"

static const char *runtime_dir(void)
{
        const char *e = getenv("RUNTIME_DIRECTORY");
        return e && !strchr(e, ':') ? e : RTCTL_DEFAULT_RUNTIME_DIR;
}

char *local_default_profile(void)
{
        const char *e = getenv("STATE_DIRECTORY");
        _cleanup_free_ char *path =
            xasprintf("%s/active-profile", e && !strchr(e, ':') ? e : "/var/lib/rtctl");
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_conf_ Conf *c = NULL;
        _cleanup_free_ char *err = NULL;
        char *s = NULL;
        ConfKey *k;

        if (read_full_file(path, &s, NULL) >= 0) {
                char *n = xstrdup(strstrip(s));
                free(s);
                if (profile_name_valid(n))
                        return n;
                free(n);
        }
        if (conf_load_layered(search, "rtctl.conf", &c, &err) >= 0 &&
            (k = conf_key(conf_section(c, "Daemon"), "DefaultProfile")))
                return xstrdup(k->value);
        return xstrdup("desktop");
}

int local_pass(const char *policy_name, bool dry_run, PassResult *ret, Journal **ret_journal,
               char **ret_error)
{
        _cleanup_strv_free_ char **search = conf_search_path();
        _cleanup_free_ char *journal_path = xasprintf("%s/journal.json", runtime_dir());
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
        r = journal_open(journal_path, &journal, ret_error);
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
