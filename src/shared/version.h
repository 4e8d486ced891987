/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

/* What this build has compiled in, as "+NAME" or "-NAME" words separated by spaces (systemd's style), for
 * rtctl --version and rtctld --version. A static string; never NULL. */
const char *rtctl_features(void);
