/* SPDX-License-Identifier: GPL-2.0-or-later */
/* When a restore may forget an original. A restore that systemd only queued a job for is not done until
 * the job ended "done" (a private dbus-daemon and, in a child, a stand-in for systemd's manager that
 * ends the job when told). A /proc/PID/... object is the process that was changed only while its PID
 * has the same start time: a PID used again by another process is gone, and nothing is written to it. */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "core/systemd.h"
#include "shared/sysfs.h"
#include "test.h"

#define UNIT      "rtctl.slice" /* the only slice a journal may name */
#define UNIT_PATH "/org/freedesktop/systemd1/unit/rtctl_2eslice"
#define JOB_PATH  "/org/freedesktop/systemd1/job/7"
#define SLICE     "systemd:" UNIT

static char *root, *jpath;

/* A two-CPU machine, its journal in the scratch run directory. */
static void make_tree(void)
{
        free(root);
        root = test_two_cpu_root();
        if (!jpath)
                jpath = xasprintf("%s/run/journal.json", test_tmpdir());
}

static Journal *journal_with(const char *entry)
{
        _cleanup_free_ char *err = NULL, *text = xasprintf("{\"version\":1,\"entries\":[%s]}", entry);
        FILE *f = fopen(jpath, "we");
        Journal *j = NULL;

        CHECK(f != NULL);
        if (f) {
                fputs(text, f);
                fclose(f);
        }
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_INTEQ(j ? journal_size(j) : 0, 1);
        return j;
}

/* One pass with no policy (stop, `rtctl restore`) in kinds' context; the restore of object's setting. */
static SettingResult restore(Journal *j, SettingContext *kinds, const char *object, unsigned *ret_failed)
{
        _cleanup_topology_ Topology *t = NULL;
        PassInput in = {.kinds = kinds};
        SettingResult result = SETTING_PENDING;
        Dirty all = {};
        PassResult res;

        CHECK_INTEQ(topology_load(NULL, &t), 0);
        dirty_mark_all(&all);
        reconcile_pass_with(NULL, t, j, &all, false, &in, &res);
        dirty_clear(&all);
        for (size_t i = 0; i < res.plan.n; i++)
                if (streq(res.plan.settings[i].object, object))
                        result = res.plan.settings[i].result;
        *ret_failed = res.stats.failed;
        pass_result_clear(&res);
        return result;
}

/* --- the systemd stand-in ------------------------------------------------------------------------- */

static int get_unit(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
        const char *unit;
        int r = sd_bus_message_read(m, "s", &unit);

        if (r < 0)
                return r;
        if (streq(unit, UNIT))
                return sd_bus_reply_method_return(m, "o", UNIT_PATH);
        return sd_bus_error_setf(e, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not loaded.", unit);
}

static int stop_unit(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
        return sd_bus_reply_method_return(m, "o", JOB_PATH);
}

static int get_active(sd_bus *b, const char *path, const char *interface, const char *property,
                      sd_bus_message *reply, void *userdata, sd_bus_error *e)
{
        return sd_bus_message_append(reply, "s", "active");
}

static const sd_bus_vtable manager[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("GetUnit", "s", "o", get_unit, 0),
    SD_BUS_METHOD("StopUnit", "ss", "o", stop_unit, 0),
    SD_BUS_SIGNAL("JobRemoved", "uoss", 0),
    SD_BUS_VTABLE_END,
};

static const sd_bus_vtable unit[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("ActiveState", "s", get_active, 0, 0),
    SD_BUS_VTABLE_END,
};

/* A line from the test ("done", "failed") ends the job with that result. */
static int on_command(sd_event_source *s, int fd, uint32_t revents, void *userdata)
{
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);

        if (n <= 0)
                _exit(0);
        buf[n] = 0;
        (void)sd_bus_emit_signal(userdata, "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
                                 "JobRemoved", "uoss", 7u, JOB_PATH, UNIT, strstrip(buf));
        (void)sd_bus_flush(userdata);
        return 0;
}

