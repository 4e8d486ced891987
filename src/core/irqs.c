/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <fcntl.h>
#include <fnmatch.h>
#include <glib.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "core/irqs.h"
#include "shared/log.h"
#include "shared/sysfs.h"

static const char *const class_names[_IRQ_CLASS_MAX] = {
    [IRQ_CLASS_OTHER] = "other",     [IRQ_CLASS_AUDIO] = "audio", [IRQ_CLASS_NETWORK] = "network",
    [IRQ_CLASS_STORAGE] = "storage", [IRQ_CLASS_USB] = "usb",
};

const char *irq_class_to_string(IrqClass c)
{
        return c >= 0 && c < _IRQ_CLASS_MAX ? class_names[c] : "other";
}

int irq_class_from_string(const char *s)
{
        for (int i = 0; i < _IRQ_CLASS_MAX; i++)
                if (streq(class_names[i], s))
                        return i;
        return -EINVAL;
}

/* PCI class code (0xBBSSPP): base class, subclass, programming interface. */
static IrqClass class_of_pci(unsigned code)
{
        unsigned base = code >> 16, sub = (code >> 8) & 0xff;

        if (base == 0x04 && (sub == 0x01 || sub == 0x03))
                return IRQ_CLASS_AUDIO;
        if (base == 0x02)
                return IRQ_CLASS_NETWORK;
        if (base == 0x01)
                return IRQ_CLASS_STORAGE;
        if (base == 0x0c && sub == 0x03)
                return IRQ_CLASS_USB;
        return IRQ_CLASS_OTHER;
}

typedef struct PciDev {
        char *addr;
        char *driver;
        char *sound_card;
        IrqClass class;
        int node;
} PciDev;

static void irq_clear(Irq *i)
{
        free(i->chip);
        free(i->actions);
        free(i->device);
        free(i->driver);
        free(i->sound_card);
        cpuset_free(i->affinity);
        cpuset_free(i->effective);
}

void irq_table_free(IrqTable *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->n; i++)
                irq_clear(&t->irqs[i]);
        free(t->irqs);
        free(t);
}

static int cmp_irq(const void *a, const void *b)
{
        unsigned x = ((const Irq *)a)->num, y = ((const Irq *)b)->num;
        return x < y ? -1 : x > y;
}

const Irq *irq_table_find(const IrqTable *t, unsigned num)
{
        Irq key = {.num = num};
        return t && t->n ? bsearch(&key, t->irqs, t->n, sizeof(Irq), cmp_irq) : NULL;
}

