/* SPDX-License-Identifier: GPL-2.0-or-later */
#include <glib.h>
#include <inttypes.h>
#include <math.h>

#include "core/latency.h"

void latency_hist_init(LatencyHist *h)
{
        assert(h);

        memset(h, 0, sizeof(*h));
        h->min_ns = UINT64_MAX;
}

void latency_hist_add(LatencyHist *h, uint64_t ns)
{
        uint64_t us = ns / 1000;

        assert(h);

        h->count++;
        h->sum_ns += ns;
        h->min_ns = MIN(h->min_ns, ns);
        h->max_ns = MAX(h->max_ns, ns);
        if (us < LATENCY_HIST_US)
                h->buckets[us]++;
        else
                h->overflow++;
}

void latency_hist_merge(LatencyHist *into, const LatencyHist *h)
{
        assert(into);
        assert(h);

        into->count += h->count;
        into->overflow += h->overflow;
        into->sum_ns += h->sum_ns;
        into->min_ns = MIN(into->min_ns, h->min_ns);
        into->max_ns = MAX(into->max_ns, h->max_ns);
        for (unsigned i = 0; i < LATENCY_HIST_US; i++)
                into->buckets[i] += h->buckets[i];
}

double latency_hist_quantile(const LatencyHist *h, double q)
{
        assert(h);
        assert(q > 0 && q <= 1);

        double max_us = (double)h->max_ns / 1000.0;
        uint64_t acc = 0, want;

        if (h->count == 0)
                return 0;
        /* The rank of the q-quantile, counted from 1: at least the first sample. The product's rounding
         * error must not push an exact rank (0.99 x 100) to the next one. */
        want = (uint64_t)ceil(q * (double)h->count - 1e-9);
        want = MAX(want, 1u);
        for (unsigned i = 0; i < LATENCY_HIST_US; i++) {
                acc += h->buckets[i];
                if (acc >= want)
                        return MIN((double)(i + 1), max_us);
        }
        return max_us;
}

void latency_hist_stats(const LatencyHist *h, LatencyStats *ret)
{
        assert(h);

        *ret = (LatencyStats){.samples = h->count, .overflow = h->overflow};
        if (h->count == 0)
                return;
        ret->min_us = (double)h->min_ns / 1000.0;
        ret->max_us = (double)h->max_ns / 1000.0;
        ret->avg_us = (double)h->sum_ns / (double)h->count / 1000.0;
        ret->p50_us = latency_hist_quantile(h, 0.5);
        ret->p99_us = latency_hist_quantile(h, 0.99);
        ret->p99_9_us = latency_hist_quantile(h, 0.999);
}

uint64_t latency_hist_range(const LatencyHist *h, unsigned lo_us, unsigned hi_us)
{
        uint64_t n = 0;

        for (unsigned i = lo_us; i < hi_us && i < LATENCY_HIST_US; i++)
                n += h->buckets[i];
        if (hi_us > LATENCY_HIST_US)
                n += h->overflow;
        return n;
}

static json_object *json_us(double us)
{
        /* Nanosecond precision is all the data has, and all the text says. */
        _cleanup_free_ char *text = xasprintf("%.3f", us);

        return json_object_new_double_s(us, text);
}

json_object *latency_hist_json(const LatencyHist *h)
{
        json_object *o = json_object_new_object(), *a = json_object_new_array();
        LatencyStats s;

        latency_hist_stats(h, &s);
        json_object_object_add(o, "samples", json_object_new_uint64(s.samples));
        json_object_object_add(o, "overflow", json_object_new_uint64(s.overflow));
        json_object_object_add(o, "min_us", json_us(s.min_us));
        json_object_object_add(o, "avg_us", json_us(s.avg_us));
        json_object_object_add(o, "p50_us", json_us(s.p50_us));
        json_object_object_add(o, "p99_us", json_us(s.p99_us));
        json_object_object_add(o, "p99_9_us", json_us(s.p99_9_us));
        json_object_object_add(o, "max_us", json_us(s.max_us));
        for (unsigned i = 0; i < LATENCY_HIST_US; i++) {
                if (!h->buckets[i])
                        continue;
                json_object *b = json_object_new_array();
                json_object_array_add(b, json_object_new_int((int)i));
                json_object_array_add(b, json_object_new_uint64(h->buckets[i]));
                json_object_array_add(a, b);
        }
        json_object_object_add(o, "histogram", a);
        return o;
}

