/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's PipeWire source: the server's own profiler (libpipewire-module-profiler, loaded by
 * Debian's pipewire.conf), which pw-top and pw-profiler read. Each profile event tells, per cycle, the
 * driver's times in CLOCK_MONOTONIC and every follower's state: one that had not finished (triggered or
 * awake) when the driver's next cycle began is an xrun, whatever the driver (0.3.65's dummy driver moves
 * no xrun counter), and so is a rise of the driver's xrun count, and a driver that woke more than half a
 * period late. The time passed on is when the xrun was certain: the missed deadline, or the late wake-up.
 * The cycle's time goes to the caller as the deadline it missed, on the clock the trace has. libpipewire is
 * opened at run time, as libjack is; PipeWire's headers (libpipewire-0.3-dev, libspa-0.2-dev) are needed at
 * build time only. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>

#include "cli/xruns.h"
#include "shared/util.h"

#if HAVE_PIPEWIRE_H
#include <pipewire/impl-module.h>
#include <pipewire/pipewire.h>
/* profiler.h needs spa_pod and spa_hook declared first. */
#include <pipewire/extensions/profiler.h>
#include <spa/param/profiler.h>
#include <spa/pod/iter.h>
#include <spa/pod/parser.h>

/* The libpipewire functions rtctl calls; the rest of the API it uses is inline. */
typedef struct PwApi {
        __typeof__(pw_init) *init;
        __typeof__(pw_thread_loop_new) *loop_new;
        __typeof__(pw_thread_loop_get_loop) *get_loop;
        __typeof__(pw_thread_loop_start) *start;
        __typeof__(pw_thread_loop_stop) *stop;
        __typeof__(pw_thread_loop_lock) *lock;
        __typeof__(pw_thread_loop_unlock) *unlock;
        __typeof__(pw_thread_loop_signal) *signal;
        __typeof__(pw_thread_loop_timed_wait) *timed_wait;
        __typeof__(pw_thread_loop_destroy) *loop_destroy;
        __typeof__(pw_context_new) *context_new;
        __typeof__(pw_context_connect) *connect;
        __typeof__(pw_context_load_module) *load_module;
        __typeof__(pw_context_destroy) *context_destroy;
        __typeof__(pw_core_disconnect) *disconnect;
        __typeof__(pw_proxy_add_object_listener) *add_object_listener;
        __typeof__(pw_proxy_destroy) *proxy_destroy;
} PwApi;

struct PwSource {
        void *lib;
        PwApi api;
        struct pw_thread_loop *loop;
        struct pw_context *context;
        struct pw_core *core;
        struct pw_registry *registry;
        struct pw_proxy *profiler;
        struct spa_hook core_listener, registry_listener, profiler_listener;
        int sync_seq;
        bool synced, have_profiler;
        void (*tell)(uint64_t at_ns);
        /* Written by the loop's thread, read by rtctl's: whole words. */
        volatile unsigned rate, frames;
        int32_t last_xrun_count;
        uint64_t last_post;
        bool have_xrun_count;
};

/* One xrun per missed deadline: a stalled driver's cycle comes in several profiles. */
static void post(PwSource *s, uint64_t at, uint64_t period)
{
        if (s->last_post && at <= s->last_post + period / 2)
                return;
        s->last_post = at;
        s->tell(at);
}

