"""Tests for gomoku_jax.ratings: Elo by maximum likelihood."""

from __future__ import annotations

import json
import math
import re

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
        (["a", "b"], [(0, 1, 1)], {"prior_sigma": -5}, "prior_sigma must be a number of Elo"),
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
    assert score_interval(0, 10)[0] == 0.0 and score_interval(0, 20)[0] == 0.0  # exactly
    assert score_interval(20, 20)[1] == 1.0 and score_interval(0, 10)[1] < 0.35
    with pytest.raises(ValueError, match="points must be from 0 to games=10"):
        score_interval(11, 10)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_iter": 0}, "max_iter must be a positive integer, got 0"),
        ({"max_iter": -5}, "max_iter must be a positive integer, got -5"),
        ({"max_iter": 2.5}, "max_iter must be a positive integer, got 2.5"),
        ({"tol": float("nan")}, "tol must be a positive number, got nan"),
        ({"tol": -1}, "tol must be a positive number, got -1"),
        ({"prior_sigma": "1000"}, "prior_sigma must be a number of Elo points of at least"),
        ({"prior_sigma": 1e-200}, r"at least 0.001 \(a smaller prior pins every rating to 0\)"),
    ],
)
def test_bad_fit_settings_are_refused_before_fitting(kwargs, match):
    records = _records(0, 1, 3, 0, 2)
    with pytest.raises(ValueError, match=match):
        elo_from_games(["a", "b"], records, **kwargs)
    with pytest.raises(ValueError, match=match):  # before the records are read
        elo_from_games(["a", "b"], [("a", "nobody", 1)], **kwargs)


def test_numpy_prior_sigma_is_a_number():
    records = _records(0, 1, 3, 1, 2)
    plain = elo_from_games(["a", "b"], records, prior_sigma=1000)
    for sigma in (np.float32(1000), np.int64(1000), np.float64(1000)):
        r = elo_from_games(["a", "b"], records, prior_sigma=sigma)
        assert np.allclose(r.ratings, plain.ratings) and r.prior_sigma == 1000.0


@pytest.mark.parametrize("sigma", [1e15, 1e300])
def test_a_prior_too_weak_for_a_perfect_record_is_a_clear_error(sigma):
    # Before: "did not converge" (1e15) or numpy's LinAlgError (1e300).
    with pytest.raises(ValueError, match=re.escape(f"prior_sigma={sigma:g} is too weak to keep "
                                                   "the ratings finite") +
                       r".*a smaller prior_sigma.*prior_sigma=None"):
        elo_from_games(["a", "b"], _records(0, 1, 5), prior_sigma=sigma)
    # With both players scoring, a huge prior is no prior.
    mixed = elo_from_games(["a", "b"], _records(0, 1, 3, 0, 1), prior_sigma=sigma)
    exact = elo_from_games(["a", "b"], _records(0, 1, 3, 0, 1), prior_sigma=None)
    assert mixed["b"] == pytest.approx(exact["b"], abs=1e-6)


class _Game:  # something with players and a result, but not an (i, j, score) triple
    black, white, winner = "a", "b", 0


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([_Game(), _Game()], r"record 0: expected a triple \(i, j, score\), got a _Game"),
        ((0, 1, 1), r"record 0: expected a triple \(i, j, score\), got 0; records is a list"),
        (["ab1"], r"record 0: expected a triple \(i, j, score\), got 'ab1'"),
        (5, r"records must be a list of \(i, j, score\) triples, got 5"),
    ],
)
def test_records_that_are_not_triples(records, match):
    with pytest.raises(ValueError, match=match):
        elo_from_games(["a", "b"], records)


def test_names_must_be_ordered():
    # A set's order is its hash order: records by index would go to the wrong players.
    with pytest.raises(ValueError, match="names must be an ordered sequence .*not a set"):
        elo_from_games({"a", "b"}, [(0, 1, 1), (1, 0, 1)])
    with pytest.raises(ValueError, match="names must be a sequence of player names, got 3"):
        elo_from_games(3, [(0, 1, 1)])


