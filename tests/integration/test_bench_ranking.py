"""bench/ranking.py: what the xrun and latency benches rank configurations by. The rank needs every cell
of one configuration below every cell of another; the rank-sum test says "lower" where the cells as a
whole are, though a cell or two overlap, and not where they are the same draw."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))

import ranking  # noqa: E402


def test_apart_cells_rank_and_are_lower():
    r = {st["name"]: st for st in ranking.rank({"a": [0, 1, 1, 2, 2, 3, 3, 4], "b": [5, 6, 6, 7, 8, 8, 9, 12]})}
    assert r["a"]["rank"] == 1 and r["b"]["rank"] == 2
    assert r["a"]["ahead_of"] == ["b"]
    # Exact: of the 12,870 ways to split 16 cells into two groups of 8, one puts these 8 lowest.
    assert r["a"]["lower_than"] == {"b": float("%.3g" % (1 / 12870))}
    assert r["b"]["lower_than"] == {}


def test_overlapping_cells_share_a_rank_yet_one_is_lower():
    # 2026-11-29, JACK at 128 frames, xruns per minute: rtctl:audio against audio with
    # GlobalMaxExitLatencyUs=0 and against hand (bench/README.md).
    cells = {"audio": [1, 5, 5, 5, 5, 8, 9, 14], "global": [6, 11, 11, 11, 12, 12, 14, 21],
             "hand": [6, 7, 8, 9, 15, 15, 19, 26]}
    r = {st["name"]: st for st in ranking.rank(cells)}
    assert {st["rank"] for st in r.values()} == {1}
    assert set(r["audio"]["lower_than"]) == {"global", "hand"}
    assert 0.004 < r["audio"]["lower_than"]["global"] < 0.007
    assert r["global"]["lower_than"] == {} and r["hand"]["lower_than"] == {}


def test_the_same_draw_is_lower_than_nothing():
    cells = [0, 0, 1, 2, 3, 5, 8, 13]
    r = ranking.rank({"a": list(cells), "b": list(reversed(cells))})
    assert all(st["lower_than"] == {} for st in r)
    assert ranking.rank_sum_p([0] * 8, [0] * 8) == 1.0


def test_many_cells_take_the_normal_approximation():
    # C(40, 20) splits are too many to count; the approximation must still tell these apart, and not
    # these two alike.
    assert ranking.rank_sum_p(list(range(20)), list(range(10, 30))) < 0.001
    assert ranking.rank_sum_p(list(range(20)), list(range(20))) > 0.4
