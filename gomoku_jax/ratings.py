"""Elo ratings by penalised maximum likelihood from game results (pure NumPy).

Used by the arena's round-robin reports.  Two entry points:

* :func:`elo_from_games` takes one record ``(i, j, score)`` per game, where
  ``i`` and ``j`` are player indices (or names) and ``score`` is what player
  ``i`` scored against ``j``: ``1`` win, ``0.5`` draw, ``0`` loss.
* :func:`elo_from_matrix` takes aggregated results: ``points[i, j]`` is the
  points ``i`` scored against ``j`` and ``games[i, j]`` the number of games
  between them (symmetric, so ``points + points.T == games``).

Model
-----
Bradley-Terry on the Elo scale::

    P(i beats j) = 1 / (1 + 10 ** (-(r_i - r_j) / 400))

A draw counts as half a win and half a loss, i.e. it contributes
``0.5 * log P(i beats j) + 0.5 * log P(j beats i)`` to the log-likelihood
(the usual Elo convention; there is no separate draw parameter).

The ratings maximise the log-likelihood penalised by a weak prior (below),
found with damped Newton's method to convergence.  Only rating *differences* are identified, so
one *anchor* player is fixed at 0 (by default ``"random"`` when present, else
the first player); ``anchor=None`` instead centres the ratings on mean 0.

Prior
-----
A player with a perfect (or zero) score has an infinite unregularised MLE.
To keep ratings finite a weak Gaussian prior is put on every pairwise rating
difference, ``r_i - r_j ~ N(0, prior_sigma**2)`` (default 1000 Elo), which is
equivalent to the penalty ``sum_{i<j} (r_i - r_j)**2 / (2 * prior_sigma**2)``.
It is invariant to shifting all ratings, so the choice of anchor only shifts
the result.  Its information per pair, ``(400 / ln 10 / prior_sigma)**2``
(about 0.03 in log-odds units for ``prior_sigma=1000``), equals that of about
0.12 games at even odds (each worth 0.25).  A lopsided game carries less
(``p * (1 - p)``), so the pull grows with the score: between two players with
20 games and the default prior, 15-5 moves from the MLE's 190.8 Elo to 189.3
(1.5 Elo), 18-2 from 381.7 by 6.2 and 19-1 from 511.5 by 15.2; with 40 games,
30-10 by 0.8 and 38-2 by 7.8.  For a perfect or zero record the prior alone
sets the rating (:meth:`Ratings.unmeasured` names such players, and more
generally :meth:`Ratings.groups` splits the players where the games do not measure
the gaps, which the prior then sets), and when such a player is the anchor it sets
every rating measured from it, with its interval: in the recorded 9x9 round robin,
where random lost every game, the final agent's rating from random is 1033, 1380 or
1679 at a prior sd of 500, 1000 or 2000 Elo, while its difference from GomokuBot is
85, 96 or 100.
``prior_sigma=None`` disables it, in which case results whose "scored against"
graph is not strongly connected (someone never lost, never scored, or groups
never met) raise :class:`ValueError` because the MLE does not exist.

Uncertainty
-----------
Standard errors come from the observed Fisher information: the inverse of the
Hessian of the negative log-posterior (log-likelihood plus the prior above)
with the anchor's row and column removed.  The anchor's ``sd`` is 0; with
``anchor=None`` the ``sd`` is that of ``r_i - mean(r)``.  Intervals are
``rating +- z * sd`` with ``z = 1.96`` for the default 95% confidence.

Players without games
---------------------
A player that played no games has no information about its rating, so both
functions raise :class:`ValueError` naming such players; drop them first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

__all__ = [
    "DEFAULT_ANCHOR",
    "DEFAULT_PRIOR_SIGMA",
    "Ratings",
    "elo_from_games",
    "elo_from_matrix",
    "score_interval",
    "win_probability",
]

DEFAULT_ANCHOR = "random"
"""Anchor name used by default; falls back to the first player if absent."""

DEFAULT_PRIOR_SIGMA = 1000.0
"""Default sd (Elo) of the Gaussian prior on each pairwise rating difference."""

_ELO_SCALE = 400.0 / math.log(10.0)  # Elo points per natural-log-odds unit
_VALID_SCORES = (0.0, 0.5, 1.0)


def score_interval(points: float, games: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a match score (wins + draws / 2 out of ``games``).

    The usual interval for a win rate from a modest number of games: it stays inside
    [0, 1] and is sensible at 0 % and 100 %, unlike the normal approximation.
    """
    if isinstance(games, bool) or not isinstance(games, (int, np.integer)) or games < 1:
        raise ValueError(f"score_interval: games must be a positive integer, got {games!r}")
    if not _is_number(points):
        raise ValueError(f"score_interval: points must be a number, got {points!r}")
    if not 0 <= points <= games:
        raise ValueError(f"score_interval: points must be from 0 to games={games}, got {points}")
    if not (_is_number(confidence) and 0 < confidence < 1):
        raise ValueError(f"score_interval: confidence must be in (0, 1), got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p, n = points / games, games
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # With no points or every point the bound is exactly 0 or 1 (rounding leaves 3e-17 or so)
    low = 0.0 if points == 0 else max(0.0, centre - half)
    high = 1.0 if points == games else min(1.0, centre + half)
    return low, high


def win_probability(r_i: Any, r_j: Any) -> Any:
    """Model probability that a player rated ``r_i`` beats one rated ``r_j``."""
    return 1.0 / (1.0 + 10.0 ** (-(np.asarray(r_i) - np.asarray(r_j)) / 400.0))


@dataclass(frozen=True)
class Ratings:
    """Fitted Elo ratings with confidence intervals.

    All arrays are indexed like ``names``.  ``games`` is the number of games
    each player played; ``anchor`` is the name fixed at 0 (``None`` when the
    ratings are centred on mean 0).
    """

    names: tuple[str, ...]
    ratings: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    sd: np.ndarray
    games: np.ndarray
    anchor: str | None
    confidence: float = 0.95
    prior_sigma: float | None = DEFAULT_PRIOR_SIGMA
    points: np.ndarray | None = None  # each player's score (wins + draws / 2)
    # The players split by the games into groups whose gaps the games do not measure
    # (`groups`); None: not known (the whole field is taken as one group).
    group_of: tuple[int, ...] | None = None

    def __getitem__(self, name: str) -> float:
        """Rating of the player called ``name``."""
        if not isinstance(name, str):
            raise TypeError(f"ratings are looked up by player name, got {name!r}; "
                            f"players are {list(self.names)}")
        if name not in self.names:
            raise ValueError(f"unknown player name {name!r}; players are {list(self.names)}")
        return float(self.ratings[self.names.index(name)])

    def unmeasured(self) -> dict[str, str]:
        """Players with a perfect or zero record -> ``"all wins"`` or ``"all losses"`` (a
        draw is neither). Their maximum-likelihood rating is infinite, so the prior, not
        the games, sets theirs, and, when one is the anchor, every rating measured from
        it."""
        if self.points is None:
            return {}
        out = {}
        for name, p, g in zip(self.names, self.points, self.games):
            tol = 1e-9 * max(1.0, float(g))
            if p >= g - tol:
                out[name] = "all wins"
            elif p <= tol:
                out[name] = "all losses"
        return out

    def groups(self) -> list[tuple[str, ...]]:
        """The players in groups, best first (by mean rating), such that the games
        measure the rating differences within a group but not between two groups: between
        any two groups one side scored every point of the games played, or none were
        played (the strongly connected parts of the graph "scored against"). Their
        maximum-likelihood gaps are infinite, so the prior sets them. One group when the
        games measure every difference; a player who won or lost every game is a group
        of its own."""
        of = self.group_of if self.group_of is not None else (0,) * len(self.names)
        members: dict[int, list[int]] = {}
        for k, g in enumerate(of):
            members.setdefault(g, []).append(k)
        ranked = sorted(members.values(), key=lambda ks: -float(np.mean(self.ratings[ks])))
        return [tuple(self.names[k] for k in ks) for ks in ranked]

    def note(self) -> str:
        """Sentences on the ratings that the prior sets rather than the games (see
        `unmeasured` and `groups`); empty when there are none."""
        flagged, groups = self.unmeasured(), self.groups()
        parts = [
            f"{name} {'won' if record == 'all wins' else 'lost'} every game, so its "
            f"maximum-likelihood rating is {'plus' if record == 'all wins' else 'minus'} "
            f"infinity: the prior (sd {self.prior_sigma:g} Elo), not the games, bounds its "
            "rating and interval here."
            for name, record in flagged.items()
        ]
        # groups that are more than one player of a perfect or zero record
        if sum(not (len(g) == 1 and g[0] in flagged) for g in groups) > 1:
            shown = "; ".join("{" + ", ".join(g) + "}" for g in groups)
            parts.append(
                f"The games split the players into groups, best first: {shown}. Between two "
                "groups one side scored every point of the games played (or none were "
                "played), so the maximum-likelihood gaps between groups are infinite: the "
                f"prior (sd {self.prior_sigma:g} Elo) sets them, and every rating measured "
                "across them; the games measure the differences within a group.")
        if self.anchor is None and len(groups) > 1:
            parts.append("As the ratings are centred on the mean of all players' ratings, "
                         "every rating here, and its interval, moves with the prior too; the "
                         "differences the games measure depend little on it.")
        elif self.anchor in flagged:
            others = [name for name in flagged if name != self.anchor]
            parts.append(
                f"As {self.anchor} is the anchor, every rating here, and its interval, is "
                "bounded by the prior too; the differences between the other players depend "
                "little on it" + (f", but for those of {', '.join(others)}, which the prior "
                                  "sets as well." if others else "."))
        return " ".join(parts)

    def order(self) -> np.ndarray:
        """Player indices sorted by rating, best first (ties keep input order)."""
        return np.argsort(-self.ratings, kind="stable")

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict: metadata plus one entry per player, best first."""
        return {
            "anchor": self.anchor,
            "confidence": self.confidence,
            "prior_sigma": self.prior_sigma,
            "unmeasured": self.unmeasured(),
            "groups": [list(g) for g in self.groups()],
            "note": self.note(),
            "players": [
                {
                    "name": self.names[k],
                    "rating": float(self.ratings[k]),
                    "lower": float(self.lower[k]),
                    "upper": float(self.upper[k]),
                    "sd": float(self.sd[k]),
                    "games": int(self.games[k]),
                }
                for k in self.order()
            ],
        }

    def table(self, digits: int = 0) -> str:
        """Markdown table of the ratings, sorted best first; the anchor and the players of
        `unmeasured` are marked by their names."""
        if isinstance(digits, bool) or not isinstance(digits, (int, np.integer)) or digits < 0:
            raise ValueError(f"digits must be a non-negative integer, got {digits!r}")
        pct = f"{100 * self.confidence:g}%"
        flagged = self.unmeasured()

        def f(x):  # rounded, with -0 shown as 0
            return f"{round(float(x), digits) + 0.0:.{digits}f}"

        lines = [
            f"| rank | player | Elo | {pct} CI | ± | games |",
            "|---:|:---|---:|:---:|---:|---:|",
        ]
        for rank, k in enumerate(self.order(), start=1):
            name = self.names[k]
            tags = (["anchor"] if name == self.anchor else []) + (
                [flagged[name]] if name in flagged else [])
            name += f" ({', '.join(tags)})" if tags else ""
            lines.append(
                f"| {rank} | {name} | {f(self.ratings[k])} | "
                f"[{f(self.lower[k])}, {f(self.upper[k])}] | "
                f"{f(self.upper[k] - self.ratings[k])} | {int(self.games[k])} |"
            )
        return "\n".join(lines)


def elo_from_games(
    names: Sequence[str],
    records: Iterable[Sequence[Any]] | np.ndarray,
    anchor: str | None = DEFAULT_ANCHOR,
    *,
    prior_sigma: float | None = DEFAULT_PRIOR_SIGMA,
    confidence: float = 0.95,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> Ratings:
    """Fit Elo ratings from per-game records ``(i, j, score)``.

    ``i`` and ``j`` are indices into ``names`` (or the names themselves);
    ``score`` is player ``i``'s result against ``j``: 1, 0.5 or 0.  See the
    module docstring for the model, prior, anchor and intervals.
    """
    names = _check_names(names)
    _check_settings(prior_sigma, confidence, tol, max_iter)
    anchor_idx = _resolve_anchor(names, anchor)
    i, j, score = _parse_records(names, records)
    n = len(names)
    games = np.zeros((n, n))
    points = np.zeros((n, n))
    np.add.at(games, (i, j), 1.0)
    np.add.at(games, (j, i), 1.0)
    np.add.at(points, (i, j), score)
    np.add.at(points, (j, i), 1.0 - score)
    return _fit(names, points, games, anchor_idx, prior_sigma, confidence, tol, max_iter)


def elo_from_matrix(
    names: Sequence[str],
    points: Any,
    games: Any,
    anchor: str | None = DEFAULT_ANCHOR,
    *,
    prior_sigma: float | None = DEFAULT_PRIOR_SIGMA,
    confidence: float = 0.95,
    tol: float = 1e-10,
    max_iter: int = 100,
) -> Ratings:
    """Fit Elo ratings from aggregated results.

    ``points[i, j]`` is the total score of ``i`` against ``j`` (draws count
    0.5) and ``games[i, j]`` the number of games between ``i`` and ``j``.
    ``games`` must be symmetric with a zero diagonal, ``0 <= points <= games``
    and ``points + points.T == games``.
    """
    names = _check_names(names)
    _check_settings(prior_sigma, confidence, tol, max_iter)
    anchor_idx = _resolve_anchor(names, anchor)
    points, games = _check_matrices(names, points, games)
    return _fit(names, points, games, anchor_idx, prior_sigma, confidence, tol, max_iter)


# ---------------------------------------------------------------------------
# validation


def _is_number(x: Any) -> bool:
    """A real number: int or float, NumPy's included, not a bool."""
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _check_settings(prior_sigma: Any, confidence: Any, tol: Any, max_iter: Any) -> None:
    if prior_sigma is not None and not (_is_number(prior_sigma) and prior_sigma >= 1e-3):
        raise ValueError(f"prior_sigma must be a number of Elo points of at least 0.001 (a "
                         f"smaller prior pins every rating to 0) or None, got {prior_sigma!r}")
    if not (_is_number(confidence) and 0 < confidence < 1):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if not (_is_number(tol) and 0 < tol < math.inf):
        raise ValueError(f"tol must be a positive number, got {tol!r}")
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")


def _check_names(names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise ValueError("names must be a sequence of player names, not a single string")
    if isinstance(names, (set, frozenset)):
        raise ValueError(f"names must be an ordered sequence (a list or tuple), not a set: "
                         f"records refer to players by position, got {names!r}")
    try:
        names = tuple(names)
    except TypeError:
        raise ValueError(f"names must be a sequence of player names, got {names!r}") from None
    if not names:
        raise ValueError("need at least one player")
    bad = [x for x in names if not isinstance(x, str)]
    if bad:
        raise ValueError(f"player names must be strings, got {bad!r}")
    dupes = sorted({x for x in names if names.count(x) > 1})
    if dupes:
        raise ValueError(f"duplicate player names: {dupes}")
    return names


def _player_index(names: tuple[str, ...], who: Any, where: str) -> int:
    if isinstance(who, str):
        if who not in names:
            raise ValueError(f"{where}: unknown player name {who!r}; players are {list(names)}")
        return names.index(who)
    numeric = isinstance(who, (int, np.integer, float, np.floating))
    if isinstance(who, (bool, np.bool_)) or not numeric:
        raise ValueError(f"{where}: player must be an index or a name, got {who!r}")
    if not math.isfinite(who) or who != int(who):
        raise ValueError(f"{where}: player index must be an integer, got {who!r}")
    k = int(who)
    if not 0 <= k < len(names):
        raise ValueError(f"{where}: unknown player index {k}; valid indices are 0..{len(names) - 1}")
    return k


def _parse_records(
    names: tuple[str, ...], records: Iterable[Sequence[Any]] | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if isinstance(records, np.ndarray) and records.dtype.kind in "iuf":
        return _parse_record_array(names, records)
    try:
        rows = list(records)
    except TypeError:
        raise ValueError(f"records must be a list of (i, j, score) triples, got {records!r}") from None
    if len(rows) == 0:
        raise ValueError("no game records given")
    i_idx, j_idx, scores = [], [], []
    for g, row in enumerate(rows):
        where = f"record {g}"
        try:
            if isinstance(row, str):
                raise TypeError
            row = tuple(row)
        except TypeError:
            got = repr(row) if _is_number(row) or isinstance(row, str) else f"a {type(row).__name__}"
            raise ValueError(f"{where}: expected a triple (i, j, score), got {got}; records is "
                             "a list of such triples, e.g. [(0, 1, 1.0)]") from None
        if len(row) != 3:
            raise ValueError(f"{where}: expected (i, j, score), got {tuple(row)!r}")
        a = _player_index(names, row[0], where)
        b = _player_index(names, row[1], where)
        if a == b:
            raise ValueError(f"{where}: player {names[a]!r} cannot play itself")
        try:
            s = float(row[2])
        except (TypeError, ValueError):
            raise ValueError(f"{where}: score must be 0, 0.5 or 1, got {row[2]!r}") from None
        if s not in _VALID_SCORES:
            raise ValueError(f"{where}: score must be 0, 0.5 or 1, got {row[2]!r}")
        i_idx.append(a)
        j_idx.append(b)
        scores.append(s)
    return np.array(i_idx, dtype=int), np.array(j_idx, dtype=int), np.array(scores)


def _parse_record_array(names: tuple[str, ...], records: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised :func:`_parse_records` for a numeric ``(m, 3)`` array."""
    if records.ndim != 2 or records.shape[1] != 3:
        raise ValueError(f"records array must have shape (m, 3) of (i, j, score), got {records.shape}")
    if records.shape[0] == 0:
        raise ValueError("no game records given")
    n = len(names)
    ij = records[:, :2].astype(float)
    bad = ~np.isfinite(ij) | (ij != np.round(ij)) | (ij < 0) | (ij >= n)
    if bad.any():
        g, c = np.argwhere(bad)[0]
        raise ValueError(f"record {g}: unknown player index {ij[g, c]:g}; valid indices are 0..{n - 1}")
    i, j = ij[:, 0].astype(int), ij[:, 1].astype(int)
    if np.any(i == j):
        g = int(np.flatnonzero(i == j)[0])
        raise ValueError(f"record {g}: player {names[i[g]]!r} cannot play itself")
    score = records[:, 2].astype(float)
    bad = ~np.isin(score, _VALID_SCORES)
    if bad.any():
        g = int(np.flatnonzero(bad)[0])
        raise ValueError(f"record {g}: score must be 0, 0.5 or 1, got {score[g]:g}")
    return i, j, score


def _check_matrices(names: tuple[str, ...], points: Any, games: Any) -> tuple[np.ndarray, np.ndarray]:
    n = len(names)
    points = np.asarray(points, dtype=float)
    games = np.asarray(games, dtype=float)
    for label, m in (("points", points), ("games", games)):
        if m.shape != (n, n):
            raise ValueError(f"{label} must have shape ({n}, {n}) for {n} players, got {m.shape}")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"{label} contains non-finite values")
        if np.any(m < 0):
            i, j = np.argwhere(m < 0)[0]
            raise ValueError(f"{label}[{i}, {j}] = {m[i, j]:g} is negative ({names[i]!r} vs {names[j]!r})")
        if np.any(np.diag(m) != 0):
            k = int(np.flatnonzero(np.diag(m))[0])
            raise ValueError(f"{label}[{k}, {k}] must be 0: player {names[k]!r} cannot play itself")
    atol = 1e-9 * max(1.0, float(games.max()))
    if not np.allclose(games, games.T, rtol=0.0, atol=atol):
        i, j = np.argwhere(~np.isclose(games, games.T, rtol=0.0, atol=atol))[0]
        raise ValueError(
            f"games must be symmetric: games[{i}, {j}] = {games[i, j]:g} "
            f"but games[{j}, {i}] = {games[j, i]:g}"
        )
    if np.any(points > games + atol):
        i, j = np.argwhere(points > games + atol)[0]
        raise ValueError(f"points[{i}, {j}] = {points[i, j]:g} exceeds games[{i}, {j}] = {games[i, j]:g}")
    bad = ~np.isclose(points + points.T, games, rtol=0.0, atol=atol)
    if np.any(bad):
        i, j = np.argwhere(bad)[0]
        raise ValueError(
            f"points[{i}, {j}] + points[{j}, {i}] = {points[i, j] + points[j, i]:g} "
            f"must equal games[{i}, {j}] = {games[i, j]:g}"
        )
    return points, games


def _resolve_anchor(names: tuple[str, ...], anchor: str | None) -> int | None:
    """Index of the anchor (``None``: centred); the default name falls back to player 0."""
    if anchor is None:
        return None
    if not isinstance(anchor, str):
        raise ValueError(f"anchor must be a player name or None, got {anchor!r}")
    if anchor in names:
        return names.index(anchor)
    if anchor == DEFAULT_ANCHOR:
        return 0
    raise ValueError(f"anchor {anchor!r} is not among the players {list(names)}")


def _components(beats: np.ndarray) -> tuple[int, ...]:
    """Each player's strongly connected part of the 'scored against' graph ``beats``
    (``beats[i, j]``: ``i`` scored against ``j``), numbered by its first player."""
    n = beats.shape[0]
    reach = np.eye(n, dtype=bool) | beats
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):  # transitive closure
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    both = reach & reach.T
    return tuple(int(np.argmax(both[k])) for k in range(n))


# ---------------------------------------------------------------------------
# fitting (natural log-odds units internally: s = r / _ELO_SCALE)


def _objective(s: np.ndarray, points: np.ndarray, prec: float) -> float:
    d = s[:, None] - s[None, :]
    nll = float(np.sum(points * np.logaddexp(0.0, -d)))
    return nll + 0.25 * prec * float(np.sum(d * d))


def _grad_hess(
    s: np.ndarray, points: np.ndarray, games: np.ndarray, prec: float
) -> tuple[np.ndarray, np.ndarray]:
    n = s.size
    d = s[:, None] - s[None, :]
    p = 0.5 * (1.0 + np.tanh(0.5 * d))  # logistic(d), overflow-free
    grad = -(points - games * p).sum(axis=1) + prec * (n * s - s.sum())
    w = games * p * (1.0 - p)
    hess = np.diag(w.sum(axis=1)) - w + prec * (n * np.eye(n) - 1.0)
    return grad, hess


def _fit(
    names: tuple[str, ...],
    points: np.ndarray,
    games: np.ndarray,
    anchor_idx: int | None,
    prior_sigma: float | None,
    confidence: float,
    tol: float,
    max_iter: int,
) -> Ratings:
    n = len(names)
    played = games.sum(axis=1)
    idle = [names[k] for k in range(n) if played[k] == 0]
    if idle:
        raise ValueError(f"players with no games have no defined rating: {idle}; remove them first")
    unprior = prior_sigma is None or prior_sigma == math.inf
    prec = 0.0 if unprior else (_ELO_SCALE / float(prior_sigma)) ** 2
    group_of = _components(points > 0)
    # whether every player can reach every other along 'scored against' edges
    connected = len(set(group_of)) == 1
    if unprior and not connected:
        raise ValueError(
            "the maximum-likelihood ratings are infinite without a prior: some group of "
            "players never scored against (or never lost to) the rest, e.g. a perfect "
            "record; pass a finite prior_sigma"
        )
    try:
        s, cov = _newton(n, points, games, prec, anchor_idx, tol, max_iter)
    except np.linalg.LinAlgError:
        s = None
    if s is None:
        if not unprior and not connected:
            raise ValueError(
                f"prior_sigma={float(prior_sigma):g} is too weak to keep the ratings finite in "
                "floating point: some player's rating is set by the prior alone (e.g. a "
                f"perfect or zero record); pass a smaller prior_sigma (the default is "
                f"{DEFAULT_PRIOR_SIGMA:g}), or prior_sigma=None to refuse such results"
            )
        raise RuntimeError(f"Elo fit did not converge in {max_iter} Newton iterations")
    if anchor_idx is None:
        s = s - s.mean()
        centre = np.eye(n) - 1.0 / n
        cov = centre @ cov @ centre
    ratings = s * _ELO_SCALE
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None)) * _ELO_SCALE
    if anchor_idx is not None:
        ratings[anchor_idx] = 0.0
        sd[anchor_idx] = 0.0
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    return Ratings(
        names=names,
        ratings=ratings,
        lower=ratings - z * sd,
        upper=ratings + z * sd,
        sd=sd,
        games=np.rint(played).astype(int),
        anchor=None if anchor_idx is None else names[anchor_idx],
        confidence=float(confidence),
        prior_sigma=None if unprior else float(prior_sigma),
        points=points.sum(axis=1),
        group_of=group_of,
    )


def _newton(
    n: int, points: np.ndarray, games: np.ndarray, prec: float, anchor_idx: int | None,
    tol: float, max_iter: int,
) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """The penalised MLE (log-odds units, player ``ref`` at 0) and its covariance; Nones
    when it does not converge to finite values."""
    # Fit with player `ref` pinned at 0; the objective is shift invariant.
    ref = 0 if anchor_idx is None else anchor_idx
    free = np.array([k for k in range(n) if k != ref], dtype=int)
    s = np.zeros(n)
    if free.size:
        f_old = _objective(s, points, prec)
        for _ in range(max_iter):
            grad, hess = _grad_hess(s, points, games, prec)
            step = np.linalg.solve(hess[np.ix_(free, free)], -grad[free])
            if not np.all(np.isfinite(step)):
                return None, None
            t = 1.0  # backtracking line search (Armijo) keeps Newton monotone
            slope = float(grad[free] @ step)
            while True:
                trial = s.copy()
                trial[free] += t * step
                f_new = _objective(trial, points, prec)
                if f_new <= f_old + 1e-4 * t * slope or t < 1e-10:
                    break
                t *= 0.5
            s, f_old = trial, f_new
            if np.max(np.abs(t * step)) < tol:
                break
        else:
            return None, None

    _, hess = _grad_hess(s, points, games, prec)
    cov = np.zeros((n, n))
    if free.size:
        cov[np.ix_(free, free)] = np.linalg.inv(hess[np.ix_(free, free)])
    if not (np.all(np.isfinite(s)) and np.all(np.isfinite(cov))):
        return None, None
    return s, cov
