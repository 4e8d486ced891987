/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The daemon's parsers of kernel datagrams, on the bytes a socket hands over: a uevent is not
 * NUL-terminated as a whole, and a proc connector datagram may hold several messages, or cut ones. */
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include "daemon/proc-events.h"
#include "daemon/uevent-monitor.h"
#include "test.h"

/* A heap copy of exactly len bytes, so that ASan sees a read past the datagram. */
static char *datagram(const char *bytes, size_t len)
{
        char *p = xmalloc0(len);
        memcpy(p, bytes, len);
        return p;
}

#define LOOP3 "add@/devices/virtual/block/loop3\0ACTION=add\0DEVPATH=/devices/virtual/block/loop3\0"

TEST(uevent_parsed)
{
        static const char msg[] = LOOP3 "SUBSYSTEM=block\0DEVTYPE=disk\0SEQNUM=4242";
        _cleanup_free_ char *buf = datagram(msg, sizeof msg);
        Uevent ev = {};

        CHECK(uevent_parse(buf, sizeof msg, &ev));
        CHECK_STREQ(ev.action, "add");
        CHECK_STREQ(ev.subsystem, "block");
        CHECK_STREQ(ev.sysname, "loop3");
        CHECK_STREQ(ev.devtype, "disk");
}

/* The kernel ends every field with a NUL; a datagram that does not is cut, and its last field unread. */
TEST(uevent_unterminated_field_not_read)
{
        static const char tiny[] = {'@', 0, 'S'};
        static const char cut[] = LOOP3 "SUBSYSTEM=block";
        _cleanup_free_ char *b1 = datagram(tiny, sizeof tiny);
        _cleanup_free_ char *b2 = datagram(cut, sizeof cut - 1);
        _cleanup_free_ char *b3 = datagram(cut, sizeof cut);
        Uevent ev = {};

        CHECK(!uevent_parse(b1, sizeof tiny, &ev));
        CHECK(!uevent_parse(b2, sizeof cut - 1, &ev));
        CHECK(uevent_parse(b3, sizeof cut, &ev));
        CHECK_STREQ(ev.subsystem, "block");
}

TEST(uevent_not_a_device_event)
{
        static const char udev[] = "libudev\0\xfe\xed\xca\xfe";
        static const char nohdr[] = "ACTION=add\0SUBSYSTEM=block\0DEVPATH=/devices/virtual/block/loop3";
        _cleanup_free_ char *b1 = datagram(udev, sizeof udev - 1);
        _cleanup_free_ char *b2 = datagram(nohdr, sizeof nohdr);
        Uevent ev = {};

        CHECK(!uevent_parse(b1, sizeof udev - 1, &ev));
        CHECK(!uevent_parse(b2, sizeof nohdr, &ev));
}

typedef struct Seen {
        ProcEvent ev[4];
        char comm[4][32];
        unsigned n;
} Seen;

static void on_proc_event(const ProcEvent *ev, void *userdata)
{
        Seen *s = userdata;

        if (s->n >= ELEMENTSOF(s->ev))
                return;
        s->ev[s->n] = *ev;
        if (ev->comm) {
                snprintf(s->comm[s->n], sizeof s->comm[0], "%s", ev->comm);
                s->ev[s->n].comm = s->comm[s->n];
        }
        s->n++;
}

#define PROC_MSG_LEN NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(struct proc_event))

/* One netlink message as the kernel sends it: header, cn_msg, proc_event. */
static void put_event(unsigned char *at, const struct proc_event *pe)
{
        struct nlmsghdr *h = (struct nlmsghdr *)at;
        struct cn_msg *cn = NLMSG_DATA(h);

        *h = (struct nlmsghdr){.nlmsg_len = NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof *pe),
                               .nlmsg_type = NLMSG_DONE};
        *cn = (struct cn_msg){.id = {.idx = CN_IDX_PROC, .val = CN_VAL_PROC}, .len = sizeof *pe};
        memcpy(cn->data, pe, sizeof *pe);
}

TEST(proc_events_parsed)
{
        struct proc_event fork = {.what = PROC_EVENT_FORK}, comm = {.what = PROC_EVENT_COMM};
        _cleanup_free_ unsigned char *buf = xmalloc0(2 * PROC_MSG_LEN);
        Seen seen = {};

        fork.event_data.fork.parent_pid = 10;
        fork.event_data.fork.parent_tgid = 10;
        fork.event_data.fork.child_pid = 11;
        fork.event_data.fork.child_tgid = 10;
        comm.event_data.comm.process_pid = 11;
        comm.event_data.comm.process_tgid = 10;
        memset(comm.event_data.comm.comm, 'x', sizeof comm.event_data.comm.comm); /* no NUL */
        put_event(buf, &fork);
        put_event(buf + PROC_MSG_LEN, &comm);

        proc_events_parse(buf, 2 * PROC_MSG_LEN, on_proc_event, &seen);
        CHECK_INTEQ(seen.n, 2);
        CHECK_INTEQ(seen.ev[0].type, PROC_EV_FORK);
        CHECK_INTEQ(seen.ev[0].pid, 10);
        CHECK_INTEQ(seen.ev[0].tid, 11);
        CHECK_INTEQ(seen.ev[0].parent_tid, 10);
        CHECK_INTEQ(seen.ev[1].type, PROC_EV_COMM);
        CHECK_STREQ(seen.ev[1].comm, "xxxxxxxxxxxxxxxx");
}

TEST(proc_events_cut_message_skipped)
{
        struct proc_event exec = {.what = PROC_EVENT_EXEC};
        _cleanup_free_ unsigned char *full = xmalloc0(PROC_MSG_LEN);
        _cleanup_free_ unsigned char *cut = NULL;
        Seen seen = {};

        put_event(full, &exec);
        /* Every length short of the whole message: nothing is read beyond it, nothing is reported. */
        for (size_t len = 0; len < NLMSG_LENGTH(sizeof(struct cn_msg) + sizeof exec); len++) {
                free(cut);
                cut = xmalloc0(len ? len : 1);
                memcpy(cut, full, len);
                if (len >= sizeof(struct nlmsghdr))
                        ((struct nlmsghdr *)cut)->nlmsg_len = (unsigned)len;
                proc_events_parse(cut, len, on_proc_event, &seen);
        }
        CHECK_INTEQ(seen.n, 0);
}

TEST_MAIN(T(uevent_parsed), T(uevent_unterminated_field_not_read), T(uevent_not_a_device_event),
          T(proc_events_parsed), T(proc_events_cut_message_skipped))
