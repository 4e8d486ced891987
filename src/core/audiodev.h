/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdbool.h>

/* The sound devices, found by class as [IRQ audio] finds them: every card of /sys/class/sound and the
 * device it belongs to (a PCI function, or a USB interface), with the power-saving knobs of each. Paths
 * as the kernel names them; read through the root prefix. Shared by the audiodev tuner and rtctl check. */

#define HDA_PARAMS_DIR "/sys/module/snd_hda_intel/parameters"

/* Each card's device, resolved ("/sys/devices/pci0000:00/.../usb1/1-2/1-2:1.0"), each once. */
char **audiodev_list(void);
/* Whether a device is a USB interface (a USB audio card's device is one). */
bool audiodev_is_usb(const char *dev);
/* The USB devices from an interface's own up to its root hub: each one's power/control keeps it awake. */
char **audiodev_usb_chain(const char *interface);
/* Whether a PCI function is the audio of a graphics card (HDMI/DP audio: function 0 of the same device
 * is a display controller), whose link is the GPU's: ASPM=off leaves it alone. */
bool audiodev_on_gpu_link(const char *dev);
/* The ASPM state files a PCI function's link has (link/l1_aspm, ...), where the kernel shows them. */
char **audiodev_aspm_files(const char *dev);
