/* SPDX-License-Identifier: GPL-2.0-or-later */
/* /proc/cmdline (and a boot loader's command line) against the boot arguments rtctl computes. The
 * input's first line is one more key to look for; the rest is the command line. */
#include "core/bootargs.h"
#include "core/check-internal.h"
#include "fuzz.h"

static const char *const keys[] = {"nohz_full", "isolcpus", "rcu_nocbs",   "irqaffinity",  "threadirqs",
                                   "preempt",   "nohz",     "mitigations", "kthread_cpus", NULL};

static void check_key(const char *cmdline, const char *key)
{
        _cleanup_free_ char *value = NULL;
        int r = cmdline_find(cmdline, key, &value);

        fuzz_check(r == 0 || r == 1);
        fuzz_check(r == 1 || !value);
        /* What cmdline_find() reads is what boot_arg_in_cmdline() agrees is there. */
        if (r == 1) {
                BootArg a = {.key = (char *)key, .value = value};
                fuzz_check(boot_arg_in_cmdline(&a, cmdline));
        }
        (void)cmdline_has(cmdline, key);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        _cleanup_free_ char *text = fuzz_string(data, size);
        char *nl = strchr(text, '\n'), *cmdline = nl ? nl + 1 : text;
        BootArg args[] = {
            {.key = (char *)"nohz_full", .value = (char *)"2-3"},
            {.key = (char *)"isolcpus", .value = (char *)"managed_irq,domain,2-3"},
            {.key = (char *)"threadirqs"},
            {.key = (char *)"irqaffinity", .value = (char *)"0-1"},
        };
        BootArgs b = {.args = args, .n = ELEMENTSOF(args)};
        _cleanup_free_ char *missing = NULL;

        if (nl) {
                *nl = 0;
                if (*text && !strchr(text, ' ') && !strchr(text, '='))
                        check_key(cmdline, text);
        }
        for (const char *const *k = keys; *k; k++)
                check_key(cmdline, *k);
        /* An argument is reported missing exactly when boot_arg_in_cmdline() does not find it. */
        missing = bootargs_missing(&b, cmdline);
        for (size_t i = 0; i < b.n; i++) {
                _cleanup_free_ char *w = boot_arg_format(&b.args[i]);
                fuzz_check(!boot_arg_in_cmdline(&b.args[i], cmdline) == (missing && strstr(missing, w)));
        }
        return 0;
}
