/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Proc connector datagrams: netlink messages holding a cn_msg and a proc_event, whole, cut or forged. */
#include "daemon/proc-events.h"
#include "fuzz.h"

static void on_event(const ProcEvent *ev, void *userdata)
{
        size_t *n = userdata;

        fuzz_check(ev->type <= PROC_EV_EXIT);
        fuzz_check(ev->type != PROC_EV_COMM || (ev->comm && strlen(ev->comm) <= 16));
        fuzz_check(ev->type == PROC_EV_COMM || !ev->comm);
        (*n)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /* malloc()'s alignment is the socket buffer's; its size is the datagram's, for ASan. */
        _cleanup_free_ void *buf = xmalloc0(size ? size : 1);
        size_t n = 0;

        memcpy(buf, data, size);
        proc_events_parse(buf, size, on_event, &n);
        fuzz_check(n <= size / 16); /* a message is at least a header */
        return 0;
}
