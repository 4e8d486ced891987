/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The systemd client's side of CPUSetPartition=, on the wire: a private dbus-daemon and, in a child
 * process, a stand-in for systemd's manager whose slices have the property or not. The property is found
 * in the manager's introspection data (which sd-bus writes from the stand-in's vtables, as it does from
 * systemd's), and the unit-partition kind, kept to put back what an earlier rtctld journalled, sets it
 * through SetUnitProperties at run time only and reads it back. */
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "core/setting.h"
#include "core/systemd.h"
#include "test.h"

#define UNIT_PATH "/org/freedesktop/systemd1/unit/"
#define OBJECT    "systemd:rtctl.slice:CPUSetPartition"

/* The stand-in's property: set in the child process, which alone serves it. */
static char partition[32];

static int get_partition(sd_bus *b, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *e)
{
        return sd_bus_message_append(reply, "s", partition);
}

static const sd_bus_vtable slice_with_partition[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("CPUSetPartition", "s", get_partition, 0, 0),
    SD_BUS_VTABLE_END,
};

static const sd_bus_vtable slice_without_partition[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_PROPERTY("ControlGroup", "s", get_partition, 0, 0),
    SD_BUS_VTABLE_END,
};

static int get_unit(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
        const char *unit;
        int r = sd_bus_message_read(m, "s", &unit);

        if (r < 0)
                return r;
        if (streq(unit, "-.slice"))
                return sd_bus_reply_method_return(m, "o", UNIT_PATH "_2d_2eslice");
        if (streq(unit, "rtctl.slice"))
                return sd_bus_reply_method_return(m, "o", UNIT_PATH "rtctl_2eslice");
        return sd_bus_error_setf(e, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not loaded.", unit);
}

/* As systemd: every property must be one it knows; rtctl's changes must be run-time only. */
static int set_unit_properties(sd_bus_message *m, void *userdata, sd_bus_error *e)
{
        bool known = *(bool *)userdata;
        const char *unit, *name, *value;
        int runtime, r;

        r = sd_bus_message_read(m, "sb", &unit, &runtime);
        if (r >= 0 && (!streq(unit, "rtctl.slice") || !runtime))
                return sd_bus_error_setf(e, SD_BUS_ERROR_INVALID_ARGS, "want rtctl.slice at run time");
        if (r >= 0)
                r = sd_bus_message_enter_container(m, 'a', "(sv)");
        while (r >= 0 && (r = sd_bus_message_enter_container(m, 'r', "sv")) > 0) {
                r = sd_bus_message_read(m, "s", &name);
                if (r >= 0 && (!known || !streq(name, "CPUSetPartition")))
                        return sd_bus_error_setf(e, SD_BUS_ERROR_PROPERTY_READ_ONLY,
                                                 "Cannot set property %s", name);
                if (r >= 0)
                        r = sd_bus_message_read(m, "v", "s", &value);
                if (r >= 0)
                        snprintf(partition, sizeof partition, "%s", value);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
        }
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable manager[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("GetUnit", "s", "o", get_unit, 0),
    SD_BUS_METHOD("SetUnitProperties", "sba(sv)", "", set_unit_properties, 0),
    SD_BUS_VTABLE_END,
};

/* The stand-in's life, in the child: own the name, say so on ready, serve until killed. */
static _Noreturn void serve(const char *address, bool has_partition, int ready)
{
        const sd_bus_vtable *slice = has_partition ? slice_with_partition : slice_without_partition;
        sd_bus *b = NULL;

        if (sd_bus_new(&b) < 0 || sd_bus_set_address(b, address) < 0 || sd_bus_set_bus_client(b, 1) < 0 ||
            sd_bus_start(b) < 0 ||
            sd_bus_add_object_vtable(b, NULL, "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", manager, &has_partition) < 0 ||
            sd_bus_add_object_vtable(b, NULL, UNIT_PATH "_2d_2eslice", "org.freedesktop.systemd1.Slice",
                                     slice, NULL) < 0 ||
            sd_bus_add_object_vtable(b, NULL, UNIT_PATH "rtctl_2eslice", "org.freedesktop.systemd1.Slice",
                                     slice, NULL) < 0 ||
            sd_bus_request_name(b, "org.freedesktop.systemd1", 0) < 0)
                _exit(1);
        if (write(ready, "1", 1) != 1)
                _exit(1);
        for (;;) {
                int r = sd_bus_process(b, NULL);
                if (r < 0)
                        _exit(1);
                if (r == 0 && sd_bus_wait(b, UINT64_MAX) < 0)
                        _exit(1);
        }
}

static pid_t start_child(void (*run)(const char *, bool, int), const char *address, bool flag)
{
        int p[2];
        char c;
        pid_t pid;

        if (pipe(p) < 0)
                abort();
        pid = fork();
        if (pid < 0)
                abort();
        if (pid == 0) {
                close(p[0]);
                run(address, flag, p[1]);
        }
        close(p[1]);
        if (read(p[0], &c, 1) != 1)
                printf("# the child %d did not start\n", (int)pid);
        close(p[0]);
        return pid;
}

static void stop_child(pid_t pid)
{
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
}

static _Noreturn void run_dbus_daemon(const char *address, bool unused, int ready)
{
        _cleanup_free_ char *arg = xasprintf("--address=%s", address);
        _cleanup_free_ char *fd = xasprintf("--print-address=%d", ready);

        execlp("dbus-daemon", "dbus-daemon", "--session", "--nofork", "--nopidfile", arg, fd, (char *)NULL);
        _exit(127);
}

static pid_t bus_daemon;
static char *bus_address;

static void with_systemd(bool has_partition, void (*body)(void))
{
        pid_t fake;

        partition[0] = 0;
        fake = start_child(serve, bus_address, has_partition);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
        body();
        stop_child(fake);
}

static void partition_present(void)
{
        SettingContext kinds;
        _cleanup_free_ char *before = NULL, *after = NULL, *restored = NULL;

        setting_context_init(&kinds, NULL);
        CHECK_INTEQ(
            systemd_has_property(kinds.systemd, "org.freedesktop.systemd1.Slice", "CPUSetPartition", "s"),
            1);
        CHECK_INTEQ(setting_kind_unit_partition.read(&kinds, OBJECT, NULL, &before), 0);
        CHECK_STREQ(before, "");
        /* Set through SetUnitProperties (the stand-in refuses anything but a run-time change of it). */
        CHECK_INTEQ(setting_kind_unit_partition.write(&kinds, OBJECT, "isolated"), 0);
        CHECK_INTEQ(setting_kind_unit_partition.read(&kinds, OBJECT, NULL, &after), 0);
        CHECK_STREQ(after, "isolated");
        /* Restored the same way: the stand-in (another process: only its copy of partition changes)
         * reports the value it now holds. */
        CHECK_INTEQ(setting_kind_unit_partition.write(&kinds, OBJECT, ""), 0);
        CHECK_INTEQ(setting_kind_unit_partition.read(&kinds, OBJECT, NULL, &restored), 0);
        CHECK_STREQ(restored, "");
        setting_context_clear(&kinds);
}

static void partition_absent(void)
{
        SettingContext kinds;

        setting_context_init(&kinds, NULL);
        CHECK_INTEQ(
            systemd_has_property(kinds.systemd, "org.freedesktop.systemd1.Slice", "CPUSetPartition", "s"),
            0);
        setting_context_clear(&kinds);
}

TEST(systemd_with_cpuset_partition)
{
        with_systemd(true, partition_present);
}

TEST(systemd_without_cpuset_partition)
{
        with_systemd(false, partition_absent);
}

static int run(void)
{
        static const TestCase cases[] = {T(systemd_with_cpuset_partition),
                                         T(systemd_without_cpuset_partition)};
        int r;

        bus_address = xasprintf("unix:path=%s/bus", test_tmpdir());
        bus_daemon = start_child(run_dbus_daemon, bus_address, false);
        r = test_run(cases, ELEMENTSOF(cases));
        stop_child(bus_daemon);
        free(bus_address);
        return r;
}

int main(void)
{
        return run();
}
