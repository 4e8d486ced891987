/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <linux/netlink.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <systemd/sd-device.h>

#include "daemon/uevent-monitor.h"
#include "shared/log.h"

#define KERNEL_UEVENT_GROUP 1

struct UeventMonitor {
        UeventBackend backend;
        UeventHandler handler;
        void *userdata;
        struct nl_sock *sock;
        sd_event_source *io;
        sd_device_monitor *udev;
        /* From the kernel's ENOBUFS to the read that finds the socket empty: the kernel says ENOBUFS once,
         * at the first event it drops, and drops the rest silently until the queue is read empty. */
        bool lossy;
};

/* "add@/devices/virtual/block/loop3\0ACTION=add\0DEVPATH=...\0SUBSYSTEM=block\0..." */
bool uevent_parse(const char *buf, size_t len, Uevent *ret)
{
        assert(buf);
        assert(ret);

        const char *action = NULL, *subsystem = NULL, *devpath = NULL, *devtype = NULL;
        const char *end = buf + len;
        size_t n = strnlen(buf, len);

        if (n == len || !memchr(buf, '@', n))
                return false; /* udev's own messages use another header and another group */
        /* Only fields that end before the datagram does are strings. */
        for (const char *p = buf + n + 1; p < end && (n = strnlen(p, (size_t)(end - p))) < (size_t)(end - p);
             p += n + 1) {
                const char *v;
                if ((v = startswith(p, "ACTION=")))
                        action = v;
                else if ((v = startswith(p, "SUBSYSTEM=")))
                        subsystem = v;
                else if ((v = startswith(p, "DEVPATH=")))
                        devpath = v;
                else if ((v = startswith(p, "DEVTYPE=")))
                        devtype = v;
        }
        if (!action || !subsystem || !devpath || !strrchr(devpath, '/'))
                return false;
        *ret = (Uevent){.action = action,
                        .subsystem = subsystem,
                        .sysname = strrchr(devpath, '/') + 1,
                        .devtype = devtype};
        return true;
}

static int on_kernel_uevent(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        UeventMonitor *m = userdata;
        /* A uevent is at most a page (the kernel's 2 kB environment and its header): read into the
         * stack, with no allocation per event (libnl's nl_recv allocates one). */
        char buf[8192];

        for (;;) {
                struct sockaddr_nl from = {};
                struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf - 1};
                struct msghdr msg = {
                    .msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
                Uevent ev;

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == ENOBUFS) {
                                /* Events were dropped, and are until the backlog is read: which, nobody
                                 * can say. The resync comes once it is read (below), so that it sees
                                 * what the kernel dropped after this too. */
                                if (!m->lossy)
                                        log_warning("Kernel uevents were lost (%s); every device is looked "
                                                    "at again once the backlog is read",
                                                    strerror(ENOBUFS));
                                m->lossy = true;
                                continue;
                        }
                        if (errno == EAGAIN && m->lossy) {
                                m->lossy = false;
                                m->handler(NULL, m->userdata);
                        } else if (errno != EAGAIN)
                                log_warning_errno(-errno, "Failed to receive kernel uevents: %m, ignoring");
                        break;
                }
                if (n == 0)
                        break;
                if (from.nl_pid != 0)
                        continue; /* only the kernel (port 0) speaks for devices on this group */
                if (msg.msg_flags & MSG_TRUNC) {
                        /* Larger than any uevent should be: what it said is lost, so resync. */
                        log_warning("A kernel uevent was cut (over %zu bytes); rescanning every device",
                                    sizeof buf - 1);
                        m->handler(NULL, m->userdata);
                        continue;
                }
                if (uevent_parse(buf, (size_t)n, &ev))
                        m->handler(&ev, m->userdata);
        }
        return 0;
}

static int start_kernel(UeventMonitor *m, sd_event *e)
{
        int r;

        m->sock = nl_socket_alloc();
        if (!m->sock)
                return -ENOMEM;
        nl_socket_disable_seq_check(m->sock);
        nl_socket_disable_auto_ack(m->sock);
        r = nl_connect(m->sock, NETLINK_KOBJECT_UEVENT);
        if (r < 0)
                return log_error_errno(EIO, "Failed to open the kernel uevent socket: %s", nl_geterror(r));
        r = nl_socket_add_membership(m->sock, KERNEL_UEVENT_GROUP);
        if (r < 0)
                return log_error_errno(EIO, "Failed to join the kernel uevent group: %s", nl_geterror(r));
        (void)nl_socket_set_buffer_size(m->sock, 1024 * 1024, 0);
        r = nl_socket_set_nonblocking(m->sock);
        if (r < 0)
                return -EIO;
        r = sd_event_add_io(e, &m->io, nl_socket_get_fd(m->sock), EPOLLIN, on_kernel_uevent, m);
        if (r < 0)
                return r;
        (void)sd_event_source_set_description(m->io, "kernel-uevents");
        return 0;
}

static int on_udev_event(sd_device_monitor *mon, sd_device *d, void *userdata)
{
        UeventMonitor *m = userdata;
        const char *action = NULL, *subsystem = NULL, *sysname = NULL, *devtype = NULL;
        Uevent ev;

        if (sd_device_get_property_value(d, "ACTION", &action) < 0 ||
            sd_device_get_subsystem(d, &subsystem) < 0 || sd_device_get_sysname(d, &sysname) < 0)
                return 0;
        (void)sd_device_get_devtype(d, &devtype);
        ev = (Uevent){.action = action, .subsystem = subsystem, .sysname = sysname, .devtype = devtype};
        m->handler(&ev, m->userdata);
        return 0;
}

static int start_udev(UeventMonitor *m, sd_event *e)
{
        int r;

        r = sd_device_monitor_new(&m->udev);
        if (r < 0)
                return r;
        /* As large as udevd's own: a burst (a dock, resume) must not overflow it. */
        (void)sd_device_monitor_set_receive_buffer_size(m->udev, 128 * 1024 * 1024);
        r = sd_device_monitor_attach_event(m->udev, e);
        if (r < 0)
                return r;
        return sd_device_monitor_start(m->udev, on_udev_event, m);
}

int uevent_monitor_new(sd_event *e, UeventBackend backend, UeventHandler handler, void *userdata,
                       UeventMonitor **ret)
{
        UeventMonitor *m = xmalloc0(sizeof(UeventMonitor));
        int r;

        assert(e);
        assert(handler);
        assert(ret);

        if (backend == UEVENT_AUTO)
                backend = access("/run/udev/control", F_OK) >= 0 ? UEVENT_UDEV : UEVENT_KERNEL;
        m->backend = backend;
        m->handler = handler;
        m->userdata = userdata;
        r = backend == UEVENT_UDEV ? start_udev(m, e) : start_kernel(m, e);
        if (r < 0) {
                uevent_monitor_free(m);
                return r;
        }
        *ret = m;
        return 0;
}

void uevent_monitor_free(UeventMonitor *m)
{
        if (!m)
                return;
        sd_event_source_disable_unref(m->io);
        if (m->sock)
                nl_socket_free(m->sock);
        sd_device_monitor_unref(m->udev);
        free(m);
}

const char *uevent_monitor_backend_name(const UeventMonitor *m)
{
        assert(m);

        return m->backend == UEVENT_UDEV ? "udev" : "kernel";
}
