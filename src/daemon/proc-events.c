/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <limits.h>
#include <linux/netlink.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <sys/socket.h>

#include "daemon/proc-events.h"
#include "shared/log.h"

/* Messages handled per dispatch: a storm of forks and execs cannot keep the loop from the bus. */
#define BATCH 256
/* Room for a burst (a make -j, a desktop login) before the kernel drops events. */
#define RCVBUF (4 * 1024 * 1024)

struct ProcMonitor {
        ProcEventHandler handler;
        void *userdata;
        struct nl_sock *sock;
        sd_event_source *io;
        bool subscribed; /* an IGNORE without a LISTEN would miscount the kernel's listeners */
        bool lossy;      /* told of an overflow (ENOBUFS), and the queue not read empty since */
};

static int send_op(ProcMonitor *m, enum proc_cn_mcast_op op)
{
        union {
                struct cn_msg msg;
                unsigned char buf[sizeof(struct cn_msg) + sizeof(enum proc_cn_mcast_op)];
        } u = {};
        int r;

        u.msg.id.idx = CN_IDX_PROC;
        u.msg.id.val = CN_VAL_PROC;
        u.msg.len = sizeof op;
        memcpy(u.msg.data, &op, sizeof op);
        r = nl_send_simple(m->sock, NLMSG_DONE, 0, u.buf, sizeof u.buf);
        return r < 0 ? -EIO : 0;
}

static void dispatch(const struct proc_event *pe, ProcEventHandler handler, void *userdata)
{
        ProcEvent ev = {};

        switch (pe->what) {
        case PROC_EVENT_FORK:
                ev = (ProcEvent){.type = PROC_EV_FORK,
                                 .pid = (unsigned)pe->event_data.fork.child_tgid,
                                 .tid = (unsigned)pe->event_data.fork.child_pid,
                                 .parent_pid = (unsigned)pe->event_data.fork.parent_tgid,
                                 .parent_tid = (unsigned)pe->event_data.fork.parent_pid};
                break;
        case PROC_EVENT_EXEC:
                ev = (ProcEvent){.type = PROC_EV_EXEC,
                                 .pid = (unsigned)pe->event_data.exec.process_tgid,
                                 .tid = (unsigned)pe->event_data.exec.process_pid};
                break;
        case PROC_EVENT_COMM: {
                char comm[sizeof pe->event_data.comm.comm + 1];
                memcpy(comm, pe->event_data.comm.comm, sizeof pe->event_data.comm.comm);
                comm[sizeof comm - 1] = 0;
                ev = (ProcEvent){.type = PROC_EV_COMM,
                                 .pid = (unsigned)pe->event_data.comm.process_tgid,
                                 .tid = (unsigned)pe->event_data.comm.process_pid,
                                 .comm = comm};
                handler(&ev, userdata);
                return;
        }
        case PROC_EVENT_EXIT:
                ev = (ProcEvent){.type = PROC_EV_EXIT,
                                 .pid = (unsigned)pe->event_data.exit.process_tgid,
                                 .tid = (unsigned)pe->event_data.exit.process_pid};
                break;
        default:
                return; /* uid, gid, sid, ptrace, coredump: no rule looks at them */
        }
        handler(&ev, userdata);
}

void proc_events_parse(const void *buf, size_t size, ProcEventHandler handler, void *userdata)
{
        int len = (int)MIN(size, (size_t)INT_MAX);

        assert(buf || size == 0);
        assert(handler);

        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; nlmsg_ok(h, len); h = nlmsg_next(h, &len)) {
                const struct cn_msg *cn;

                if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_NOOP)
                        continue;
                if ((size_t)nlmsg_datalen(h) < sizeof(struct cn_msg))
                        continue;
                cn = nlmsg_data(h);
                if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC ||
                    (size_t)nlmsg_datalen(h) < sizeof(struct cn_msg) + sizeof(struct proc_event))
                        continue;
                /* The event follows a 20-byte cn_msg: copied out, since it holds 64-bit fields. */
                struct proc_event pe;
                memcpy(&pe, cn->data, sizeof pe);
                dispatch(&pe, handler, userdata);
        }
}

