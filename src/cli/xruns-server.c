/* SPDX-License-Identifier: GPL-2.0-or-later */
/* rtctl xruns's side of the audio server: a child process that connects to it (JACK's xrun callback, or
 * PipeWire's profiler in xruns-pipewire.c) and passes each xrun's time back over a socket.
 *
 * The server is the user's, and so is what speaks for it: its socket, JACK's shared memory in
 * world-writable /dev/shm, the protocol libjack and libpipewire parse. Under sudo the child becomes the
 * user before it loads either library, and keeps nothing of root's but the socket (rtctl's bus
 * connection is root's above all); rtctl, root, reads from it only records of one fixed size, each
 * checked (RecordKind in range, rate and quantum within bounds, xrun times never back and never ahead of
 * the clock), no pointer, no string; ancillary data is never asked for, so descriptors sent along are
 * dropped by the kernel. What the child has to say in words (why it cannot connect) it says on stderr,
 * the user's terminal, not to rtctl. One path for every case: as root from root's own shell the child
 * stays root, as the libraries ran before in rtctl itself. */
#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#if HAVE_JACK_H
#include <jack/jack.h>
#endif

#include "cli/xruns.h"
#include "shared/util.h"

/* How long the child may take to say it follows the server: PipeWire's own wait for an answer (10 s) and
 * for its first cycles (2 s), with room. */
#define READY_TIMEOUT_MS 20000
/* A plausible graph: the bounds keep rtctl's arithmetic on periods (µs in an unsigned) far from
 * overflow. */
#define RATE_MIN   1000u
#define RATE_MAX   1536000u
#define FRAMES_MAX 65536u
/* An xrun's time may lie this far ahead of rtctl's clock: PipeWire dates one by the deadline it missed. */
#define AHEAD_NS (1000ULL * 1000000ULL)

typedef enum RecordKind {
        RECORD_PIPEWIRE,
        RECORD_JACK2,
        RECORD_PIPEWIRE_JACK,
        _RECORD_KIND_MAX,
} RecordKind;

static const char *const kind_names[_RECORD_KIND_MAX] = {
    [RECORD_PIPEWIRE] = "pipewire",
    [RECORD_JACK2] = "jack2",
    [RECORD_PIPEWIRE_JACK] = "pipewire-jack",
};

#define RECORD_MAGIC 0x72747872u /* "rtxr" */

enum {
        RECORD_READY = 1, /* kind, rate, frames: the child follows the server */
        RECORD_XRUN,      /* at_ns */
};

/* All the child ever sends: one SOCK_SEQPACKET message each, this size exactly. */
typedef struct Record {
        uint32_t magic;
        uint32_t type;
        uint32_t kind;
        uint32_t rate;
        uint32_t frames;
        uint32_t reserved;
        uint64_t at_ns;
} Record;

/* The child's end of the socket, and whether JACK told it the server went away. */
static int child_fd = -EBADF;
static volatile sig_atomic_t server_gone;

