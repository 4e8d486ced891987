/* SPDX-License-Identifier: GPL-2.0-or-later */
/* The calls to systemd's manager about units: their properties, transient slices and scopes, start,
 * stop and mask jobs, moving processes (made through the client of systemd.c). */
#include <systemd/sd-bus.h>

#include "core/systemd-internal.h"

static const char *unit_interface(const char *unit)
{
        if (endswith(unit, ".slice"))
                return "org.freedesktop.systemd1.Slice";
        if (endswith(unit, ".scope"))
                return "org.freedesktop.systemd1.Scope";
        return "org.freedesktop.systemd1.Service";
}

/* Calls method of systemd's object path, with arg as its one string argument (NULL: none), and returns
 * the one value of the reply (type "o" or "s"). */
static int call_for_string(SystemdClient *c, sd_bus *b, const char *path, const char *interface,
                           const char *method, const char *arg, const char *type, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *value;
        int r;

        if (arg)
                r = sd_bus_call_method(b, SD_NAME, path, interface, method, &e, &reply, "s", arg);
        else
                r = sd_bus_call_method(b, SD_NAME, path, interface, method, &e, &reply, "");
        if (r < 0) {
                r = sdc_errno_of(c, &e, r);
                sd_bus_error_free(&e);
                return r;
        }
        r = sd_bus_message_read(reply, type, &value);
        if (r >= 0)
                *ret = xstrdup(value);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

static int unit_path(SystemdClient *c, sd_bus *b, const char *unit, char **ret)
{
        return call_for_string(c, b, SD_PATH, SD_IFACE, "GetUnit", unit, "o", ret);
}

int systemd_unit_cpus(SystemdClient *c, const char *unit, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        _cleanup_free_ char *path = NULL;
        _cleanup_cpuset_ CpuSet *set = cpuset_new(CPUSET_MAX_CPUS);
        const void *bytes;
        size_t n;
        sd_bus *b;
        int r;

        if ((r = sdc_cache_get(c, unit, "AllowedCPUs", ret)) <= 0)
                return r;
        if ((r = sdc_bus(c, &b)) < 0 || (r = unit_path(c, b, unit, &path)) < 0)
                return r;
        r = sd_bus_get_property(b, SD_NAME, path, unit_interface(unit), "AllowedCPUs", &e, &reply, "ay");
        if (r < 0) {
                r = sdc_errno_of(c, &e, r);
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
        sdc_cache_put(c, unit, "AllowedCPUs", *ret);
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

/* SetUnitProperties(unit, runtime=true, ...) up to its properties: run time only, like everything rtctl
 * does. */
static int new_set_properties(SystemdClient *c, const char *unit, sd_bus **ret_bus, sd_bus_message **ret)
{
        int r = sdc_new_call(c, "SetUnitProperties", ret_bus, ret);

        if (r < 0)
                return r;
        r = sd_bus_message_append(*ret, "sb", unit, 1);
        if (r < 0)
                *ret = sd_bus_message_unref(*ret);
        return r;
}

int systemd_set_unit_cpus(SystemdClient *c, const char *unit, const char *cpulist)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = new_set_properties(c, unit, &b, &m);
        if (r < 0)
                return r;
        sdc_cache_put(c, unit, "AllowedCPUs", NULL);
        r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = append_cpus(m, cpulist);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return sdc_send_call(c, b, m, r, NULL);
}

bool systemd_introspection_has(const char *xml, const char *interface, const char *property,
                               const char *type)
{
        assert(xml);

        _cleanup_free_ char *open = xasprintf("<interface name=\"%s\">", interface);
        _cleanup_free_ char *want = xasprintf("<property name=\"%s\" type=\"%s\"", property, type);
        const char *start = strstr(xml, open), *end, *found;

        if (!start)
                return false;
        end = strstr(start, "</interface>");
        found = strstr(start, want);
        return found && (!end || found < end);
}

int systemd_has_property(SystemdClient *c, const char *interface, const char *property, const char *type)
{
        _cleanup_free_ char *path = NULL, *xml = NULL, *key = xasprintf("%s.%s", interface, property),
                            *cached = NULL;
        sd_bus *b;
        int r;

        if ((r = sdc_cache_get(c, "(introspection)", key, &cached)) <= 0)
                return r < 0 ? r : streq(cached, "1");
        /* The root slice always exists, and a unit object lists every property of its interfaces. */
        if ((r = sdc_bus(c, &b)) < 0 || (r = unit_path(c, b, "-.slice", &path)) < 0 ||
            (r = call_for_string(c, b, path, "org.freedesktop.DBus.Introspectable", "Introspect", NULL, "s",
                                 &xml)) < 0)
                return r;
        r = systemd_introspection_has(xml, interface, property, type);
        sdc_cache_put(c, "(introspection)", key, r ? "1" : "0");
        return r;
}

int systemd_unit_string(SystemdClient *c, const char *unit, const char *property, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus *b;
        int r;

        if ((r = sdc_cache_get(c, unit, property, ret)) <= 0)
                return r;
        if ((r = sdc_bus(c, &b)) < 0 || (r = unit_path(c, b, unit, &path)) < 0)
                return r;
        r = sd_bus_get_property_string(b, SD_NAME, path, unit_interface(unit), property, &e, ret);
        if (r < 0)
                r = sdc_errno_of(c, &e, r);
        else
                sdc_cache_put(c, unit, property, *ret);
        sd_bus_error_free(&e);
        return r < 0 ? r : 0;
}

int systemd_set_unit_string(SystemdClient *c, const char *unit, const char *property, const char *value)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        sdc_cache_put(c, unit, property, NULL);
        r = new_set_properties(c, unit, &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "a(sv)", 1, property, "s", value);
        return sdc_send_call(c, b, m, r, NULL);
}

int systemd_unit_active(SystemdClient *c, const char *unit, bool *ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *state = NULL;
        sd_bus *b;
        int r;

        if ((r = sdc_cache_get(c, unit, "ActiveState", &state)) < 0)
                return r;
        if (r > 0) {
                if ((r = sdc_bus(c, &b)) < 0)
                        return r;
                r = unit_path(c, b, unit, &path);
                if (r == -ENOENT)
                        state = xstrdup("absent");
                else if (r < 0)
                        return r;
                else {
                        r = sd_bus_get_property_string(b, SD_NAME, path, "org.freedesktop.systemd1.Unit",
                                                       "ActiveState", &e, &state);
                        if (r < 0)
                                r = sdc_errno_of(c, &e, r);
                        sd_bus_error_free(&e);
                        if (r < 0)
                                return r;
                }
                sdc_cache_put(c, unit, "ActiveState", state);
        }
        *ret = streq(state, "active") || streq(state, "activating");
        return 0;
}

/* StartTransientUnit(unit, "fail", properties, no aux units). props appends the properties inside the
 * open a(sv). */
static int start_transient(SystemdClient *c, const char *unit,
                           int (*props)(sd_bus_message *m, const void *userdata), const void *userdata,
                           const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        sdc_cache_forget_unit(c, unit);
        r = sdc_new_call(c, "StartTransientUnit", &b, &m);
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
        return sdc_send_call(c, b, m, r, label);
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

int systemd_start_slice(SystemdClient *c, const char *unit, const char *description, const char *cpulist,
                        const char *label)
{
        return start_transient(c, unit, slice_props, &(SliceProps){description, cpulist}, label);
}

typedef struct ScopeProps {
        const char *slice;
        uint32_t pid;
} ScopeProps;

static int scope_props(sd_bus_message *m, const void *userdata)
{
        const ScopeProps *p = userdata;

        /* Delegated, with the cpuset controller: rtctld makes the threaded children below it
         * (tuners/cpuset.c), and systemd leaves them alone. */
        return sd_bus_message_append(m, "(sv)(sv)(sv)(sv)(sv)", "Description", "s",
                                     "Processes attached to the isolated CPUs by rtctl", "Slice", "s",
                                     p->slice, "PIDs", "au", 1, p->pid, "Delegate", "b", 1,
                                     "DelegateControllers", "as", 1, "cpuset");
}

int systemd_start_scope(SystemdClient *c, const char *unit, const char *slice, unsigned pid,
                        const char *label)
{
        return start_transient(c, unit, scope_props, &(ScopeProps){slice, (uint32_t)pid}, label);
}

/* StartUnit or StopUnit(unit, mode). */
static int unit_job(SystemdClient *c, const char *method, const char *unit, const char *mode,
                    const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        sdc_cache_forget_unit(c, unit);
        r = sdc_new_call(c, method, &b, &m);
        if (r < 0)
                return r;
        return sdc_send_call(c, b, m, sd_bus_message_append(m, "ss", unit, mode), label);
}

int systemd_stop_unit(SystemdClient *c, const char *unit, const char *label)
{
        return unit_job(c, "StopUnit", unit, "fail", label);
}

int systemd_start_unit(SystemdClient *c, const char *unit, const char *label)
{
        return unit_job(c, "StartUnit", unit, "replace", label);
}

int systemd_unit_file_state(SystemdClient *c, const char *unit, char **ret_load, char **ret_active,
                            char **ret_file)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        _cleanup_free_ char *cached = NULL;
        sd_bus *b;
        int r;

        if ((r = sdc_cache_get(c, unit, "FileState", &cached)) < 0)
                return r;
        if (r == 0) {
                /* "LOAD\nACTIVE\nFILE", where FILE may be empty */
                char *active = strchr(cached, '\n'), *file = active ? strchr(active + 1, '\n') : NULL;
                if (!file)
                        return SYSTEMD_UNKNOWN;
                *ret_load = xstrndup(cached, (size_t)(active - cached));
                *ret_active = xstrndup(active + 1, (size_t)(file - active - 1));
                *ret_file = xstrdup(file + 1);
                return 0;
        }
        if ((r = sdc_bus(c, &b)) < 0)
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
                r = sdc_errno_of(c, &e, r);
        else {
                _cleanup_free_ char *v = xasprintf("%s\n%s\n%s", *ret_load, *ret_active, *ret_file);
                sdc_cache_put(c, unit, "FileState", v);
        }
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return r < 0 ? r : 0;
}

int systemd_mask_runtime(SystemdClient *c, const char *unit, bool mask, const char *label)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        sdc_cache_forget_unit(c, unit);
        r = sdc_new_call(c, mask ? "MaskUnitFiles" : "UnmaskUnitFiles", &b, &m);
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "as", 1, unit);
        if (r >= 0)
                r = mask ? sd_bus_message_append(m, "bb", true, true) : sd_bus_message_append(m, "b", true);
        r = sdc_send_call(c, b, m, r, NULL);
        if (r < 0)
                return r;
        /* Unit file changes take effect with a reload, as systemctl does after mask and unmask. */
        return sdc_reload_async(c, b, label);
}

int systemd_attach(SystemdClient *c, const char *unit, const char *subcgroup, unsigned pid)
{
        sd_bus_message *m = NULL;
        sd_bus *b = NULL;
        int r;

        r = sdc_new_call(c, "AttachProcessesToUnit", &b, &m);
        if (r < 0)
                return r;
        return sdc_send_call(c, b, m, sd_bus_message_append(m, "ssau", unit, subcgroup, 1, (uint32_t)pid),
                             NULL);
}

int systemd_unit_by_pid(SystemdClient *c, unsigned pid, char **ret)
{
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *path;
        sd_bus *b;
        int r;

        if ((r = sdc_bus(c, &b)) < 0)
                return r;
        r = sd_bus_call_method(b, SD_NAME, SD_PATH, SD_IFACE, "GetUnitByPID", &e, &reply, "u",
                               (uint32_t)pid);
        if (r < 0)
                r = sdc_errno_of(c, &e, r);
        else if ((r = sd_bus_message_read(reply, "o", &path)) >= 0)
                r = sd_bus_path_decode(path, SD_PATH "/unit", ret) > 0 ? 0 : -EBADMSG;
        sd_bus_error_free(&e);
        sd_bus_message_unref(reply);
        return r;
}
