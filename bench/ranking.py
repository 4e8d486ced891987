"""Ranking configurations by cells measured in alternating rounds: each configuration's median,
quartiles and range over its cells, and a rank only where the ranges say so. Beside the rank, which
needs every cell of one configuration below every cell of another, a rank-sum test says where one
configuration's cells are lower than another's as a whole (p < 0.05), when a cell or two of each
overlap."""
import itertools
import math

ALPHA = 0.05
EXACT_MAX = 100000  # partitions enumerated for an exact p; beyond, the normal approximation


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2.0


def quartiles(xs):
    """The lower and upper quartile (the medians of the lower and upper halves); with fewer than four
    cells, the range."""
    s = sorted(xs)
    half = len(s) // 2
    if len(s) < 4:
        return s[0], s[-1]
    return median(s[:half]), median(s[-half:])


def u_statistic(xs, ys):
    """Mann-Whitney U of xs against ys: pairs where the x is larger, ties counted half. Small: xs lower."""
    return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)


def rank_sum_p(xs, ys):
    """One-sided p that xs are this much lower than ys by chance: the share of all ways to split the
    pooled cells into groups of these sizes whose U is at most the observed one (exact, ties included,
    for up to EXACT_MAX splits: 8 cells against 8 are 12,870), else the normal approximation with the
    tie correction."""
    n, m = len(xs), len(ys)
    if not n or not m:
        return 1.0
    u = u_statistic(xs, ys)
    pool = list(xs) + list(ys)
    if math.comb(n + m, n) <= EXACT_MAX:
        hits = total = 0
        for idx in itertools.combinations(range(n + m), n):
            chosen = set(idx)
            a = [pool[i] for i in idx]
            b = [pool[i] for i in range(n + m) if i not in chosen]
            total += 1
            hits += u_statistic(a, b) <= u + 1e-9
        return hits / total
    counts = {}
    for v in pool:
        counts[v] = counts.get(v, 0) + 1
    t = sum(c ** 3 - c for c in counts.values())
    var = n * m / 12.0 * ((n + m + 1) - t / float((n + m) * (n + m - 1)))
    if var <= 0:
        return 1.0
    z = (u + 0.5 - n * m / 2.0) / math.sqrt(var)  # continuity-corrected
    return 0.5 * math.erfc(-z / math.sqrt(2))


def rank(groups):
    """groups: name -> the cells' values (lower is better). Per name: cells, median, q1, q3, min, max,
    ahead_of (the names whose best cell is worse than this one's worst: the ranges do not overlap),
    behind, and rank = 1 + len(behind), so that names the cells cannot tell apart share a rank. Sorted by
    rank, then median."""
    stats = {}
    for name, xs in groups.items():
        xs = [x for x in xs if not math.isnan(x)]  # a cell that counted nothing measured nothing
        if not xs:
            continue
        q1, q3 = quartiles(xs)
        stats[name] = {"name": name, "cells": len(xs), "median": round(median(xs), 2), "q1": round(q1, 2),
                       "q3": round(q3, 2), "min": round(min(xs), 2), "max": round(max(xs), 2), "values": list(xs)}
    for name, st in stats.items():
        st["ahead_of"] = sorted(m for m, o in stats.items() if m != name and st["max"] < o["min"])
        st["behind"] = sorted(m for m, o in stats.items() if m != name and o["max"] < st["min"])
        st["rank"] = 1 + len(st["behind"])
        st["lower_than"] = {m: float("%.3g" % p) for m, o in sorted(stats.items())
                            if m != name and (p := rank_sum_p(st["values"], o["values"])) < ALPHA}
    return sorted(stats.values(), key=lambda st: (st["rank"], st["median"]))


def print_ranking(title, unit, ranked, label=lambda st: st["name"], width=24):
    print(title)
    names = {st["name"]: label(st) for st in ranked}
    print("%-*s %5s %9s %15s %15s %5s  %s" % (width, "", "cells", "median", "IQR", "min-max", "rank",
                                            "ahead of (ranges apart); lower than (rank-sum p)"))
    for st in ranked:
        lower = ", ".join("%s (p=%.3g)" % (names.get(m, m), p) for m, p in st.get("lower_than", {}).items())
        print("%-*s %5d %9.2f %15s %15s %5d  %s; %s" % (
            width, label(st), st["cells"], st["median"], "%.1f-%.1f" % (st["q1"], st["q3"]),
            "%.1f-%.1f" % (st["min"], st["max"]), st["rank"], ", ".join(st["ahead_of"]) or "-", lower or "-"))
    print("(%s; rank: 1 + the configurations whose worst cell beat this one's best: overlapping ranges "
          "share a rank; lower than: a one-sided Mann-Whitney rank-sum test over the cells, p < %g)"
          % (unit, ALPHA))