def test_ratings_lookup_names_the_players():
    r = elo_from_games(["a", "b"], _records(0, 1, 3, 0, 2))
    assert r["a"] == 0.0
    with pytest.raises(ValueError, match=r"unknown player name 'c'; players are \['a', 'b'\]"):
        r["c"]
    with pytest.raises(TypeError, match=r"looked up by player name, got 0; players are"):
        r[0]


def test_table_digits_are_checked():
    r = elo_from_games(["a", "b"], _records(0, 1, 3, 0, 2))
    assert "| 2 | b | -68.71 | [-375.40, 237.97] |" in r.table(digits=2)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match=f"digits must be a non-negative integer, got {bad!r}"):
            r.table(digits=bad)


def test_score_interval_checks_its_types():
    from gomoku_jax.ratings import score_interval

    assert score_interval(np.float64(3), np.int64(4)) == score_interval(3, 4)
    for bad in ("3", None, True):
        with pytest.raises(ValueError, match=f"points must be a number, got {bad!r}"):
            score_interval(bad, 4)
    with pytest.raises(ValueError, match="confidence must be in"):
        score_interval(3, 4, "0.9")


def test_perfect_and_zero_records_are_flagged_as_set_by_the_prior():
    names = ["random", "b", "c"]
    records = _records(1, 0, 10) + _records(2, 0, 10) + _records(1, 2, 6, 2, 2)
    r = elo_from_games(names, records)  # random lost every game and is the anchor
    assert r.unmeasured() == {"random": "all losses"}
    note = r.note()
    assert note.startswith("random lost every game, so its maximum-likelihood rating is minus "
                           "infinity: the prior (sd 1000 Elo), not the games, bounds its rating")
    assert "As random is the anchor, every rating here, and its interval, is bounded" in note
    assert "| random (anchor, all losses) |" in r.table()
    d = r.to_dict()
    assert d["unmeasured"] == {"random": "all losses"} and d["note"] == note
    # Measured from b the games set c, but not random, whose rating the prior still sets.
    by_b = elo_from_games(names, records, anchor="b")
    assert by_b.unmeasured() == {"random": "all losses"}
    assert "anchor" not in by_b.note() and "| random (all losses) |" in by_b.table()
    # The rating from random moves with the prior; the difference b - c hardly does.
    wide = elo_from_games(names, records, prior_sigma=2000)
    assert wide["b"] - r["b"] > 150
    assert (wide["b"] - wide["c"]) - (r["b"] - r["c"]) == pytest.approx(0, abs=10)
    # A second unmeasured player beside the anchor: its differences are the prior's too.
    top = elo_from_games(names + ["d"], records + _records(3, 1, 10) + _records(3, 2, 10))
    assert top.unmeasured() == {"random": "all losses", "d": "all wins"}
    assert top.note().endswith("depend little on it, but for those of d, which the prior "
                               "sets as well.")
    wider = elo_from_games(names + ["d"], records + _records(3, 1, 10) + _records(3, 2, 10),
                           prior_sigma=2000)
    assert (wider["d"] - wider["b"]) - (top["d"] - top["b"]) > 150
    # A perfect record; draws are neither; nobody flagged when every player scored and lost.
    champ = elo_from_games(["champ", "b"], _records(0, 1, 4))
    assert champ.unmeasured() == {"champ": "all wins", "b": "all losses"}
    assert "champ won every game, so its maximum-likelihood rating is plus infinity" in champ.note()
    assert elo_from_games(["a", "b"], _records(0, 1, 3, 1)).unmeasured() == {}  # 3 wins, a draw
    fair = elo_from_games(["a", "b"], _records(0, 1, 3, 1, 1))
    assert fair.unmeasured() == {} and fair.note() == "" and "(anchor)" in fair.table()