/* One cycle's object: its clock, its driver and followers. */
static void on_cycle(PwSource *s, const struct spa_pod *obj)
{
        struct spa_pod_prop *prop;
        int64_t signal = 0, prev_signal = 0, duration = 0;
        struct spa_fraction rate = {0, 0};
        bool unfinished = false;
        int32_t xruns = -1;

        if (!spa_pod_is_object(obj))
                return;
        SPA_POD_OBJECT_FOREACH((const struct spa_pod_object *)obj, prop)
        {
                switch (prop->key) {
                case SPA_PROFILER_info: {
                        int64_t counter;
                        float fast, medium, slow;
                        int32_t count;
                        if (spa_pod_parse_struct(&prop->value, SPA_POD_Long(&counter), SPA_POD_Float(&fast),
                                                 SPA_POD_Float(&medium), SPA_POD_Float(&slow),
                                                 SPA_POD_Int(&count)) >= 0)
                                xruns = count;
                        break;
                }
                case SPA_PROFILER_clock: {
                        int32_t flags, id;
                        const char *name;
                        int64_t nsec, position;
                        if (spa_pod_parse_struct(&prop->value, SPA_POD_Int(&flags), SPA_POD_Int(&id),
                                                 SPA_POD_String(&name), SPA_POD_Long(&nsec),
                                                 SPA_POD_Fraction(&rate), SPA_POD_Long(&position),
                                                 SPA_POD_Long(&duration)) < 0)
                                rate = (struct spa_fraction){0, 0};
                        break;
                }
                case SPA_PROFILER_driverBlock: {
                        int32_t id;
                        const char *name;
                        (void)spa_pod_parse_struct(&prop->value, SPA_POD_Int(&id), SPA_POD_String(&name),
                                                   SPA_POD_Long(&prev_signal), SPA_POD_Long(&signal));
                        break;
                }
                case SPA_PROFILER_followerBlock: {
                        int32_t id, status = 0;
                        const char *name;
                        int64_t prev, sig, awake, finish;
                        if (spa_pod_parse_struct(&prop->value, SPA_POD_Int(&id), SPA_POD_String(&name),
                                                 SPA_POD_Long(&prev), SPA_POD_Long(&sig),
                                                 SPA_POD_Long(&awake), SPA_POD_Long(&finish),
                                                 SPA_POD_Int(&status)) >= 0 &&
                            (status == 1 || status == 2)) /* triggered or awake: not finished */
                                unfinished = true;
                        break;
                }
                default:
                        break;
                }
        }
        if (rate.denom > 0 && duration > 0) {
                s->rate = rate.denom;
                s->frames = (unsigned)duration;
        }
        bool counted = xruns >= 0 && s->have_xrun_count && xruns != s->last_xrun_count;
        if (xruns >= 0) {
                s->last_xrun_count = xruns;
                s->have_xrun_count = true;
        }
        if (signal <= 0 || rate.denom == 0)
                return;
        uint64_t period = (uint64_t)duration * 1000000000ULL / rate.denom;
        /* The driver itself woke more than half a period late: a device would have run dry (the dummy
         * driver, a timer, has no xrun of its own to count), as jackd's dummy driver says. */
        if (prev_signal > 0 && signal > prev_signal && (uint64_t)(signal - prev_signal) * 2 > 3 * period)
                /* Told when it finally woke: what held it lies before. */
                post(s, (uint64_t)signal, period);
        else if (unfinished || counted)
                /* The deadline the cycle missed: its start and one period. */
                post(s, (uint64_t)signal + period, period);
}

static void on_profile(void *data, const struct spa_pod *pod)
{
        PwSource *s = data;
        const struct spa_pod *o;

        /* A struct of cycles (0.3.65 and later), or one cycle. */
        if (spa_pod_is_struct(pod)) {
                SPA_POD_STRUCT_FOREACH((const struct spa_pod_struct *)pod, o)
                on_cycle(s, o);
        } else
                on_cycle(s, pod);
}

static const struct pw_profiler_events profiler_events = {
    .version = PW_VERSION_PROFILER_EVENTS,
    .profile = on_profile,
};

static void on_global(void *data, uint32_t id, uint32_t permissions, const char *type, uint32_t version,
                      const struct spa_dict *props)
{
        PwSource *s = data;

        (void)permissions;
        (void)props;
        if (s->profiler || !type || strcmp(type, PW_TYPE_INTERFACE_Profiler) != 0)
                return;
        s->profiler = pw_registry_bind(s->registry, id, PW_TYPE_INTERFACE_Profiler,
                                       MIN(version, (uint32_t)PW_VERSION_PROFILER), 0);
        if (s->profiler) {
                s->have_profiler = true;
                s->api.add_object_listener(s->profiler, &s->profiler_listener, &profiler_events, s);
        }
}

static const struct pw_registry_events registry_events = {
    .version = PW_VERSION_REGISTRY_EVENTS,
    .global = on_global,
};

static void on_done(void *data, uint32_t id, int seq)
{
        PwSource *s = data;

        if (id == PW_ID_CORE && seq == s->sync_seq) {
                s->synced = true;
                s->api.signal(s->loop, false);
        }
}

static void on_error(void *data, uint32_t id, int seq, int res, const char *message)
{
        PwSource *s = data;

        (void)seq;
        (void)res;
        (void)message;
        if (id == PW_ID_CORE) {
                s->synced = true; /* gone: stop waiting */
                s->api.signal(s->loop, false);
        }
}

static const struct pw_core_events core_events = {
    .version = PW_VERSION_CORE_EVENTS,
    .done = on_done,
    .error = on_error,
};

static bool load(PwSource *s, char **ret_error)
{
        s->lib = dlopen("libpipewire-0.3.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!s->lib) {
                *ret_error =
                    xasprintf("cannot load libpipewire-0.3.so.0 (%s): install libpipewire-0.3-0", dlerror());
                return false;
        }
#define SYM(field, name)                                                                                    \
        if (!(s->api.field = (__typeof__(s->api.field))dlsym(s->lib, name))) {                              \
                *ret_error = xasprintf("libpipewire-0.3.so.0 lacks %s", name);                              \
                return false;                                                                               \
        }
        SYM(init, "pw_init");
        SYM(loop_new, "pw_thread_loop_new");
        SYM(get_loop, "pw_thread_loop_get_loop");
        SYM(start, "pw_thread_loop_start");
        SYM(stop, "pw_thread_loop_stop");
        SYM(lock, "pw_thread_loop_lock");
        SYM(unlock, "pw_thread_loop_unlock");
        SYM(signal, "pw_thread_loop_signal");
        SYM(timed_wait, "pw_thread_loop_timed_wait");
        SYM(loop_destroy, "pw_thread_loop_destroy");
        SYM(context_new, "pw_context_new");
        SYM(connect, "pw_context_connect");
        SYM(load_module, "pw_context_load_module");
        SYM(context_destroy, "pw_context_destroy");
        SYM(disconnect, "pw_core_disconnect");
        SYM(add_object_listener, "pw_proxy_add_object_listener");
        SYM(proxy_destroy, "pw_proxy_destroy");
#undef SYM
        return true;
}