/* ---- SVG ---------------------------------------------------------------------------------------- */

#define SVG_W      800.0
#define SVG_H      420.0
#define SVG_LEFT   70.0
#define SVG_RIGHT  30.0
#define SVG_TOP    40.0
#define SVG_BOTTOM 50.0

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                     "#9467bd", "#8c564b", "#e377c2", "#17becf"};

/* 1, 2, 5, 10, 20, 50, ... : the first at or above x, at most the histogram's end. */
static unsigned round_up(double x)
{
        static const unsigned steps[] = {1, 2, 5};

        for (unsigned decade = 1; decade < LATENCY_HIST_US; decade *= 10)
                for (size_t i = 0; i < ELEMENTSOF(steps); i++)
                        if (steps[i] * decade >= x)
                                return MIN(steps[i] * decade, LATENCY_HIST_US);
        return LATENCY_HIST_US;
}

static void xml_escaped(GString *s, const char *text)
{
        for (const char *p = text; *p; p++)
                switch (*p) {
                case '<':
                        g_string_append(s, "&lt;");
                        break;
                case '>':
                        g_string_append(s, "&gt;");
                        break;
                case '&':
                        g_string_append(s, "&amp;");
                        break;
                case '"':
                        g_string_append(s, "&quot;");
                        break;
                default:
                        g_string_append_c(s, *p);
                }
}

typedef struct Frame {
        unsigned x_max; /* µs at the right end of the linear part */
        double decades; /* of the count axis: its top is 10^(decades-1) */
        double bar_w;   /* the beyond-x_max bar */
} Frame;

static double px(const Frame *f, double us)
{
        return SVG_LEFT + us / f->x_max * (SVG_W - SVG_LEFT - SVG_RIGHT - f->bar_w - 10.0);
}

/* Count 0 sits on the axis, 1 one decade above it: a single sample stays visible. */
static double py(const Frame *f, uint64_t count)
{
        double level = count ? log10((double)count) + 1.0 : 0.0;
        return SVG_H - SVG_BOTTOM - level / f->decades * (SVG_H - SVG_TOP - SVG_BOTTOM);
}

