/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-bus.h>

typedef struct Manager Manager;
typedef struct BusReads BusReads;

#define RTCTL_ERROR_BUSY "org.rtctl.Error.Busy"

/* How many read calls one caller (a unique bus name) may have waiting; more are answered at once with
 * org.rtctl.Error.Busy. A client that waits for each answer before the next call never meets it. */
#define READS_PER_CALLER 16
/* One user over all its connections, so that no user takes more than a quarter of the places below: as
 * many as the connections the system bus allows a user, so a client with one call under way on each
 * never meets it. */
#define READS_PER_USER 256
/* All callers together: beyond this every read is answered Busy (memory stays bounded however many
 * connections the bus allows). A waiting call keeps no descriptor, whatever the caller attached. */
#define READS_MAX 1024

/* Takes the read-only methods anyone may call (Plan, ListIrqs, Verify, Check) off the bus's own dispatch:
 * a bus filter puts each call in its caller's queue, and a low-priority source answers one call per loop
 * iteration, taking the callers in turn. So every method that changes the machine, and the pass it
 * waits for, runs ahead of the reads, and no caller's backlog delays another caller's read by more than
 * one call each. Other messages, and messages re-queued with sd_bus_enqueue_for_read() (polkit's answer
 * arrived), pass straight through. Call after sd_bus_attach_event(). */
int bus_reads_setup(Manager *m);
void bus_reads_free(BusReads *q);
/* A caller left the bus: nobody would read the answers to its waiting reads. */
void bus_reads_forget(BusReads *q, const char *sender);

/* The handlers, also in the vtable (introspection; and a call that a filter does not see). */
int bus_method_plan(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int bus_method_list_irqs(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int bus_method_verify(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int bus_method_check(sd_bus_message *msg, void *userdata, sd_bus_error *error);