int pw_source_open(void (*tell)(uint64_t at_ns), PwSource **ret, char **ret_error)
{
        PwSource *s = xmalloc0(sizeof(PwSource));
        int r = -ECONNREFUSED;

        s->tell = tell;
        if (!load(s, ret_error)) {
                pw_source_close(s);
                return -ENOENT;
        }
        s->api.init(NULL, NULL);
        s->loop = s->api.loop_new("rtctl-xruns", NULL);
        if (!s->loop) {
                *ret_error = xstrdup("cannot make PipeWire's loop");
                pw_source_close(s);
                return -ENOMEM;
        }
        s->context = s->api.context_new(s->api.get_loop(s->loop), NULL, 0);
        if (!s->context || s->api.start(s->loop) < 0) {
                *ret_error = xstrdup("cannot start PipeWire's loop");
                pw_source_close(s);
                return -ENOMEM;
        }
        s->api.lock(s->loop);
        /* The profiler's protocol marshal comes with its module, as pw-profiler loads it: without it no
         * proxy of the server's profiler can be made. */
        if (!s->api.load_module(s->context, PW_EXTENSION_MODULE_PROFILER, NULL, NULL)) {
                s->api.unlock(s->loop);
                *ret_error = xstrdup("cannot load PipeWire's profiler module (" PW_EXTENSION_MODULE_PROFILER
                                     ") into rtctl");
                pw_source_close(s);
                return -ENOENT;
        }
        s->core = s->api.connect(s->context, NULL, 0);
        if (!s->core) {
                s->api.unlock(s->loop);
                *ret_error = xasprintf("cannot connect to PipeWire (%s%s): is it running for this user?",
                                       getenv("PIPEWIRE_REMOTE") ? "" : "socket pipewire-0 in ",
                                       getenv("PIPEWIRE_REMOTE") ?: getenv("PIPEWIRE_RUNTIME_DIR")
                                                                        ?: strempty(getenv("XDG_RUNTIME_DIR")));
                pw_source_close(s);
                return -ECONNREFUSED;
        }
        pw_core_add_listener(s->core, &s->core_listener, &core_events, s);
        s->registry = pw_core_get_registry(s->core, PW_VERSION_REGISTRY, 0);
        pw_registry_add_listener(s->registry, &s->registry_listener, &registry_events, s);
        s->sync_seq = pw_core_sync(s->core, PW_ID_CORE, 0);
        while (!s->synced)
                if (s->api.timed_wait(s->loop, 10) != 0)
                        break;
        if (s->synced && s->have_profiler)
                r = 0;
        s->api.unlock(s->loop);
        if (r < 0) {
                *ret_error = xstrdup(s->synced ? "PipeWire runs without its profiler "
                                                 "(libpipewire-module-profiler, in Debian's pipewire.conf)"
                                               : "PipeWire did not answer in 10 s");
                pw_source_close(s);
                return r;
        }
        *ret = s;
        return 0;
}

void pw_source_params(PwSource *s, unsigned *ret_rate, unsigned *ret_frames)
{
        *ret_rate = s->rate;
        *ret_frames = s->frames;
}

void pw_source_close(PwSource *s)
{
        if (!s)
                return;
        if (s->loop)
                s->api.stop(s->loop);
        if (s->profiler)
                s->api.proxy_destroy(s->profiler);
        if (s->registry)
                s->api.proxy_destroy((struct pw_proxy *)s->registry);
        if (s->core)
                s->api.disconnect(s->core);
        if (s->context)
                s->api.context_destroy(s->context);
        if (s->loop)
                s->api.loop_destroy(s->loop);
        /* libpipewire stays loaded: its modules keep threads and atexit handlers of their own. */
        free(s);
}
#else
int pw_source_open(void (*tell)(uint64_t at_ns), PwSource **ret, char **ret_error)
{
        (void)tell;
        (void)ret;
        *ret_error = xstrdup("this rtctl was built without PipeWire's headers (libpipewire-0.3-dev, "
                             "libspa-0.2-dev): for PipeWire, run it under pw-jack");
        return -EOPNOTSUPP;
}

void pw_source_params(PwSource *s, unsigned *ret_rate, unsigned *ret_frames)
{
        (void)s;
        *ret_rate = *ret_frames = 0;
}

void pw_source_close(PwSource *s)
{
        (void)s;
}
#endif
