"""Ranking configurations by cells measured in alternating rounds: each configuration's median,
quartiles and range over its cells, and a rank only where the ranges say so."""
import math


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
    return sorted(stats.values(), key=lambda st: (st["rank"], st["median"]))


def print_ranking(title, unit, ranked, label=lambda st: st["name"], width=24):
    print(title)
    print("%-*s %5s %9s %15s %15s %5s  %s" % (width, "", "cells", "median", "IQR", "min-max", "rank",
                                            "ahead of (ranges apart)"))
    for st in ranked:
        print("%-*s %5d %9.2f %15s %15s %5d  %s" % (
            width, label(st), st["cells"], st["median"], "%.1f-%.1f" % (st["q1"], st["q3"]),
            "%.1f-%.1f" % (st["min"], st["max"]), st["rank"], ", ".join(st["ahead_of"]) or "-"))
    print("(%s; rank: 1 + the configurations whose worst cell beat this one's best: overlapping ranges "
          "share a rank)" % unit)
