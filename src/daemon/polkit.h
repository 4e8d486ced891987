/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-bus.h>

/* The actions of dbus/org.rtctl.policy: one id each, so that an admin can change one with a rules file. */
#define ACTION_HOLD_PROFILE       "org.rtctl.hold-profile"
#define ACTION_RELEASE_OTHER_HOLD "org.rtctl.release-other-hold"
#define ACTION_ATTACH_OWN         "org.rtctl.attach-own-process"
#define ACTION_ATTACH_OTHER       "org.rtctl.attach-other-process"
#define ACTION_SET_PROFILE        "org.rtctl.set-profile"
#define ACTION_RELOAD             "org.rtctl.reload"
#define ACTION_RESTORE            "org.rtctl.restore"
#define ACTION_PIN_IRQ            "org.rtctl.pin-irq"
/* power-profiles-daemon's API (bus-ppd.c): open to the active session, as power-profiles-daemon's are. */
#define ACTION_PPD_SWITCH "org.rtctl.power-profiles.switch-profile"
#define ACTION_PPD_HOLD   "org.rtctl.power-profiles.hold-profile"

/* Polkit's answers to method calls, asked without blocking: while polkit thinks (or waits for the user
 * to type a password), the loop goes on, and the call is dispatched again once the answer is in. */
typedef struct Polkit Polkit;

Polkit *polkit_new(void);
void polkit_free(Polkit *p);

/* May the caller of call do action? 1: yes (uid 0 always may); 0: polkit was asked, and the call will
 * be dispatched again when it answers: the method handler returns without replying; < 0: no, with
 * org.rtctl.Error.NotAuthorized in error naming the action and why. Without polkit on the bus only uid 0
 * may act. The caller's allow-interactive-authorization flag is passed on to polkit. At most 16 calls of
 * one user (over all its connections), and 96 in all, wait for polkit; beyond,
 * org.rtctl.Error.LimitExceeded. A waiting call keeps only the descriptors its arguments name. */
int polkit_authorize(Polkit *p, sd_bus_message *call, const char *action, sd_bus_error *error);

/* The caller with unique name sender left the bus: drop the calls of its that wait for polkit, their
 * descriptors with them. */
void polkit_forget(Polkit *p, const char *sender);

/* The caller's uid (effective where the bus tells it). */
int bus_caller_uid(sd_bus_message *call, uid_t *ret);
