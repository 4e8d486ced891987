/* SPDX-License-Identifier: GPL-2.0-or-later */
/* One cheap system call in a loop on one CPU, for bench/syscalls.py: what every system call of every
 * task pays while a syscall tracepoint is on (the kernel then sends every task through the syscall
 * slow path, whatever the event it traces).
 *
 *   bench-syscall-loop --cpu N --calls M [--call getppid|read]
 *
 * Prints one JSON object: the calls made, the thread's CPU time and the wall time, in ns. The CPU time
 * is the figure: it leaves out the time another task had the CPU. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(clockid_t clock)
{
        struct timespec ts;

        clock_gettime(clock, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
        static const struct option options[] = {
            {"cpu", required_argument, NULL, 'c'},
            {"calls", required_argument, NULL, 'n'},
            {"call", required_argument, NULL, 'k'},
            {},
        };
        unsigned long long calls = 5000000;
        bool use_read = false;
        int cpu = -1, opt, fd = -1;
        char byte;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (opt) {
                case 'c':
                        cpu = atoi(optarg);
                        break;
                case 'n':
                        calls = strtoull(optarg, NULL, 10);
                        break;
                case 'k':
                        if (strcmp(optarg, "read") == 0)
                                use_read = true;
                        else if (strcmp(optarg, "getppid") != 0) {
                                fprintf(stderr, "--call is getppid or read, not %s\n", optarg);
                                return 2;
                        }
                        break;
                default:
                        return 2;
                }
        if (cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (sched_setaffinity(0, sizeof set, &set) < 0) {
                        fprintf(stderr, "cannot run on CPU %d: %s\n", cpu, strerror(errno));
                        return 1;
                }
        }
        if (use_read && (fd = open("/dev/zero", O_RDONLY | O_CLOEXEC)) < 0) {
                fprintf(stderr, "cannot open /dev/zero: %s\n", strerror(errno));
                return 1;
        }

        uint64_t wall0 = now_ns(CLOCK_MONOTONIC), cpu0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        /* syscall(2), not the libc wrappers: nothing may answer from user space. */
        for (unsigned long long i = 0; i < calls; i++)
                if (use_read)
                        (void)syscall(SYS_read, fd, &byte, 1);
                else
                        (void)syscall(SYS_getppid);
        uint64_t cpu_ns = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall_ns = now_ns(CLOCK_MONOTONIC) - wall0;

        printf("{\"call\": \"%s\", \"calls\": %llu, \"cpu_ns\": %" PRIu64 ", \"wall_ns\": %" PRIu64 "}\n",
               use_read ? "read" : "getppid", calls, cpu_ns, wall_ns);
        return 0;
}
