/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <systemd/sd-event.h>

/* Kernel process events from the proc connector (NETLINK_CONNECTOR, CN_IDX_PROC). pid is the process
 * (the kernel's tgid), tid the thread. */
typedef enum ProcEventType {
        PROC_EV_FORK, /* tid of pid was created by parent_tid of parent_pid */
        PROC_EV_EXEC, /* pid runs a new program */
        PROC_EV_COMM, /* thread tid of pid took the name comm (prctl(PR_SET_NAME), /proc/PID/comm) */
        PROC_EV_EXIT, /* thread tid of pid ended */
        /* The socket overflowed (ENOBUFS): from here the kernel drops every event, saying nothing more,
         * until the queue has been read empty; then comes PROC_EV_CAUGHT_UP. */
        PROC_EV_OVERRUN,
        /* The queue of an overflow is read: what the lost events said is found by one /proc scan now. */
        PROC_EV_CAUGHT_UP,
} ProcEventType;

typedef struct ProcEvent {
        ProcEventType type;
        unsigned pid, tid;
        unsigned parent_pid, parent_tid;
        const char *comm;
} ProcEvent;

typedef void (*ProcEventHandler)(const ProcEvent *ev, void *userdata);
typedef struct ProcMonitor ProcMonitor;

/* Calls handler for every process event in a datagram of len bytes from the proc connector (netlink
 * messages, each a cn_msg holding a proc_event); what is malformed or of another kind is skipped. */
void proc_events_parse(const void *buf, size_t len, ProcEventHandler handler, void *userdata);

/* Subscribes (PROC_CN_MCAST_LISTEN; needs CAP_NET_ADMIN). The source runs below the reconcile pass in
 * priority: under an exec storm the pass a match scheduled still runs, and the bus stays served first. */
int proc_monitor_new(sd_event *e, ProcEventHandler handler, void *userdata, ProcMonitor **ret);
/* Unsubscribes (PROC_CN_MCAST_IGNORE) and closes. */
void proc_monitor_free(ProcMonitor *m);
