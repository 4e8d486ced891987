/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Profiles with their includes and drop-ins, and rtctl.conf. The input is one or more files separated
 * by form feeds, each "NAME\nTEXT". The first is loaded as a profile; Include= finds the others by name,
 * and "NAME.d/DROPIN" ones are merged over NAME in input order. It is also read as rtctl.conf. */
#include "core/daemon-conf.h"
#include "core/policy.h"
#include "fuzz.h"
#include "tuners/registry.h"

#define MAX_PROFILES 8

typedef struct Profiles {
        char *name[MAX_PROFILES];
        char *text[MAX_PROFILES];
        size_t size[MAX_PROFILES];
        size_t n;
} Profiles;

static int load(void *userdata, const char *relpath, Conf **ret, char **ret_error)
{
        Profiles *p = userdata;
        _cleanup_conf_ Conf *base = NULL;
        int r;

        for (size_t i = 0; i < p->n && !base; i++) {
                _cleanup_free_ char *rel = xasprintf("profiles/%s.conf", p->name[i]);
                if (streq(rel, relpath)) {
                        r = conf_parse_data(relpath, p->text[i], p->size[i], &base, ret_error);
                        if (r < 0)
                                return r;
                }
        }
        if (!base)
                return -ENOENT;
        /* relpath is "profiles/NAME.conf"; NAME's drop-ins are "NAME.d/..." */
        _cleanup_free_ char *prefix = xasprintf("%.*s.d/", (int)(strlen(relpath) - strlen("profiles/.conf")),
                                                relpath + strlen("profiles/"));
        for (size_t i = 0; i < p->n; i++) {
                _cleanup_free_ char *path = xasprintf("profiles/%s", p->name[i]);
                Conf *dropin = NULL;

                if (!startswith(p->name[i], prefix))
                        continue;
                r = conf_parse_data(path, p->text[i], p->size[i], &dropin, ret_error);
                if (r < 0)
                        return r;
                conf_merge(base, dropin);
        }
        *ret = TAKE_PTR(base);
        return 0;
}

/* Every problem is a line of its own that names the file (and, after it, line and key). */
static void check_error(const char *err, const char *file)
{
        fuzz_check(err && *err);
        for (const char *l = err; l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (!startswith(l, file) && !startswith(l, "no profile named")) {
                        fprintf(stderr, "a problem's line names no file:\n%s\n", err);
                        abort();
                }
}

static void check_daemon_conf(const char *text, size_t size)
{
        _cleanup_conf_ Conf *c = NULL;
        _cleanup_free_ char *err = NULL;
        DaemonConf d = {};

        if (conf_parse_data("rtctl.conf", text, size, &c, &err) < 0 || daemon_conf_parse(c, &d, &err) < 0) {
                check_error(err, "rtctl.conf");
                return;
        }
        fuzz_check(!err && profile_name_valid(d.default_profile));
        daemon_conf_clear(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_policy_ Policy *policy = NULL;
        _cleanup_free_ char *err = NULL;
        const char *p = (const char *)data, *end = p + size;
        Profiles profiles = {};
        int r;

        tuners_register_all();
        while (p < end && profiles.n < MAX_PROFILES) {
                const char *ff = memchr(p, '\f', (size_t)(end - p)) ?: end;
                const char *nl = memchr(p, '\n', (size_t)(ff - p)) ?: ff;
                size_t i = profiles.n++;

                profiles.name[i] = xstrndup(p, (size_t)(nl - p));
                profiles.size[i] = nl < ff ? (size_t)(ff - nl - 1) : 0;
                profiles.text[i] = xmalloc0(profiles.size[i] + 1);
                memcpy(profiles.text[i], nl < ff ? nl + 1 : nl, profiles.size[i]);
                p = ff + 1;
        }
        if (profiles.n > 0 && profile_name_valid(profiles.name[0])) {
                r = policy_load_from(&(ConfSource){load, &profiles}, profiles.name[0], &policy, &err);
                if (r < 0) {
                        fuzz_check(r == -EINVAL);
                        check_error(err, "profiles/");
                } else
                        fuzz_check(policy && streq(policy->name, profiles.name[0]) && !err);
        }
        if (profiles.n > 0)
                check_daemon_conf(profiles.text[0], profiles.size[0]);
        for (size_t i = 0; i < profiles.n; i++) {
                free(profiles.name[i]);
                free(profiles.text[i]);
        }
        return 0;
}
