/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <systemd/sd-bus.h>
#include <time.h>

#include "core/systemd.h"

#define SD_NAME  "org.freedesktop.systemd1"
#define SD_PATH  "/org/freedesktop/systemd1"
#define SD_IFACE "org.freedesktop.systemd1.Manager"

/* One connection for the process. Calls are synchronous: they happen inside a pass, and systemd answers
 * these in well under a millisecond. */
static int bus(sd_bus **ret)
{
        static sd_bus *b;
        int r;

        if (b && sd_bus_is_open(b) > 0) {
                *ret = b;
                return 0;
        }
        b = sd_bus_flush_close_unref(b);
        r = sd_bus_open_system(&b);
        if (r < 0)
                return r;
        *ret = b;
        return 0;
}

static int errno_of(const sd_bus_error *e, int r)
{
        if (sd_bus_error_has_names(e, "org.freedesktop.systemd1.NoSuchUnit",
                                   "org.freedesktop.systemd1.LoadFailed"))
                return -ENOENT;
        return r < 0 ? r : -EIO;
}

static const char *unit_interface(const char *unit)
{
        if (endswith(unit, ".slice"))
                return "org.freedesktop.systemd1.Slice";
        if (endswith(unit, ".scope"))
                return "org.freedesktop.systemd1.Scope";
        return "org.freedesktop.systemd1.Service";
}