def test_prior_pull_quoted_in_the_module_docstring():
    import gomoku_jax.ratings as ratings

    for wins, games, mle, shift in ((15, 20, 190.8, 1.5), (18, 20, 381.7, 6.2),
                                    (19, 20, 511.5, 15.2), (30, 40, 190.8, 0.8),
                                    (38, 40, 511.5, 7.8)):
        records = _records(0, 1, wins, 0, games - wins)
        exact = elo_from_games(["b", "a"], records, anchor="a", prior_sigma=None)["b"]
        pulled = elo_from_games(["b", "a"], records, anchor="a")["b"]
        assert exact == pytest.approx(mle, abs=0.05)
        assert exact - pulled == pytest.approx(shift, abs=0.05)
        assert f"{shift}" in ratings.__doc__
    assert "small fraction of an Elo point" not in ratings.__doc__



def test_groups_that_never_scored_against_each_other_are_named_as_set_by_the_prior():
    """Two players who beat two others in every game, none of them with a perfect record:
    the gap between the pairs has no finite maximum-likelihood value (it follows the
    prior), the differences within each pair do; the note says which is which."""
    names = ["random", "heuristic", "bot", "az"]
    records = (_records(0, 1, 3, 0, 7) + _records(2, 3, 5, 0, 5) + _records(2, 0, 10)
               + _records(2, 1, 10) + _records(3, 0, 10) + _records(3, 1, 10))
    fits = {sd: elo_from_games(names, records, prior_sigma=sd) for sd in (500, 1000, 4000)}
    r = fits[1000]
    assert r.unmeasured() == {}  # nobody won or lost every game ...
    assert r.groups() == [("bot", "az"), ("random", "heuristic")]  # ... yet the games split
    # What the prior sets moves with it; what the games measure hardly does.
    assert fits[4000]["bot"] - fits[500]["bot"] > 500
    assert (fits[4000]["bot"] - fits[4000]["az"]) - (fits[500]["bot"] - fits[500]["az"]) == (
        pytest.approx(0, abs=5))
    note = r.note()
    assert note.startswith("The games split the players into groups, best first: {bot, az}; "
                           "{random, heuristic}. Between two groups one side scored every "
                           "point"), note
    assert "the prior (sd 1000 Elo) sets them" in note
    assert r.to_dict()["groups"] == [["bot", "az"], ["random", "heuristic"]]
    # A chain: a beats b and b beats c in every game, c and a drew: one group of all three.
    assert elo_from_games(["a", "b", "c"], _records(0, 1, 4) + _records(1, 2, 4)
                          + _records(2, 0, 0, 2)).groups() == [("a", "b", "c")]
    # Without the draw, b has neither a perfect nor a zero record, but is a group alone.
    chain = elo_from_games(["a", "b", "c"], _records(0, 1, 4) + _records(1, 2, 4))
    assert chain.unmeasured() == {"a": "all wins", "c": "all losses"}
    assert chain.groups() == [("a",), ("b",), ("c",)]
    # (the note's sentences on a and c cover every gap: no group sentence is needed)
    assert "a won every game" in chain.note() and "but for those of c" in chain.note()
    assert "groups" not in chain.note()
    # One group: no group sentence.
    fair = elo_from_games(["a", "b"], _records(0, 1, 3, 1, 1))
    assert fair.groups() == [("a", "b")] and fair.note() == ""


def test_centred_ratings_with_a_player_the_prior_sets_say_that_all_of_them_move():
    """Centred on the mean of all players, every rating moves with the prior when one of
    them is set by it, and the note says so (not only of that player)."""
    names = ["weak", "heuristic", "bot", "az"]
    records = (_records(1, 2, 4, 0, 6) + _records(2, 3, 5, 0, 5) + _records(1, 3, 3, 0, 7)
               + _records(1, 0, 10) + _records(2, 0, 10) + _records(3, 0, 10))
    narrow, wide = (elo_from_games(names, records, anchor=None, prior_sigma=sd)
                    for sd in (500, 2000))
    assert wide["az"] - narrow["az"] > 50  # it moves ...
    assert "centred on the mean of all players' ratings, every rating here, and its " \
           "interval, moves with the prior too" in narrow.note()
    assert narrow.note().startswith("weak lost every game")
    # ... but not when the ratings are measured from a player the games measure
    by_h = elo_from_games(names, records, anchor="heuristic")
    assert "centred" not in by_h.note() and "anchor" not in by_h.note()