static const char *skip_space(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

static const char *skip_word(const char *p)
{
        while (*p && *p != ' ' && *p != '\t' && *p != '\n')
                p++;
        return p;
}

/* One numbered line: " 38:      10505       9293 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0".
 * The counts are summed by hand: on a 1024-CPU machine the file is tens of megabytes of them. */
static bool parse_line(const char *p, unsigned n_columns, Irq *ret)
{
        const char *end;
        unsigned long num;
        uint64_t sum = 0;

        p = skip_space(p);
        if (*p < '0' || *p > '9')
                return false;
        num = strtoul(p, (char **)&end, 10);
        if (*end != ':' || num > UINT_MAX)
                return false;
        p = end + 1;
        for (unsigned c = 0; c < n_columns; c++) {
                uint64_t v = 0;
                p = skip_space(p);
                if (*p < '0' || *p > '9')
                        break;
                while (*p >= '0' && *p <= '9')
                        v = v * 10 + (uint64_t)(*p++ - '0');
                sum += v;
        }
        *ret = (Irq){.num = (unsigned)num, .count = sum, .node = -1};
        p = skip_space(p);
        end = skip_word(p);
        ret->chip = xstrndup(p, (size_t)(end - p));
        p = skip_space(end);
        /* Then the hardware IRQ when the chip has a domain, glued to the flow name where there is one
         * (x86: "5-edge", "2-fasteoi"); arm64 kernels print the trigger as a word of its own ("GICv3  27
         * Level"); a chip without a domain may print the flow alone ("-edge"). The actions follow, up to
         * the line's end. */
        end = skip_word(p);
        if ((*p >= '0' && *p <= '9') || *p == '-')
                p = skip_space(end);
        end = skip_word(p);
        if (startswith(p, "Level") || startswith(p, "Edge"))
                p = skip_space(end);
        end = strchrnul(p, '\n');
        while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
                end--;
        ret->actions = xstrndup(p, (size_t)(end - p));
        if (!ret->chip || !ret->actions)
                abort();
        return true;
}

typedef struct InterruptsParser {
        GArray *irqs;
        unsigned n_columns; /* from the header line: "CPU0 CPU1 ..." */
        bool header;
} InterruptsParser;

/* Parses the whole lines of buf[0, have) (buf[have] is a NUL), and at the end of the file the last one
 * too. Returns where the next line starts. */
static size_t parse_lines(InterruptsParser *ps, char *buf, size_t have, bool eof)
{
        char *p = buf, *nl;

        while ((nl = memchr(p, '\n', have - (size_t)(p - buf))) || (eof && *p)) {
                Irq irq;
                if (nl)
                        *nl = 0;
                if (ps->header) {
                        for (const char *q = p; (q = strstr(q, "CPU")); q += 3)
                                ps->n_columns++;
                        ps->header = false;
                } else if (parse_line(p, ps->n_columns, &irq))
                        g_array_append_val(ps->irqs, irq);
                if (!nl)
                        return have;
                p = nl + 1;
        }
        return (size_t)(p - buf);
}

/* Read in pieces and parsed line by line: a 1024-CPU machine's file is 46 MB, and holding it whole
 * would cost that much memory on every pass. The buffer starts at a few pages, which hold a small
 * machine's whole file, and doubles while one line does not fit (8192 CPUs make lines of 90 kB). It is
 * not zeroed: a pass on every CPU event paid for faulting in 256 kB of zeroes. */
static int read_interrupts(GArray *irqs)
{
        _cleanup_free_ char *path = sys_path("/proc/interrupts");
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        int open_errno = errno;
        const size_t max = 1024 * 1024;
        size_t size = 16 * 1024;
        _cleanup_free_ char *buf = xreallocarray(NULL, size + 1, 1);
        InterruptsParser ps = {.irqs = irqs, .header = true};
        size_t have = 0, used;

        if (fd < 0)
                return -open_errno;
        for (;;) {
                ssize_t k = read(fd, buf + have, size - have);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                have += (size_t)k;
                buf[have] = 0;
                used = parse_lines(&ps, buf, have, k == 0);
                if (k == 0)
                        return 0;
                have -= used;
                memmove(buf, buf + used, have);
                if (have == size) {
                        if (size >= max)
                                return -E2BIG; /* a line longer than any machine's */
                        size *= 2;
                        buf = xreallocarray(buf, size + 1, 1);
                }
        }
}

static IrqTable *table_new(GArray *irqs, uint64_t timestamp_usec)
{
        IrqTable *t = xmalloc0(sizeof(IrqTable));

        t->timestamp_usec = timestamp_usec;
        t->n = irqs->len;
        t->irqs = (Irq *)g_array_free(irqs, false);
        /* An empty table has no array: bsearch() and qsort() take none, even for 0 elements. */
        if (t->n)
                qsort(t->irqs, t->n, sizeof(Irq), cmp_irq);
        return t;
}

IrqTable *irq_table_parse(const char *text, size_t len)
{
        _cleanup_free_ char *buf = xmalloc0(len + 1);
        InterruptsParser ps = {.irqs = g_array_new(false, true, sizeof(Irq)), .header = true};

        memcpy(buf, text, len);
        parse_lines(&ps, buf, len, true);
        return table_new(ps.irqs, now_usec(CLOCK_MONOTONIC));
}

/* What the kernel lets a user do with the IRQ. A managed IRQ's affinity file is read-only (mode 0444);
 * root could still open it, so the mode is what counts, not a failed write. */
static void read_proc_irq(int dir_fd, Irq *irq, unsigned flags, unsigned n_cpus)
{
        _cleanup_free_ char *p = xasprintf("%u/smp_affinity_list", irq->num);
        _cleanup_close_ int fd = openat(dir_fd, p, O_RDONLY | O_CLOEXEC);
        char buf[4096];
        struct stat st;
        ssize_t k;

        /* One open per IRQ on the pass's path: its mode and its CPUs (smp_affinity_list has the same
         * mode as smp_affinity). */
        if (fd < 0 || fstat(fd, &st) < 0) {
                irq->unmovable = isempty(irq->actions) ? IRQ_UNMOVABLE_NOHANDLER : IRQ_UNMOVABLE_NOFILE;
                return;
        }
        k = read(fd, buf, sizeof buf - 1);
        if (k > 0) {
                buf[k] = 0;
                (void)cpuset_parse_list(strstrip(buf), n_cpus, &irq->affinity, NULL);
        }
        if (flags & IRQ_LOAD_EFFECTIVE) {
                free(p);
                p = xasprintf("/proc/irq/%u/effective_affinity_list", irq->num);
                irq->effective = sys_read_cpuset(p, n_cpus, false);
        }
        if (isempty(irq->actions))
                irq->unmovable = IRQ_UNMOVABLE_NOHANDLER;
        else if (!(st.st_mode & 0222))
                irq->unmovable = IRQ_UNMOVABLE_MANAGED;
        else if (!irq->affinity)
                irq->unmovable = IRQ_UNMOVABLE_NOFILE;
}

static char *link_name(const char *path)
{
        _cleanup_free_ char *target = NULL;
        const char *slash;

        if (sys_readlink(path, &target) < 0)
                return NULL;
        slash = strrchr(target, '/');
        return xstrdup(slash ? slash + 1 : target);
}

static bool is_pci_address(const char *s)
{
        unsigned a, b, c, d;
        char tail;

        return sscanf(s, "%x:%x:%x.%x%c", &a, &b, &c, &d, &tail) == 4;
}

/* The PCI function a sound card hangs off: the card's device itself for HDA, the USB host controller a
 * USB interface sits behind. Found by walking up the card's device path. */
static char *sound_card_pci(const char *card)
{
        _cleanup_free_ char *link = xasprintf("/sys/class/sound/%s/device", card);
        _cleanup_free_ char *full = sys_path(link);
        char resolved[PATH_MAX];
        char *slash;

        if (!realpath(full, resolved))
                return NULL;
        while ((slash = strrchr(resolved, '/'))) {
                if (is_pci_address(slash + 1))
                        return xstrdup(slash + 1);
                *slash = 0;
        }
        return NULL;
}

static GArray *read_pci(GHashTable **ret_by_irq)
{
        GArray *devs = g_array_new(false, true, sizeof(PciDev));
        GHashTable *by_irq = g_hash_table_new(g_direct_hash, g_direct_equal);
        _cleanup_closedir_ DIR *d = sys_opendir("/sys/bus/pci/devices");
        _cleanup_closedir_ DIR *snd = sys_opendir("/sys/class/sound");
        struct dirent *de;

        while (d && (de = readdir(d))) {
                _cleanup_free_ char *base = NULL, *p = NULL, *s = NULL;
                _cleanup_closedir_ DIR *msi = NULL;
                PciDev dev = {};
                unsigned code = 0, irq;
                bool any = false;

                if (de->d_name[0] == '.')
                        continue;
                base = xasprintf("/sys/bus/pci/devices/%s", de->d_name);
                p = xasprintf("%s/class", base);
                if (sys_read(p, &s) >= 0)
                        code = (unsigned)strtoul(s, NULL, 16);
                dev.addr = xstrdup(de->d_name);
                dev.class = class_of_pci(code);
                dev.node = -1;
                free(p);
                free(s);
                s = NULL;
                p = xasprintf("%s/numa_node", base);
                if (sys_read(p, &s) >= 0)
                        (void)safe_atoi(strstrip(s), &dev.node);
                free(p);
                p = xasprintf("%s/driver", base);
                dev.driver = link_name(p);
                g_array_append_val(devs, dev);
                gpointer index = GUINT_TO_POINTER(devs->len); /* 1-based: 0 is "none" */

                free(p);
                p = xasprintf("%s/msi_irqs", base);
                msi = sys_opendir(p);
                for (struct dirent *v; msi && (v = readdir(msi));)
                        if (safe_atou(v->d_name, &irq) >= 0) {
                                g_hash_table_insert(by_irq, GUINT_TO_POINTER(irq), index);
                                any = true;
                        }
                /* The legacy line, shared or not: the first bound device on it names it. */
                free(p);
                p = xasprintf("%s/irq", base);
                free(s);
                s = NULL;
                if (!any && dev.driver && sys_read(p, &s) >= 0 && safe_atou(strstrip(s), &irq) >= 0 &&
                    irq > 0 && !g_hash_table_contains(by_irq, GUINT_TO_POINTER(irq)))
                        g_hash_table_insert(by_irq, GUINT_TO_POINTER(irq), index);
        }
        while (snd && (de = readdir(snd))) {
                _cleanup_free_ char *addr = NULL;
                if (!startswith(de->d_name, "card"))
                        continue;
                addr = sound_card_pci(de->d_name);
                for (guint i = 0; addr && i < devs->len; i++) {
                        PciDev *dev = &g_array_index(devs, PciDev, i);
                        if (streq(dev->addr, addr) && !dev->sound_card) {
                                dev->sound_card = xstrdup(de->d_name);
                                dev->class = IRQ_CLASS_AUDIO;
                        }
                }
        }
        *ret_by_irq = by_irq;
        return devs;
}

/* MSI chips name their device: "IR-PCI-MSIX-0000:3d:00.0", "PCI-MSI-0000:00:1f.3". */
static const char *chip_device(const char *chip)
{
        const char *p = strstr(chip, "PCI-MSI");
        if (!p)
                return NULL;
        p = strchr(p + 7, '-');
        return p && is_pci_address(p + 1) ? p + 1 : NULL;
}

int irq_table_load(unsigned flags, unsigned n_cpus, IrqTable **ret)
{
        g_autoptr(GArray) irqs = g_array_new(false, true, sizeof(Irq));
        g_autoptr(GHashTable) by_irq = NULL;
        uint64_t timestamp_usec;
        GArray *devs;
        int r;

        assert(ret);

        r = read_interrupts(irqs);
        timestamp_usec = now_usec(CLOCK_MONOTONIC);
        if (r < 0) {
                for (guint i = 0; i < irqs->len; i++)
                        irq_clear(&g_array_index(irqs, Irq, i));
                return r;
        }
        /* Thousands of opens below it: walk the prefix once. */
        _cleanup_free_ char *dir = sys_path("/proc/irq");
        _cleanup_close_ int dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        devs = read_pci(&by_irq);
        for (guint i = 0; i < irqs->len; i++) {
                Irq *irq = &g_array_index(irqs, Irq, i);
                guint index = GPOINTER_TO_UINT(g_hash_table_lookup(by_irq, GUINT_TO_POINTER(irq->num)));
                const char *from_chip = chip_device(irq->chip);

                for (guint k = 0; !index && from_chip && k < devs->len; k++)
                        if (streq(g_array_index(devs, PciDev, k).addr, from_chip))
                                index = k + 1;
                if (index) {
                        const PciDev *dev = &g_array_index(devs, PciDev, index - 1);
                        irq->device = xstrdup(dev->addr);
                        irq->driver = dev->driver ? xstrdup(dev->driver) : NULL;
                        irq->sound_card = dev->sound_card ? xstrdup(dev->sound_card) : NULL;
                        irq->class = dev->class;
                        irq->node = dev->node;
                }
                read_proc_irq(dir_fd, irq, flags, n_cpus);
        }
        for (guint i = 0; i < devs->len; i++) {
                PciDev *dev = &g_array_index(devs, PciDev, i);
                free(dev->addr);
                free(dev->driver);
                free(dev->sound_card);
        }
        g_array_free(devs, true);
        *ret = table_new(g_steal_pointer(&irqs), timestamp_usec);
        return 0;
}

static const char *const match_keys[] = {"class", "name", "driver", "irq", "device", NULL};

char *irq_match_check(char *const *conditions)
{
        for (char *const *c = conditions; c && *c; c++) {
                const char *colon = strchr(*c, ':');
                _cleanup_free_ char *key = colon ? xstrndup(*c, (size_t)(colon - *c)) : NULL;
                _cleanup_strv_free_ char **alts = NULL;
                bool known = false;

                for (const char *const *k = match_keys; key && *k; k++)
                        known = known || streq(*k, key);
                if (!known || isempty(colon + 1))
                        return xasprintf("'%s' is not a condition: expected class:audio|network|storage|usb|"
                                         "other, name:GLOB, driver:GLOB, irq:N or device:PCI-ADDRESS",
                                         *c);
                alts = strv_split(colon + 1, "|");
                for (char **a = alts; *a; a++) {
                        unsigned n;
                        if (streq(key, "class") && irq_class_from_string(*a) < 0)
                                return xasprintf("unknown class '%s' (audio, network, storage, usb, other)",
                                                 *a);
                        if (streq(key, "irq") && safe_atou(*a, &n) < 0)
                                return xasprintf("irq: takes an IRQ number, not '%s'", *a);
                        char *bad = glob_error(*a);
                        if (bad)
                                return bad;
                }
        }
        return NULL;
}

/* name:GLOB holds when one of the IRQ's actions matches. */
static bool name_matches(const char *glob, const char *actions)
{
        _cleanup_strv_free_ char **names = strv_split(actions, ",");

        if (fnmatch(glob, actions, 0) == 0)
                return true;
        for (char **n = names; *n; n++)
                if (fnmatch(glob, strstrip(*n), 0) == 0)
                        return true;
        return false;
}

static bool condition_holds(const char *key, const char *alt, const Irq *irq)
{
        unsigned n;

        if (streq(key, "class"))
                return streq(irq_class_to_string(irq->class), alt);
        if (streq(key, "name"))
                return name_matches(alt, irq->actions);
        if (streq(key, "driver"))
                return irq->driver && fnmatch(alt, irq->driver, 0) == 0;
        if (streq(key, "irq"))
                return safe_atou(alt, &n) >= 0 && n == irq->num;
        if (streq(key, "device"))
                return irq->device && fnmatch(alt, irq->device, 0) == 0;
        return false;
}

bool irq_match(char *const *conditions, const Irq *irq)
{
        assert(irq);

        for (char *const *c = conditions; c && *c; c++) {
                const char *colon = strchr(*c, ':');
                _cleanup_free_ char *key = colon ? xstrndup(*c, (size_t)(colon - *c)) : NULL;
                _cleanup_strv_free_ char **alts = NULL;
                bool any = false;

                if (!key)
                        return false;
                alts = strv_split(colon + 1, "|");
                for (char **a = alts; *a && !any; a++)
                        any = condition_holds(key, *a, irq);
                if (!any)
                        return false;
        }
        return true;
}

char *format_ranges(const unsigned *nums, size_t n)
{
        GString *s = g_string_new(NULL);

        for (size_t i = 0; i < n;) {
                size_t j = i;
                while (j + 1 < n && nums[j + 1] == nums[j] + 1)
                        j++;
                g_string_append_printf(s, "%s%u", s->len ? "," : "", nums[i]);
                if (j > i)
                        g_string_append_printf(s, "-%u", nums[j]);
                i = j + 1;
        }
        return g_string_free(s, false);
}

void irq_table_keep_counts(IrqTable *t)
{
        for (size_t i = 0; i < t->n; i++) {
                Irq *q = &t->irqs[i];
                char *actions = TAKE_PTR(q->actions);
                uint64_t count = q->count;
                unsigned num = q->num;
                irq_clear(q);
                *q = (Irq){.num = num, .actions = actions, .count = count, .node = -1};
        }
}