static void svg_axes(GString *s, const Frame *f, const char *title)
{
        double x0 = SVG_LEFT, y0 = SVG_H - SVG_BOTTOM, xr = SVG_W - SVG_RIGHT;

        g_string_append_printf(s, "<text x=\"%.0f\" y=\"24\" font-size=\"15\">", SVG_LEFT);
        xml_escaped(s, title);
        g_string_append(s, "</text>\n");
        g_string_append_printf(
            s, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", x0, y0, xr, y0);
        g_string_append_printf(s,
                               "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n",
                               x0, y0, x0, SVG_TOP);
        for (unsigned k = 0; k < 10; k++) {
                unsigned us = f->x_max * k / 10;
                if (k > 0 && us == f->x_max * (k - 1) / 10)
                        continue;
                g_string_append_printf(s,
                                       "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" "
                                       "text-anchor=\"middle\">%u</text>\n",
                                       px(f, us), y0 + 15, us);
        }
        g_string_append_printf(
            s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%u</text>\n",
            px(f, f->x_max), y0 + 15, f->x_max);
        g_string_append_printf(
            s, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">&gt;%u</text>\n",
            xr - f->bar_w / 2, y0 + 15, f->x_max);
        g_string_append_printf(s,
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">"
                               "wake-up latency (µs)</text>\n",
                               (x0 + xr) / 2, SVG_H - 12);
        g_string_append_printf(s,
                               "<text x=\"16\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
                               "transform=\"rotate(-90 16 %.1f)\">samples (log scale)</text>\n",
                               (SVG_TOP + y0) / 2, (SVG_TOP + y0) / 2);
        for (unsigned d = 0; d < (unsigned)f->decades; d++) {
                uint64_t count = 1;
                for (unsigned k = 0; k < d; k++)
                        count *= 10;
                double y = py(f, count);
                g_string_append_printf(
                    s,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n"
                    "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%" PRIu64 "</text>\n",
                    x0, y, xr, y, x0 - 4, y + 4, count);
        }
}

static void svg_series(GString *s, const Frame *f, const LatencySeries *series, size_t i)
{
        const LatencyHist *h = series->hist;
        const char *color = colors[i % ELEMENTSOF(colors)];
        double y0 = SVG_H - SVG_BOTTOM, xr = SVG_W - SVG_RIGHT;
        uint64_t beyond = latency_hist_range(h, f->x_max, LATENCY_HIST_US + 1);
        double w = f->bar_w / 2.0;

        g_string_append_printf(
            s, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"%.1f,%.1f", color,
            px(f, 0), y0);
        for (unsigned us = 0; us < f->x_max; us++) {
                double y = py(f, h->buckets[us]);
                g_string_append_printf(s, " %.1f,%.1f %.1f,%.1f", px(f, us), y, px(f, us + 1), y);
        }
        g_string_append_printf(s, " %.1f,%.1f\"/>\n", px(f, f->x_max), y0);
        /* Two series side by side in the beyond bar, and so on. */
        if (beyond)
                g_string_append_printf(s,
                                       "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                                       "fill=\"%s\" opacity=\"0.7\"/>\n",
                                       xr - f->bar_w + (double)(i % 2) * w, py(f, beyond), w,
                                       y0 - py(f, beyond), color);
        g_string_append_printf(s,
                               "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"3\" fill=\"%s\"/>"
                               "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">",
                               SVG_W - 250, SVG_TOP + 8 + 16.0 * (double)i, color, SVG_W - 232,
                               SVG_TOP + 13 + 16.0 * (double)i);
        xml_escaped(s, series->label);
        LatencyStats st;
        latency_hist_stats(h, &st);
        g_string_append_printf(s, ": p99 %.1f, max %.1f µs</text>\n", st.p99_us, st.max_us);
}

char *latency_svg(const LatencySeries *series, size_t n, const char *title)
{
        GString *s = g_string_new(NULL);
        Frame f = {.bar_w = 40.0};
        double right = 10.0;
        uint64_t top = 1;

        for (size_t i = 0; i < n; i++) {
                const LatencyHist *h = series[i].hist;
                LatencyStats st;
                latency_hist_stats(h, &st);
                right = MAX(right, st.p99_us * 2.0);
                top = MAX(top, h->overflow);
                for (unsigned us = 0; us < LATENCY_HIST_US; us++)
                        top = MAX(top, h->buckets[us]);
        }
        f.x_max = round_up(right);
        /* The beyond bar may hold more than any one bucket. */
        for (size_t i = 0; i < n; i++)
                top = MAX(top, latency_hist_range(series[i].hist, f.x_max, LATENCY_HIST_US + 1));
        f.decades = floor(log10((double)top)) + 2.0;

        g_string_append_printf(s,
                               "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n"
                               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                               SVG_W, SVG_H, SVG_W, SVG_H);
        svg_axes(s, &f, title);
        for (size_t i = 0; i < n; i++)
                svg_series(s, &f, &series[i], i);
        g_string_append(s, "</svg>\n");
        return g_string_free(s, false);
}

static double period_us(unsigned frames, unsigned rate)
{
        return 1e6 * frames / rate;
}

unsigned latency_safe_period(double worst_us, unsigned rate)
{
        if (rate == 0 || worst_us < 0)
                return 0;
        for (unsigned f = LATENCY_PERIOD_MIN; f <= LATENCY_PERIOD_MAX; f *= 2)
                if (worst_us <= LATENCY_SAFE_SHARE * period_us(f, rate))
                        return f;
        return 0;
}

/* 44100 -> "44.1 kHz", 48000 -> "48 kHz" */
static char *rate_name(unsigned rate)
{
        return rate % 1000 ? xasprintf("%.1f kHz", rate / 1000.0) : xasprintf("%u kHz", rate / 1000);
}

char *latency_verdict(double worst_us, unsigned rate, const char *what)
{
        _cleanup_free_ char *r = rate_name(rate);
        unsigned f = latency_safe_period(worst_us, rate);
        double p;

        if (f == 0)
                return xasprintf("%s: no period up to %u frames is safe (worst %s %.0f µs)", r,
                                 LATENCY_PERIOD_MAX, what, worst_us);
        p = period_us(f, rate);
        return xasprintf("%s: %u frames safe (worst %s %.0f µs, %.0f %% of %.2f ms)", r, f, what, worst_us,
                         100.0 * worst_us / p, p / 1000.0);
}