static void tell_xrun(uint64_t at_ns)
{
        Record r = {.magic = RECORD_MAGIC, .type = RECORD_XRUN, .at_ns = at_ns};

        /* A full socket drops the xrun rather than block the server's thread. */
        (void)send(child_fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* ---- in the child: the server's client ------------------------------------------------------------ */

typedef struct Server {
        void *lib;
        void *client;
        PwSource *pw;
        RecordKind kind;
        unsigned rate, frames;
        int (*close)(void *);
} Server;

#if HAVE_JACK_H
static int on_xrun(void *arg)
{
        (void)arg;
        /* Called in JACK's notification thread (jack2) or the process thread (PipeWire): one send is
         * all it does. */
        tell_xrun(now_usec(CLOCK_MONOTONIC) * 1000ULL);
        return 0;
}

static int on_process(jack_nframes_t n, void *arg)
{
        (void)n;
        (void)arg;
        return 0;
}

static void on_shutdown(void *arg)
{
        (void)arg;
        server_gone = true;
}

static int jack_open(Server *s, char **ret_error)
{
        Dl_info info = {};
        jack_status_t status = 0;
        __typeof__(jack_client_open) *open_fn;
        __typeof__(jack_set_xrun_callback) *set_xrun;
        __typeof__(jack_set_process_callback) *set_process;
        __typeof__(jack_on_shutdown) *set_shutdown;
        __typeof__(jack_activate) *activate;
        __typeof__(jack_get_sample_rate) *rate;
        __typeof__(jack_get_buffer_size) *frames;

        s->lib = dlopen("libjack.so.0", RTLD_NOW | RTLD_LOCAL);
        if (!s->lib) {
                *ret_error = xasprintf("cannot load libjack.so.0 (%s): install libjack-jackd2-0 for jack2, "
                                       "or run under pw-jack for PipeWire",
                                       dlerror());
                return -ENOENT;
        }
        open_fn = dlsym(s->lib, "jack_client_open");
        set_xrun = dlsym(s->lib, "jack_set_xrun_callback");
        set_process = dlsym(s->lib, "jack_set_process_callback");
        set_shutdown = dlsym(s->lib, "jack_on_shutdown");
        activate = dlsym(s->lib, "jack_activate");
        rate = dlsym(s->lib, "jack_get_sample_rate");
        frames = dlsym(s->lib, "jack_get_buffer_size");
        s->close = (int (*)(void *))dlsym(s->lib, "jack_client_close");
        if (!open_fn || !set_xrun || !set_process || !set_shutdown || !activate || !rate || !frames ||
            !s->close) {
                *ret_error = xstrdup("libjack.so.0 lacks the JACK API rtctl needs");
                return -ENOTSUP;
        }
        s->kind = dladdr((void *)open_fn, &info) && info.dli_fname && strstr(info.dli_fname, "pipewire")
                      ? RECORD_PIPEWIRE_JACK
                      : RECORD_JACK2;
        s->client = open_fn("rtctl-xruns", JackNoStartServer, &status);
        if (!s->client) {
                *ret_error =
                    xasprintf("cannot connect to the JACK server%s%s (status 0x%x): is it running%s?",
                              getenv("JACK_DEFAULT_SERVER") ? " " : "",
                              strempty(getenv("JACK_DEFAULT_SERVER")), (unsigned)status,
                              s->kind == RECORD_JACK2 ? " (for PipeWire: rtctl xruns under pw-jack)" : "");
                return -ECONNREFUSED;
        }
        set_shutdown(s->client, on_shutdown, NULL);
        set_xrun(s->client, on_xrun, NULL);
        /* Both servers tell only an active client. jack2 tells it from its notification thread, and a
         * client activated with no process callback is active without a place in the graph
         * (JackClient::Activate passes IsRealTime() false, so JackEngine::ClientActivate leaves the graph
         * alone): the server never waits for rtctl in a cycle. PipeWire's JACK calls the callback from the
         * client's own cycle, so there it takes part, with no ports and nothing to do. */
        if (s->kind == RECORD_PIPEWIRE_JACK)
                set_process(s->client, on_process, NULL);
        if (activate(s->client) != 0) {
                *ret_error = xstrdup("cannot activate the JACK client");
                return -EIO;
        }
        /* A process thread (pw-jack's) stays off the audio CPUs with the rest of rtctl: there, a client
         * over its budget at the same SCHED_FIFO priority never lets it run, and rtctl could not exit. */
        s->rate = rate(s->client);
        s->frames = frames(s->client);
        return 0;
}
#else
static int jack_open(Server *s, char **ret_error)
{
        (void)s;
        *ret_error = xstrdup("this rtctl was built without JACK's headers (libjack-jackd2-dev): it cannot "
                             "follow a JACK server's xruns");
        return -EOPNOTSUPP;
}
#endif

static int pipewire_open(Server *s, char **ret_error)
{
        int r = pw_source_open(tell_xrun, &s->pw, ret_error);

        if (r < 0)
                return r;
        s->kind = RECORD_PIPEWIRE;
        /* The rate and quantum come with the profiler's first cycles. */
        for (int i = 0; i < 200; i++) {
                pw_source_params(s->pw, &s->rate, &s->frames);
                if (s->rate > 0 && s->frames > 0)
                        return 0;
                usleep(10000);
        }
        *ret_error = xstrdup("PipeWire's profiler told no cycle in 2 s: is a driver running (a device "
                             "playing, or a client)?");
        return -ETIMEDOUT;
}

/* server: "auto" (PipeWire's profiler when a PipeWire answers, else JACK), "pipewire" or "jack". */
static int server_open(Server *s, const char *server, char **ret_error)
{
        _cleanup_free_ char *pw_error = NULL;
        int r;

        if (!streq(server, "jack")) {
                r = pipewire_open(s, streq(server, "auto") ? &pw_error : ret_error);
                if (r >= 0 || streq(server, "pipewire"))
                        return r;
                if (s->pw) {
                        pw_source_close(s->pw);
                        s->pw = NULL;
                }
        }
        r = jack_open(s, ret_error);
        if (r < 0 && pw_error) {
                char *both = xasprintf("%s; and PipeWire: %s", *ret_error, pw_error);
                free(*ret_error);
                *ret_error = both;
        }
        return r;
}

static void server_close(Server *s)
{
        if (s->client && s->close)
                s->close(s->client);
        s->client = NULL;
        pw_source_close(s->pw);
        s->pw = NULL;
}

/* The child: the user's (under sudo), connected to the server, sending records until rtctl closes its end
 * or the server goes. */
static _Noreturn void child_run(int fd, const char *which, const XrunsUser *user)
{
        _cleanup_free_ char *err = NULL;
        Server s = {};
        int r;

        /* Nothing of rtctl's but the socket goes with the child: not its bus connection to rtctld. */
        if (dup2(fd, 3) < 0 || close_range(4, ~0U, 0) < 0) {
                fprintf(stderr,
                        "rtctl xruns: cannot close rtctl's descriptors for the server's client: %m\n");
                _exit(EXIT_FAILURE);
        }
        child_fd = 3;
        /* Ctrl-C is rtctl's to act on: the child leaves the server as a client should once rtctl ends. */
        signal(SIGINT, SIG_IGN);
        if (user) {
                r = xruns_user_become(user, false);
                if (r < 0) {
                        fprintf(stderr, "rtctl xruns: cannot become %s to connect to their server: %s\n",
                                user->name, strerror(-r));
                        _exit(EXIT_FAILURE);
                }
        }
        r = server_open(&s, which, &err);
        if (r < 0) {
                fprintf(stderr, "rtctl xruns: %s\n", err);
                _exit(EXIT_FAILURE);
        }
        Record ready = {
            .magic = RECORD_MAGIC, .type = RECORD_READY, .kind = s.kind, .rate = s.rate, .frames = s.frames};
        if (send(child_fd, &ready, sizeof ready, MSG_NOSIGNAL) != (ssize_t)sizeof ready)
                _exit(EXIT_FAILURE);
        while (!server_gone) {
                struct pollfd p = {.fd = child_fd}; /* POLLHUP: rtctl closed its end, or ended */
                if (poll(&p, 1, 100) > 0 && (p.revents & (POLLHUP | POLLERR)))
                        break;
        }
        server_close(&s);
        _exit(EXIT_SUCCESS);
}

/* ---- in rtctl: the records ------------------------------------------------------------------------- */

/* A child that sends nothing but records to skip holds the loop no longer than this many a call: the
 * trace is drained and the command reaped in between. */
#define RECORDS_SKIPPED_MAX 256

/* The next record of the right size and magic: 1; 0 when none is waiting (or RECORDS_SKIPPED_MAX were
 * skipped); -EPIPE at the end. A message of another size (from a broken or hostile child) is skipped. */
static int record_recv(XrunsServer *s, Record *ret, unsigned *skipped)
{
        /* A byte more than a record: a longer message shows as one. */
        uint8_t buf[sizeof(Record) + 1];

        for (; *skipped < RECORDS_SKIPPED_MAX; (*skipped)++) {
                ssize_t n = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                if (n <= 0)
                        return -EPIPE;
                if (n != (ssize_t)sizeof(Record))
                        continue;
                memcpy(ret, buf, sizeof *ret);
                if (ret->magic == RECORD_MAGIC)
                        return 1;
        }
        return 0;
}

/* Waits for the child, 5 s at most (it is the user's, and may be anything by now), then kills it. */
static int child_reap(XrunsServer *s)
{
        int status = 0;

        for (int i = 0; i < 500; i++) {
                pid_t p = waitpid(s->pid, &status, WNOHANG);
                if (p != 0) {
                        s->pid = 0;
                        return p < 0 ? -1 : status;
                }
                usleep(10000);
        }
        kill(s->pid, SIGKILL);
        (void)waitpid(s->pid, &status, 0);
        s->pid = 0;
        return status;
}

static bool ready_valid(const Record *r)
{
        return r->type == RECORD_READY && r->kind < _RECORD_KIND_MAX && r->rate >= RATE_MIN &&
               r->rate <= RATE_MAX && r->frames >= 1 && r->frames <= FRAMES_MAX;
}

/* The child's first word that is not an xrun (those told while it joined are not counted anyway). */
static int greeting_recv(XrunsServer *s, Record *ret, char **ret_error)
{
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + READY_TIMEOUT_MS * 1000ULL;
        int r;

        do {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                struct pollfd p = {.fd = s->fd, .events = POLLIN};
                if (now >= deadline) {
                        *ret_error =
                            xasprintf("the server's client said nothing in %d s", READY_TIMEOUT_MS / 1000);
                        return -ETIMEDOUT;
                }
                if (poll(&p, 1, (int)((deadline - now + 999) / 1000)) < 0 && errno != EINTR) {
                        r = -errno;
                        *ret_error = xasprintf("cannot wait for the server's client: %s", strerror(-r));
                        return r;
                }
                unsigned skipped = 0; /* the deadline bounds the whole wait */
                r = record_recv(s, ret, &skipped);
                if (r < 0) {
                        int status = child_reap(s);
                        /* An end of its own said why on stderr. */
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != EXIT_FAILURE)
                                *ret_error = WIFSIGNALED(status)
                                                 ? xasprintf("the server's client was killed by signal %d",
                                                             WTERMSIG(status))
                                                 : xstrdup("the server's client ended without a word");
                        return -ECONNREFUSED;
                }
        } while (r == 0 || ret->type == RECORD_XRUN);
        return 0;
}

int xruns_server_start(XrunsServer *s, const char *server, const XrunsUser *user, char **ret_error)
{
        int fds[2], r;
        Record ready;

        assert(s);
        assert(server);
        assert(ret_error);

        *s = XRUNS_SERVER_NULL;
        *ret_error = NULL;
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) < 0) {
                r = -errno;
                *ret_error = xasprintf("cannot make a socket pair: %s", strerror(-r));
                return r;
        }
        s->pid = fork();
        if (s->pid < 0) {
                r = -errno;
                close(fds[0]);
                close(fds[1]);
                *ret_error = xasprintf("cannot start the server's client: %s", strerror(-r));
                return r;
        }
        if (s->pid == 0) {
                close(fds[0]);
                child_run(fds[1], server, user);
        }
        close(fds[1]);
        s->fd = fds[0];
        r = greeting_recv(s, &ready, ret_error);
        if (r < 0)
                return r;
        if (!ready_valid(&ready)) {
                *ret_error = xstrdup("the server's client sent no valid greeting");
                return -EBADMSG;
        }
        s->kind = kind_names[ready.kind];
        s->rate = ready.rate;
        s->frames = ready.frames;
        return 0;
}

int xruns_server_next(XrunsServer *s, uint64_t *ret_at)
{
        unsigned skipped = 0;
        Record rec;
        int r;

        assert(s);
        assert(ret_at);

        while ((r = record_recv(s, &rec, &skipped)) > 0) {
                uint64_t now = now_usec(CLOCK_MONOTONIC) * 1000ULL;
                /* Times only forward, never far ahead: the findings are made in that order, and a time
                 * ahead would hold back every xrun after it. */
                if (rec.type != RECORD_XRUN || rec.at_ns < s->last_ns || rec.at_ns > now + AHEAD_NS) {
                        skipped++;
                        continue;
                }
                s->last_ns = rec.at_ns;
                *ret_at = rec.at_ns;
                return 1;
        }
        return r;
}

void xruns_server_stop(XrunsServer *s)
{
        assert(s);

        if (s->fd >= 0)
                close(s->fd);
        s->fd = -EBADF;
        if (s->pid <= 0)
                return;
        /* Closing the socket ends the child, which leaves the server as a client should. */
        (void)child_reap(s);
}
