/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <stdint.h>

#include "core/setting.h"
#include "shared/cpuset.h"

/* Every interrupt of the machine, as /proc/interrupts, /proc/irq/N and the PCI devices' msi_irqs/ and irq
 * files describe it: what device and driver it belongs to, what kind of device that is, where it may run,
 * and whether anyone but the kernel may move it. Read through the root prefix, so it works on fixtures. */

typedef enum IrqClass {
        IRQ_CLASS_OTHER,
        IRQ_CLASS_AUDIO,
        IRQ_CLASS_NETWORK,
        IRQ_CLASS_STORAGE,
        IRQ_CLASS_USB,
        _IRQ_CLASS_MAX,
} IrqClass;

const char *irq_class_to_string(IrqClass c);
int irq_class_from_string(const char *s);

typedef struct Irq {
        unsigned num;
        char *chip;       /* "IR-PCI-MSIX-0000:3d:00.0", "IO-APIC" */
        char *actions;    /* the handlers' names as /proc/interrupts joins them: "virtio2-input.0" */
        uint64_t count;   /* interrupts so far, all CPUs */
        char *device;     /* PCI address, NULL when not a PCI device's */
        char *driver;     /* the device's driver, NULL when unbound or unknown */
        char *sound_card; /* "card1" when a sound card sits on this device (a USB one: its controller) */
        IrqClass class;
        int node;          /* -1: the kernel does not say */
        CpuSet *affinity;  /* smp_affinity_list; NULL when there is none */
        CpuSet *effective; /* effective_affinity_list; NULL when the kernel has none */
        /* Why only the kernel places it, NULL when it is movable. */
        const char *unmovable;
} Irq;

typedef struct IrqTable {
        Irq *irqs; /* sorted by number */
        size_t n;
        uint64_t timestamp_usec; /* CLOCK_MONOTONIC when /proc/interrupts was read */
} IrqTable;

#define IRQ_UNMOVABLE_MANAGED   "kernel-managed affinity (smp_affinity is read-only)"
#define IRQ_UNMOVABLE_NOHANDLER "no handler"
#define IRQ_UNMOVABLE_NOFILE    "no affinity file"

enum {
        IRQ_LOAD_EFFECTIVE =
            1 << 0, /* also effective_affinity_list (for ListIrqs; a plan does not need it) */
};

/* The node comes from the IRQ's PCI device (numa_node), one read per device rather than per IRQ. */
/* n_cpus: the size of the CPU sets (the machine's possible CPUs), not the 8192 the kernel allows. */
int irq_table_load(unsigned flags, unsigned n_cpus, IrqTable **ret);
/* The IRQs of a /proc/interrupts text of len bytes, as they are listed there (nothing else is read):
 * for tests and fuzzing. */
IrqTable *irq_table_parse(const char *text, size_t len);
void irq_table_free(IrqTable *t);
static inline void irq_table_freep(IrqTable **t)
{
        irq_table_free(*t);
}
#define _cleanup_irq_table_ _cleanup_(irq_table_freep)

const Irq *irq_table_find(const IrqTable *t, unsigned num);

/* A rule's Match= conditions ("class:audio|usb", "name:GLOB", "driver:GLOB", "irq:N", "device:GLOB"),
 * all of which must hold. irq_match_check() returns a sentence naming the bad condition, or NULL. */
char *irq_match_check(char *const *conditions);
bool irq_match(char *const *conditions, const Irq *irq);

/* Writes "24-26,31" for a sorted list of numbers. */
char *format_ranges(const unsigned *nums, size_t n);

/* What the IRQ tuners carry from one pass to the next. The manager owns it; a plan reads it and leaves
 * the table it read in seen, which becomes previous only after a pass that really applied. */
typedef struct IrqPin {
        unsigned irq;
        CpuSet *cpus;
} IrqPin;

typedef struct IrqState {
        IrqTable *previous; /* rates are count differences to it; cumulative counts without it */
        IrqTable *seen;
        unsigned *refused; /* IRQs whose affinity write the kernel refused (EIO/EPERM): not tried again */
        size_t n_refused, refused_allocated;
        IrqPin *pins; /* PinIrq() overrides, until restore or a profile change */
        size_t n_pins, pins_allocated;
        bool stop_irqbalance; /* OnConflict=stop in rtctl.conf */
} IrqState;

void irq_state_commit(IrqState *s);
void irq_state_forget(IrqState *s); /* refused IRQs and pins: a new profile starts over */
void irq_state_clear(IrqState *s);
bool irq_state_refused(const IrqState *s, unsigned irq);
void irq_state_refuse(IrqState *s, unsigned irq);
/* Remembers the IRQs whose affinity the kernel refused in a pass (SETTING_REFUSED): not tried again
 * under this profile. */
void irq_state_note_results(IrqState *s, const Plan *plan);
const CpuSet *irq_state_pin(const IrqState *s, unsigned irq);
/* Replaces a pin; cpus NULL removes it. Takes cpus. */
void irq_state_set_pin(IrqState *s, unsigned irq, CpuSet *cpus);
/* Interrupts since the previous table (or since boot without one). */
uint64_t irq_state_delta(const IrqState *s, const Irq *irq);