static _Noreturn void serve(const char *address, int commands, int ready)
{
        sd_event *event = NULL;
        sd_bus *b = NULL;

        if (sd_event_new(&event) < 0 || sd_bus_new(&b) < 0 || sd_bus_set_address(b, address) < 0 ||
            sd_bus_set_bus_client(b, 1) < 0 || sd_bus_start(b) < 0 || sd_bus_attach_event(b, event, 0) < 0 ||
            sd_bus_add_object_vtable(b, NULL, "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", manager, NULL) < 0 ||
            sd_bus_add_object_vtable(b, NULL, UNIT_PATH, "org.freedesktop.systemd1.Unit", unit, NULL) < 0 ||
            sd_event_add_io(event, NULL, commands, EPOLLIN, on_command, b) < 0 ||
            sd_bus_request_name(b, "org.freedesktop.systemd1", 0) < 0)
                _exit(1);
        if (write(ready, "1", 1) != 1)
                _exit(1);
        sd_event_loop(event);
        _exit(0);
}

typedef struct Child {
        pid_t pid;
        int commands; /* the stand-in's command pipe; -EBADF for the bus */
} Child;

/* Runs run(address, pipe, ready) in a child and waits for it to say it is ready on ready. */
static Child start_child(void (*run)(const char *, int, int), const char *address)
{
        int ready[2], commands[2];
        Child c = {.commands = -EBADF};
        char byte;

        if (pipe(ready) < 0 || pipe(commands) < 0)
                abort();
        c.pid = fork();
        if (c.pid < 0)
                abort();
        if (c.pid == 0) {
                close(ready[0]);
                close(commands[1]);
                run(address, commands[0], ready[1]);
        }
        close(ready[1]);
        close(commands[0]);
        c.commands = commands[1];
        if (read(ready[0], &byte, 1) != 1)
                printf("# the child %d did not start\n", (int)c.pid);
        close(ready[0]);
        return c;
}

static void stop_child(Child *c)
{
        close(c->commands);
        kill(c->pid, SIGTERM);
        waitpid(c->pid, NULL, 0);
}

static _Noreturn void run_dbus_daemon(const char *address, int unused, int ready)
{
        _cleanup_free_ char *arg = xasprintf("--address=%s", address);
        _cleanup_free_ char *fd = xasprintf("--print-address=%d", ready);

        execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile", arg, fd, (char *)NULL);
        _exit(127);
}

/* Has the stand-in end the job with result, and runs the loop until the client heard of it. */
static void end_job(Child *fake, sd_event *event, SettingContext *kinds, const char *result)
{
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + 30 * 1000000ULL;

        CHECK_INTEQ(write(fake->commands, result, strlen(result)), (long long)strlen(result));
        while (systemd_client_pending(kinds->systemd) > 0 && now_usec(CLOCK_MONOTONIC) < deadline)
                (void)sd_event_run(event, 100 * 1000);
        CHECK_INTEQ(systemd_client_pending(kinds->systemd), 0);
}

static const char SLICE_ENTRY[] =
    "{\"kind\":\"slice\",\"tuner\":\"cpuset\",\"object\":\"" SLICE "\",\"original\":\"absent\"}";

/* The stop of the slice is queued: its original stays until the job ended, and goes when it is done;
 * a job that failed keeps it for the next restore, which tries again. */
static void job_pending_then(const char *result)
{
        _cleanup_free_ char *address = xasprintf("unix:path=%s/bus", test_tmpdir());
        Child bus, fake;
        sd_event *event = NULL;
        SettingContext kinds;
        Journal *j;
        unsigned failed;

        make_tree();
        bus = start_child(run_dbus_daemon, address);
        fake = start_child(serve, address);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", address, 1);
        CHECK_INTEQ(sd_event_new(&event), 0);
        setting_context_init(&kinds, event);
        j = journal_with(SLICE_ENTRY);

        CHECK_INTEQ(restore(j, &kinds, SLICE, &failed), SETTING_CHANGED);
        CHECK_INTEQ(systemd_client_pending(kinds.systemd), 1);
        CHECK(journal_find(j, SLICE) != NULL); /* the job is only queued */
        reconcile_jobs_ended(j, &kinds);
        CHECK(journal_find(j, SLICE) != NULL);

        end_job(&fake, event, &kinds, result);
        reconcile_jobs_ended(j, &kinds);
        if (streq(result, "done"))
                CHECK(journal_find(j, SLICE) == NULL && access(jpath, F_OK) < 0);
        else {
                CHECK(journal_find(j, SLICE) != NULL);
                /* Tried again by the next restore. */
                CHECK_INTEQ(restore(j, &kinds, SLICE, &failed), SETTING_CHANGED);
                end_job(&fake, event, &kinds, "done");
                reconcile_jobs_ended(j, &kinds);
                CHECK(journal_find(j, SLICE) == NULL);
        }

        journal_free(j);
        setting_context_clear(&kinds);
        sd_event_unref(event);
        stop_child(&fake);
        stop_child(&bus);
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS");
}

