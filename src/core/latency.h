/* SPDX-License-Identifier: GPL-2.0-or-later */
#pragma once

#include <json-c/json.h>
#include <stdint.h>

#include "shared/util.h"

/* Wake-up latencies of one CPU (rtctl latency): a histogram of 1 µs buckets up to 10 ms, as cyclictest
 * -h 10000 keeps, plus the exact sum, minimum and maximum. Plain data with no pointers, so a measuring
 * process can fill one in shared memory. */
#define LATENCY_HIST_US 10000u

typedef struct LatencyHist {
        uint64_t count;
        uint64_t overflow; /* samples of LATENCY_HIST_US µs or more: only in count, sum, max */
        uint64_t sum_ns;
        uint64_t min_ns;
        uint64_t max_ns;
        uint64_t buckets[LATENCY_HIST_US]; /* bucket i: [i, i+1) µs */
} LatencyHist;

typedef struct LatencyStats {
        uint64_t samples;
        uint64_t overflow;
        double min_us, avg_us, p50_us, p99_us, p99_9_us, max_us;
} LatencyStats;

void latency_hist_init(LatencyHist *h);
void latency_hist_add(LatencyHist *h, uint64_t ns);
void latency_hist_merge(LatencyHist *into, const LatencyHist *h);
/* The q-quantile (0 < q <= 1): the upper edge of the 1 µs bucket that holds it, never above the
 * maximum, so that an even latency of 3.7 µs reads 3.7 for every quantile and a quantile is never
 * below the average of samples that all fall in one bucket. Past the histogram: the maximum. */
double latency_hist_quantile(const LatencyHist *h, double q);
void latency_hist_stats(const LatencyHist *h, LatencyStats *ret);
/* Samples in [lo_us, hi_us); hi_us past the histogram includes the overflow. */
uint64_t latency_hist_range(const LatencyHist *h, unsigned lo_us, unsigned hi_us);

/* {samples, overflow, min_us, avg_us, p50_us, p99_us, p99_9_us, max_us, histogram: [[us, count], ...]}
 * with only the buckets that have samples; "us" is a bucket's lower edge. */
json_object *latency_hist_json(const LatencyHist *h);

typedef struct LatencySeries {
        const char *label; /* "cpu1", "audio cpu1" */
        const LatencyHist *hist;
} LatencySeries;

/* A self-contained SVG picture of the histograms: latency on a linear axis up to a round value at twice
 * the largest p99 (what lies beyond is one bar at the right edge), sample counts on a log scale, one step
 * line per series and a legend. */
char *latency_svg(const LatencySeries *series, size_t n, const char *title);

/* The verdict in audio terms: the smallest period, in frames (a power of two from 16 to 4096), whose
 * length at `rate` Hz holds the worst wake-up measured within LATENCY_SAFE_SHARE of it, so that the rest
 * is left for the graph's work; 0 when none does. The audio threads wake once a period, and a wake-up
 * that late takes that much of the cycle's time. */
#define LATENCY_SAFE_SHARE 0.25
#define LATENCY_PERIOD_MIN 16u
#define LATENCY_PERIOD_MAX 4096u
unsigned latency_safe_period(double worst_us, unsigned rate);
/* "48 kHz: 64 frames safe (worst wake-up 212 µs, 16 % of 1.33 ms)", or "48 kHz: no period up to 4096
 * frames is safe (worst wake-up 30000 µs)"; what names the measure ("wake-up", "interruption"). */
char *latency_verdict(double worst_us, unsigned rate, const char *what);
