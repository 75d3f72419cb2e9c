"""Tests for gomoku_jax.ratings: Elo by maximum likelihood."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gomoku_jax.ratings import Ratings, elo_from_games, elo_from_matrix, win_probability


def _records(i: int, j: int, wins: int, draws: int = 0, losses: int = 0) -> list[tuple[int, int, float]]:
    return [(i, j, 1.0)] * wins + [(i, j, 0.5)] * draws + [(i, j, 0.0)] * losses


def _simulate(true: np.ndarray, games_per_pair: int, rng: np.random.Generator) -> np.ndarray:
    """Round robin from known ratings; each pair plays games_per_pair games."""
    rows = []
    n = len(true)
    for i in range(n):
        for j in range(i + 1, n):
            p = win_probability(true[i], true[j])
            wins = rng.random(games_per_pair) < p
            pair = np.broadcast_to([i, j], (games_per_pair, 2))
            rows.append(np.column_stack([pair, wins.astype(float)]))
    return np.concatenate(rows)


def test_two_players_known_win_rate():
    p = 0.76
    r = elo_from_games(["random", "a"], _records(1, 0, wins=760, losses=240))
    expected = 400 * math.log10(p / (1 - p))
    assert r["random"] == 0.0
    assert r["a"] == pytest.approx(expected, abs=0.5)
    # The default prior barely matters with 1000 games: compare with no prior.
    exact = elo_from_games(["random", "a"], _records(1, 0, wins=760, losses=240), prior_sigma=None)
    assert exact["a"] == pytest.approx(expected, abs=1e-6)
    assert abs(r["a"] - exact["a"]) < 0.1
    assert r.prior_sigma == 1000.0 and exact.prior_sigma is None


def test_mle_satisfies_score_equations():
    # Without a prior the Bradley-Terry MLE matches expected and actual scores.
    rng = np.random.default_rng(1)
    records = _simulate(np.array([0.0, 150.0, 300.0, 320.0]), 60, rng)
    r = elo_from_games(["w", "x", "y", "z"], records, prior_sigma=None)
    i, j, s = records[:, 0].astype(int), records[:, 1].astype(int), records[:, 2]
    expected = win_probability(r.ratings[i], r.ratings[j])
    for k in range(4):
        actual = s[i == k].sum() + (1 - s[j == k]).sum()
        model = expected[i == k].sum() + (1 - expected[j == k]).sum()
        assert model == pytest.approx(actual, abs=1e-6)


def test_recovers_simulated_ratings():
    true = np.array([0.0, 200.0, 400.0])
    rng = np.random.default_rng(12345)
    r = elo_from_games(["random", "b", "c"], _simulate(true, 2000, rng))
    assert r.sd[0] == 0.0 and np.all(r.sd[1:] > 0)
    assert np.all(r.sd[1:] < 30)  # many games: informative
    assert np.all(np.abs(r.ratings - true) <= 3 * np.maximum(r.sd, 1e-12))
    assert np.all((r.lower <= true) & (true <= r.upper))
    assert np.allclose(r.upper - r.ratings, 1.96 * r.sd, rtol=1e-3)
    assert np.array_equal(r.games, [4000, 4000, 4000])


def test_interval_coverage_is_calibrated():
    true = np.array([0.0, 100.0, 250.0])
    rng = np.random.default_rng(7)
    trials, covered = 300, 0
    for _ in range(trials):
        r = elo_from_games(["random", "b", "c"], _simulate(true, 100, rng))
        covered += int(np.sum((r.lower[1:] <= true[1:]) & (true[1:] <= r.upper[1:])))
    rate = covered / (2 * trials)
    assert 0.91 <= rate <= 0.985


def test_anchoring_and_shift_consistency():
    names = ["alpha", "random", "gamma"]
    records = _records(0, 1, 30, 5, 10) + _records(2, 1, 40, 0, 20) + _records(0, 2, 12, 6, 14)
    by_default = elo_from_games(names, records)
    assert by_default.anchor == "random"
    assert by_default["random"] == 0.0 and by_default.sd[1] == 0.0
    by_gamma = elo_from_games(names, records, anchor="gamma")
    assert by_gamma["gamma"] == 0.0 and by_gamma.sd[2] == 0.0
    centred = elo_from_games(names, records, anchor=None)
    assert centred.anchor is None
    assert centred.ratings.mean() == pytest.approx(0.0, abs=1e-9)
    for other in (by_gamma, centred):
        diff = other.ratings - by_default.ratings
        assert np.allclose(diff, diff[0], atol=1e-6)
    assert not np.allclose(by_gamma.ratings, by_default.ratings)
    # Uncertainty of a difference does not depend on the anchor.
    assert by_default.sd[2] == pytest.approx(by_gamma.sd[1], rel=1e-6)
    # No "random" player: the first player is the anchor.
    first = elo_from_games(["p", "q"], _records(0, 1, 3, 0, 7))
    assert first.anchor == "p" and first["p"] == 0.0 and first["q"] > 0


def test_swapping_players_mirrors_ratings():
    records = np.array(_records(0, 1, 30, 5, 10) + _records(2, 1, 40, 0, 20) + _records(0, 2, 12, 6, 14))
    names = ["a", "b", "c"]
    r = elo_from_games(names, records, anchor=None)
    swapped = records[:, [1, 0, 2]]  # each game now credited to the other player
    m = elo_from_games(names, swapped, anchor=None)
    assert np.allclose(m.ratings, -r.ratings, atol=1e-6)
    assert np.allclose(m.sd, r.sd, rtol=1e-6)
    # Recording the same games from the other side changes nothing.
    same = np.column_stack([records[:, 1], records[:, 0], 1 - records[:, 2]])
    assert np.allclose(elo_from_games(names, same, anchor=None).ratings, r.ratings, atol=1e-6)


def test_all_draws_give_equal_ratings():
    records = _records(0, 1, 0, 20) + _records(1, 2, 0, 20) + _records(2, 0, 0, 20)
    r = elo_from_games(["random", "b", "c"], records)
    assert np.allclose(r.ratings, 0.0, atol=1e-8)
    assert np.all(r.sd[1:] > 0)


def test_perfect_record_is_finite_and_top():
    records = _records(0, 1, 20) + _records(0, 2, 20) + _records(1, 2, 10, 0, 10)
    r = elo_from_games(["champ", "random", "c"], records)
    assert np.all(np.isfinite(r.ratings)) and np.all(np.isfinite(r.sd))
    assert r["champ"] > r["random"] + 300 and r["champ"] > r["c"] + 300
    # A stronger prior pulls the perfect record in.
    assert elo_from_games(["champ", "random", "c"], records, prior_sigma=200)["champ"] < r["champ"]
    with pytest.raises(ValueError, match="infinite without a prior"):
        elo_from_games(["champ", "random", "c"], records, prior_sigma=None)


def test_more_games_narrower_intervals():
    few = elo_from_games(["random", "a"], _records(1, 0, 60, 0, 40))
    many = elo_from_games(["random", "a"], _records(1, 0, 600, 0, 400))
    assert many["a"] == pytest.approx(few["a"], abs=1.0)
    assert (many.upper - many.lower)[1] < (few.upper - few.lower)[1]
    assert few.sd[1] / many.sd[1] == pytest.approx(math.sqrt(10), rel=0.02)


def test_matrix_and_games_agree():
    names = ["random", "b", "c"]
    records = _records(0, 1, 3, 2, 5) + _records(2, 1, 7, 1, 2) + _records(0, 2, 4, 4, 4)
    points = np.zeros((3, 3))
    games = np.zeros((3, 3))
    for i, j, s in records:
        games[i, j] += 1
        games[j, i] += 1
        points[i, j] += s
        points[j, i] += 1 - s
    a = elo_from_games(names, records)
    b = elo_from_matrix(names, points, games)
    assert np.allclose(a.ratings, b.ratings) and np.allclose(a.sd, b.sd)
    # Names work in records too.
    c = elo_from_games(names, [(names[i], names[j], s) for i, j, s in records])
    assert np.allclose(a.ratings, c.ratings)


def test_table_and_dict():
    records = _records(2, 0, 30, 0, 2) + _records(1, 0, 15, 0, 15) + _records(2, 1, 25, 0, 5)
    r = elo_from_games(["random", "weak", "strong"], records)
    assert isinstance(r, Ratings)
    lines = r.table().splitlines()
    assert lines[0].startswith("| rank | player | Elo | 95% CI")
    body = lines[2:]
    assert len(body) == 3
    assert "| strong |" in body[0]
    assert sum("random (anchor)" in line for line in body) == 1
    order = [r.names[k] for k in r.order()]
    assert [line.split("|")[2].strip().removesuffix(" (anchor)") for line in body] == order
    d = json.loads(json.dumps(r.to_dict()))
    assert d["anchor"] == "random"
    assert [p["name"] for p in d["players"]] == order
    ratings = [p["rating"] for p in d["players"]]
    assert ratings == sorted(ratings, reverse=True)
    top = d["players"][0]
    assert top["lower"] < top["rating"] < top["upper"] and top["games"] == 62


@pytest.mark.parametrize(
    ("names", "records", "kwargs", "match"),
    [
        (["a", "b"], [(0, 2, 1)], {}, "unknown player index 2"),
        (["a", "b"], [(-1, 0, 1)], {}, "unknown player index -1"),
        (["a", "b"], np.array([[0, 5, 1.0]]), {}, "unknown player index 5"),
        (["a", "b"], [(0, "zed", 1)], {}, "unknown player name 'zed'"),
        (["a", "b"], [(0, 1, 0.3)], {}, "score must be 0, 0.5 or 1, got 0.3"),
        (["a", "b"], np.array([[0, 1, 2.0]]), {}, "score must be 0, 0.5 or 1"),
        (["a", "b"], [(1, 1, 1)], {}, "cannot play itself"),
        (["a", "b"], [(0, 1, 1)], {"anchor": "nobody"}, "anchor 'nobody' is not among the players"),
        (["a", "b", "idle"], [(0, 1, 1)], {}, r"no games.*\['idle'\]"),
        (["a", "a"], [(0, 1, 1)], {}, "duplicate player names"),
        (["a", "b"], [], {}, "no game records"),
        (["a", "b"], [(0, 1, 1)], {"prior_sigma": -5}, "prior_sigma must be a positive"),
    ],
)
def test_bad_game_inputs(names, records, kwargs, match):
    with pytest.raises(ValueError, match=match):
        elo_from_games(names, records, **kwargs)


@pytest.mark.parametrize(
    ("points", "games", "match"),
    [
        ([[0, 1], [1, 0]], [[0, -2], [-2, 0]], r"games\[0, 1\] = -2 is negative"),
        ([[0, 1], [1, 0]], [[0, 2], [3, 0]], "games must be symmetric"),
        ([[0, 3], [0, 0]], [[0, 2], [2, 0]], "exceeds games"),
        ([[0, 1], [0, 0]], [[0, 2], [2, 0]], "must equal games"),
        ([[0, 1]], [[0, 2], [2, 0]], "must have shape"),
    ],
)
def test_bad_matrix_inputs(points, games, match):
    with pytest.raises(ValueError, match=match):
        elo_from_matrix(["a", "b"], points, games)


def test_score_interval_is_wilson():
    from gomoku_jax.ratings import score_interval

    lo, hi = score_interval(95, 100)
    # Wilson interval by hand: p = .95, n = 100, z = 1.959964
    z, p, n = 1.959964, 0.95, 100
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert lo == pytest.approx(centre - half, abs=1e-6) and hi == pytest.approx(centre + half, abs=1e-6)
    lo, hi = score_interval(10, 10)
    assert hi == 1.0 and 0.65 < lo < 0.75  # 10/10 does not prove 100 %
    assert score_interval(0, 10)[0] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="points must be from 0 to games=10"):
        score_interval(11, 10)