TEST(queued_restore_kept_until_its_job_is_done)
{
        job_pending_then("done");
}

TEST(queued_restore_kept_when_its_job_failed)
{
        job_pending_then("failed");
}

/* --- PIDs used again ------------------------------------------------------------------------------ */

/* Process 123 of the fixture, started at starttime, on CPU 0 only (its original was 0-1). */
static void make_process(unsigned long long starttime)
{
        _cleanup_free_ char *stat = xasprintf("123 (kworker/0:1 x) S 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 "
                                              "0 1 0 %llu 0 0\n",
                                              starttime);

        test_write(root, "proc/123/stat", stat);
        test_write(root, "proc/123/status", "Name:\tkworker/0:1\nCpus_allowed_list:\t0\n");
}

static char *affinity_entry(const char *starttime_member)
{
        return xasprintf("{\"kind\":\"affinity\",\"tuner\":\"kthread\",\"object\":\"/proc/123/affinity\","
                         "\"original\":\"0-1\"%s}",
                         starttime_member);
}

/* What a restore of the entry does to process 123 as the fixture has it. A fixture's PIDs are not this
 * machine's: a write is refused (EOPNOTSUPP), so a failure is a write the restore tried. */
static SettingResult restore_affinity(const char *starttime_member, unsigned *ret_failed,
                                      bool *ret_forgotten)
{
        _cleanup_free_ char *entry = affinity_entry(starttime_member);
        _cleanup_journal_ Journal *j = journal_with(entry);
        SettingContext kinds;
        SettingResult r;

        setting_context_init(&kinds, NULL);
        r = restore(j, &kinds, "/proc/123/affinity", ret_failed);
        setting_context_clear(&kinds);
        *ret_forgotten = journal_find(j, "/proc/123/affinity") == NULL;
        return r;
}

TEST(pid_used_again_is_gone_and_not_written)
{
        unsigned failed;
        bool forgotten;

        make_tree();
        make_process(555);
        CHECK_INTEQ(restore_affinity(",\"starttime\":\"444\"", &failed, &forgotten), SETTING_GONE);
        CHECK_INTEQ(failed, 0);
        CHECK(forgotten);

        /* The same process: the restore writes (and the fixture refuses). */
        CHECK_INTEQ(restore_affinity(",\"starttime\":\"555\"", &failed, &forgotten), SETTING_FAILED);
        CHECK_INTEQ(failed, 1);
        CHECK(!forgotten);
}

/* A journal of an older rtctl has no start time: no reused PID can be told apart, so nothing is
 * written. */
TEST(pid_without_start_time_is_left_alone)
{
        unsigned failed;
        bool forgotten;

        make_tree();
        make_process(555);
        CHECK_INTEQ(restore_affinity("", &failed, &forgotten), SETTING_GONE);
        CHECK_INTEQ(failed, 0);
        CHECK(forgotten);
}

TEST(start_time_recorded_and_read_back)
{
        _cleanup_free_ char *err = NULL, *text = NULL;
        Journal *j = NULL;

        make_tree();
        make_process(555);
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        journal_remember(j, &setting_kind_affinity, "kthread", "/proc/123/affinity", "0-1");
        journal_remember(j, &setting_kind_file, "sysctl", "/proc/sys/kernel/x", "1");
        CHECK_INTEQ(journal_find(j, "/proc/123/affinity")->starttime, 555);
        CHECK_INTEQ(journal_find(j, "/proc/sys/kernel/x")->starttime, 0);
        CHECK_INTEQ(journal_save(j), 0);
        journal_free(j);
        CHECK_INTEQ(read_full_file(jpath, &text, NULL), 0);
        CHECK_CONTAINS(text, "\"starttime\":\"555\"");

        j = NULL;
        CHECK_INTEQ(journal_open(jpath, JOURNAL_RUNTIME, &j, &err), 0);
        CHECK_INTEQ(j && journal_find(j, "/proc/123/affinity")
                        ? journal_find(j, "/proc/123/affinity")->starttime
                        : 0,
                    555);
        CHECK_INTEQ(j ? journal_n_lost(j) : 1, 0);
        journal_free(j);
}

TEST_MAIN(T(queued_restore_kept_until_its_job_is_done), T(queued_restore_kept_when_its_job_failed),
          T(pid_used_again_is_gone_and_not_written), T(pid_without_start_time_is_left_alone),
          T(start_time_recorded_and_read_back))