static int unit_path(sd_bus *b, const char *unit, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        int r;

        r = sd_bus_call_method(b, SD_NAME, SD_PATH, SD_IFACE, "GetUnit", &e, &reply, "s", unit);
        if (r < 0) {
                r = errno_of(&e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                *ret = xstrdup(path);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int systemd_unit_cpus(const char *unit, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_cpuset_ CpuSet *set = cpuset_new(CPUSET_MAX_CPUS);
        const void *bytes;
        size_t n;
        sd_bus *b;
        int r;

        if ((r = bus(&b)) < 0 || (r = unit_path(b, unit, &path)) < 0)
                return r;
        r = sd_bus_get_property(b, SD_NAME, path, unit_interface(unit), "AllowedCPUs", &e, &reply, "ay");
        if (r < 0) {
                r = errno_of(&e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read_array(reply, 'y', &bytes, &n);
        if (r >= 0)
                for (size_t i = 0; i < n * 8 && i < CPUSET_MAX_CPUS; i++)
                        if (((const uint8_t *)bytes)[i / 8] & (1u << (i % 8)))
                                cpuset_add(set, (unsigned)i);
        sd_bus_message_unref(reply);
        if (r < 0)
                return r;
        *ret = cpuset_format_list(set);
        return 0;
}

static int append_cpus(sd_bus_message *m, const char *cpulist)
{
        _cleanup_cpuset_ CpuSet *set = NULL;
        uint8_t bytes[CPUSET_MAX_CPUS / 8] = {};
        size_t n = 0;
        int r;

        if (!isempty(cpulist)) {
                r = cpuset_parse_list(cpulist, CPUSET_MAX_CPUS, &set, NULL);
                if (r < 0)
                        return r;
                FOREACH_CPU (cpu, set) {
                        bytes[cpu / 8] |= (uint8_t)(1u << (cpu % 8));
                        n = (size_t)cpu / 8 + 1;
                }
        }
        r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "AllowedCPUs");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "ay");
        if (r >= 0)
                r = sd_bus_message_append_array(m, 'y', bytes, n);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* Builds a call to the manager: sd-bus messages collect the first error, so builders run on and
 * send_call() looks at r once. */
static int new_call(const char *member, sd_bus **ret_bus, sd_bus_message **ret)
{
        int r = bus(ret_bus);

        if (r < 0)
                return r;
        return sd_bus_message_new_method_call(*ret_bus, ret, SD_NAME, SD_PATH, SD_IFACE, member);
}

/* Sends m (taking it) unless building it failed (r < 0). */
static int send_call(sd_bus *b, sd_bus_message *m, int r)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;

        if (r >= 0) {
                r = sd_bus_call(b, m, 10 * 1000000ULL, &e, NULL);
                if (r < 0)
                        r = errno_of(&e, r);
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(m);
        return r < 0 ? r : 0;
}

int systemd_set_unit_cpus(const char *unit, const char *cpulist)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call("SetUnitProperties", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "sb", unit, 1);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_cpus(m, cpulist);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return send_call(b, m, r);
}

int systemd_unit_active(const char *unit, bool *ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *state = NULL;
        sd_bus *b;
        int r;

        if ((r = bus(&b)) < 0)
                return r;
        r = unit_path(b, unit, &path);
        if (r == -ENOENT) {
                *ret = false;
                return 0;
        }
        if (r < 0)
                return r;
        r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit", "ActiveState", &e,
                                       &state);
        sd_bus_error_free(&e);
        if (r < 0)
                return r;
        *ret = streq(state, "active") || streq(state, "activating");
        return 0;
}

/* Start and stop calls return when the job is queued; wait (briefly, up to 0.4 s) until it is done. */
static int wait_state(const char *unit, bool want_active)
{
        for (int i = 0; i < 200; i++) {
                bool active;
                int r = systemd_unit_active(unit, &active);
                if (r < 0)
                        return r;
                if (active == want_active)
                        return 0;
                nanosleep(&(struct timespec){.tv_nsec = 2 * 1000 * 1000}, NULL);
        }
        return -ETIMEDOUT;
}

/* StartTransientUnit(unit, "fail", properties, no aux units), then waits until it runs. props appends the
 * properties inside the open a(sv). */
static int start_transient(const char *unit, int (*props)(sd_bus_message *m, const void *userdata),
                           const void *userdata)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call("StartTransientUnit", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "ss", unit, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = props(m, userdata);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_append(m, "a(sa(sv))", 0);
        r = send_call(b, m, r);
        return r < 0 ? r : wait_state(unit, true);
}

typedef struct SliceProps {
        const char *description;
        const char *cpulist;
} SliceProps;

static int slice_props(sd_bus_message *m, const void *userdata)
{
        const SliceProps *p = userdata;
        int r = sd_bus_message_append(m, "(sv)", "Description", "s", p->description);

        return r < 0 ? r : append_cpus(m, p->cpulist);
}

int systemd_start_slice(const char *unit, const char *description, const char *cpulist)
{
        return start_transient(unit, slice_props, &(SliceProps){description, cpulist});
}

typedef struct ScopeProps {
        const char *slice;
        uint32_t pid;
} ScopeProps;

static int scope_props(sd_bus_message *m, const void *userdata)
{
        const ScopeProps *p = userdata;

        return sd_bus_message_append(m, "(sv)(sv)(sv)", "Description", "s",
                                     "Process attached to the isolated CPUs by rtctl", "Slice", "s",
                                     p->slice, "PIDs", "au", 1, p->pid);
}

int systemd_start_scope(const char *unit, const char *slice, unsigned pid)
{
        return start_transient(unit, scope_props, &(ScopeProps){slice, (uint32_t)pid});
}

/* StartUnit or StopUnit(unit, mode), then waits until the unit got there. */
static int unit_job(const char *method, const char *unit, const char *mode, bool want_active)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call(method, &b, &m);
        if (r < 0)
                return r;
        r = send_call(b, m, sd_bus_message_append(m, "ss", unit, mode));
        return r < 0 ? r : wait_state(unit, want_active);
}

int systemd_stop_unit(const char *unit)
{
        return unit_job("StopUnit", unit, "fail", false);
}

int systemd_start_unit(const char *unit)
{
        return unit_job("StartUnit", unit, "replace", true);
}

int systemd_unit_file_state(const char *unit, char **ret_load, char **ret_active, char **ret_file)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        sd_bus *b;
        int r;

        if ((r = bus(&b)) < 0)
                return r;
        /* LoadUnit, not GetUnit: a unit nobody started yet is not loaded, but may well be installed. */
        r = sd_bus_call_method(b, SD_NAME, SD_PATH, SD_IFACE, "LoadUnit", &e, &reply, "s", unit);
        if (r >= 0)
                r = sd_bus_message_read(reply, "o", &path);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "LoadState", &e, ret_load);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "ActiveState", &e, ret_active);
        if (r >= 0)
                r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                               "UnitFileState", &e, ret_file);
        if (r < 0)
                r = errno_of(&e, r);
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int systemd_mask_runtime(const char *unit, bool mask)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call(mask ? "MaskUnitFiles" : "UnmaskUnitFiles", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "as", 1, unit);
        if (r >= 0)
                r = mask ? sd_bus_message_append(m, "bb", true, true) : sd_bus_message_append(m, "b", true);
        r = send_call(b, m, r);
        if (r < 0)
                return r;
        /* Unit file changes take effect with a reload, as systemctl does after mask and unmask. */
        r = new_call("Reload", &b, &m);
        if (r < 0)
                return r;
        return send_call(b, m, 0);
}

int systemd_attach(const char *unit, const char *subcgroup, unsigned pid)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_call("AttachProcessesToUnit", &b, &m);
        if (r < 0)
                return r;
        return send_call(b, m, sd_bus_message_append(m, "ssau", unit, subcgroup, 1, (uint32_t)pid));
}