static int on_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        ProcMonitor *m = userdata;
        /* Aligned for the headers read in place; one event is about 100 bytes. */
        unsigned char buf[8192] __attribute__((aligned(NLMSG_ALIGNTO)));

        for (unsigned i = 0; i < BATCH; i++) {
                struct sockaddr_nl from = {};
                struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
                struct msghdr msg = {
                    .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);

                if (n < 0) {
                        /* The kernel says ENOBUFS once, at the first event it drops, and drops every later
                         * one as well until a read leaves the queue empty (netlink's "congested" state):
                         * a rescan at the ENOBUFS would miss what goes on being lost (an exit, a DAW's
                         * exec), one when the queue is read sees it all. */
                        if (errno == ENOBUFS) {
                                if (!m->lossy) {
                                        ProcEvent ev = {.type = PROC_EV_OVERRUN};
                                        m->lossy = true;
                                        m->handler(&ev, m->userdata);
                                }
                                continue;
                        }
                        if (errno == EAGAIN && m->lossy) {
                                ProcEvent ev = {.type = PROC_EV_CAUGHT_UP};
                                m->lossy = false;
                                m->handler(&ev, m->userdata);
                        } else if (errno != EAGAIN && errno != EINTR)
                                log_warning_errno(-errno, "Failed to receive process events: %m, ignoring");
                        break;
                }
                /* Only the kernel (port 0) speaks for processes. */
                if (from.nl_pid == 0 && !(msg.msg_flags & MSG_TRUNC))
                        proc_events_parse(buf, (size_t)n, m->handler, m->userdata);
        }
        return 0;
}

int proc_monitor_new(sd_event *e, ProcEventHandler handler, void *userdata, ProcMonitor **ret)
{
        ProcMonitor *m = xmalloc0(sizeof(ProcMonitor));
        int size = RCVBUF, r;

        assert(e);
        assert(handler);
        assert(ret);

        m->handler = handler;
        m->userdata = userdata;
        m->sock = nl_socket_alloc();
        if (!m->sock) {
                free(m);
                return -ENOMEM;
        }
        nl_socket_disable_seq_check(m->sock);
        nl_socket_disable_auto_ack(m->sock);
        r = nl_connect(m->sock, NETLINK_CONNECTOR);
        if (r < 0) {
                r = log_error_errno(EIO, "Failed to open the proc connector: %s", nl_geterror(r));
                goto fail;
        }
        r = nl_socket_add_membership(m->sock, CN_IDX_PROC);
        if (r < 0) {
                r = log_error_errno(EPERM, "Failed to join the proc connector's group: %s", nl_geterror(r));
                goto fail;
        }
        /* Past rmem_max where we may (root); the default otherwise. */
        if (setsockopt(nl_socket_get_fd(m->sock), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) < 0)
                (void)nl_socket_set_buffer_size(m->sock, RCVBUF, 0);
        r = send_op(m, PROC_CN_MCAST_LISTEN);
        if (r < 0) {
                log_error_errno(r, "Failed to subscribe to process events: %m");
                goto fail;
        }
        m->subscribed = true;
        r = sd_event_add_io(e, &m->io, nl_socket_get_fd(m->sock), EPOLLIN, on_readable, m);
        if (r < 0)
                goto fail;
        (void)sd_event_source_set_priority(m->io, SD_EVENT_PRIORITY_IDLE + 10);
        (void)sd_event_source_set_description(m->io, "proc-events");
        *ret = m;
        return 0;
fail:
        proc_monitor_free(m);
        return r;
}

void proc_monitor_free(ProcMonitor *m)
{
        if (!m)
                return;
        sd_event_source_disable_unref(m->io);
        if (m->sock) {
                if (m->subscribed)
                        (void)send_op(m, PROC_CN_MCAST_IGNORE);
                nl_socket_free(m->sock);
        }
        free(m);
}
