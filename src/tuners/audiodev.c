/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The sound devices' own power saving, from the [AudioDevices] section: the most common cause of clicks
 * and dropouts on laptops is not a CPU at all.
 *
 *   PowerSave=off       HDA codecs: snd_hda_intel's power_save 0 and power_save_controller N (the codec
 *                       powers down between sounds, and every wake-up is a pop and a latency spike)
 *   USBAutosuspend=off  USB audio interfaces and every hub above them: power/control on (a suspended
 *                       interface drops the first periods, and can take the stream with it)
 *   ASPM=off            the sound controller's PCIe link: link/l0s_aspm, l1_aspm and the L1 substates 0,
 *                       where the kernel offers them per device (CONFIG_PCIEASPM, 5.5 and later)
 *
 * The devices are found as [IRQ audio] finds them, by class: every card of the sound class
 * (/sys/class/sound/cardN) and the device it belongs to, a PCI function or a USB interface. Replanned on
 * sound and USB uevents (an interface plugged in later) and after resume. */
#include "core/audiodev.h"
#include "tuners/registry.h"
#include "shared/sysfs.h"

typedef struct AudioDevConfig {
        bool power_save_off;
        bool autosuspend_off;
        bool aspm_off;
} AudioDevConfig;

/* off: rtctl turns it off; keep: left as the machine has it (the default). */
static bool parse_switch(ConfKey *k, bool *ret, char ***errors)
{
        if (!k)
                return true;
        k->used = true;
        if (streq(k->value, "off"))
                *ret = true;
        else if (streq(k->value, "keep"))
                *ret = false;
        else {
                strv_push(errors, conf_key_error(k, "%s is off or keep", k->key));
                return false;
        }
        return true;
}

static void *audiodev_parse(Conf *conf, char ***errors)
{
        ConfSection *s = conf_section(conf, "AudioDevices");
        AudioDevConfig c = {}, *ret;

        if (!s)
                return NULL;
        parse_switch(conf_key(s, "PowerSave"), &c.power_save_off, errors);
        parse_switch(conf_key(s, "USBAutosuspend"), &c.autosuspend_off, errors);
        parse_switch(conf_key(s, "ASPM"), &c.aspm_off, errors);
        if (!c.power_save_off && !c.autosuspend_off && !c.aspm_off)
                return NULL;
        ret = xmalloc0(sizeof(AudioDevConfig));
        *ret = c;
        return ret;
}

static void audiodev_free_config(void *p)
{
        free(p);
}

static void want(Plan *plan, const char *path, const char *value)
{
        if (sys_exists(path))
                plan_add(plan, &setting_kind_file, "audiodev", 0, xstrdup(path), xstrdup(value));
}

static int audiodev_plan(const PlanContext *ctx, const void *config, const char *device, Plan *plan,
                         PlanNotes *notes)
{
        const AudioDevConfig *c = config;
        _cleanup_strv_free_ char **devs = audiodev_list(), **planned = NULL;

        (void)ctx;
        (void)device;
        for (char **d = devs; d && *d; d++) {
                if (audiodev_is_usb(*d)) {
                        _cleanup_strv_free_ char **chain =
                            c->autosuspend_off ? audiodev_usb_chain(*d) : NULL;
                        for (char **u = chain; u && *u; u++) {
                                _cleanup_free_ char *ctl = xasprintf("%s/power/control", *u);
                                if (!strv_contains(planned, ctl)) /* a hub two interfaces share */
                                        want(plan, ctl, "on");
                                strv_push(&planned, TAKE_PTR(ctl));
                        }
                        continue;
                }
                if (c->aspm_off && audiodev_on_gpu_link(*d)) {
                        plan_notes_add(notes, "audiodev", xstrdup(*d),
                                       xstrdup("the audio of a graphics card: its PCIe link is the GPU's, "
                                               "whose ASPM rtctl leaves alone"));
                        continue;
                }
                _cleanup_strv_free_ char **aspm = c->aspm_off ? audiodev_aspm_files(*d) : NULL;
                for (char **f = aspm; f && *f; f++)
                        want(plan, *f, "0");
        }
        /* The module's parameters hold for every HDA codec: set where it is loaded (want() plans only
         * files that exist). */
        if (c->power_save_off) {
                want(plan, HDA_PARAMS_DIR "/power_save", "0");
                want(plan, HDA_PARAMS_DIR "/power_save_controller", "N");
        }
        return 0;
}

const Tuner tuner_audiodev = {
    .name = "audiodev",
    .sections = (const char *const[]){"AudioDevices", NULL},
    .subsystems = (const char *const[]){"sound", "usb", NULL},
    .replan_whole = true,
    .after_resume = true,
    .parse = audiodev_parse,
    .free_config = audiodev_free_config,
    .plan = audiodev_plan,
};
