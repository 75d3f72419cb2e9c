"""Seed 004's Shared MCTS (section 4.2): one heuristic-guided search tree for both players.

A UCT search whose statistics live in one transposition table that both players read and
write and that is kept across moves and games, so what one side learns about a position
is at once what the other side knows about it (a line that wins for black is the same
node white avoids). Tiny boards only (up to 6x6): it is plain NumPy and Python.

* The tree (`SharedTree`) maps the canonical key of a position (`canonical_key`: the
  smallest of its 8 symmetric images, as in section 3.2.2) to its visit count and value
  sum, so symmetric positions share one node and the tree is a DAG. The player to move
  is implied by the stones (black moves first). A move of a position is *explored* when
  the position it leads to is in the table (reached on any path); moves that lead to
  symmetric positions are one child.
* Values: a node's value sum counts each result backed up through it from the view of
  the player to move there: 1 a win, 0.5 a draw, 0 a loss; ``mu = value_sum / visits``.
  This is our reading of "the win-rate from the perspective of the child node's player"
  (eq. 4.2 and Algorithm 12 take ``1 - mu_child`` as the parent's view, which holds when
  the child's player is the one to move at the child, the parent's opponent).
* Move priority (Algorithm 9, `move_priorities`): 20 a move that wins at once, else 18 a
  move on a cell where the opponent would win at once (a block), else 8 a move that
  creates a threat, which we read as: after it the mover has a winning move it did not
  have before (a new cell that would complete a line next move); then the centre scores
  at least 6 and the four corners at least 4 (the max with the tactical score); every
  other move 0. The centre is the middle cell of an odd board, the four middle cells of
  an even one.
* One iteration (`SharedMCTS.search`): from the root, while the position is not over
  and all its moves are explored, go to the child with the highest UCB1 (eq. 4.2)
  ``(1 - mu_child) + c * sqrt(ln N_parent / N_child)`` (ties at random); at a position
  with unexplored moves, expand only the unexplored move of highest priority, small
  random noise in [0, 0.5) breaking ties (Algorithm 10); from the new node play a heavy
  playout (Algorithm 11): each side plays a move of highest priority, ties broken
  uniformly at random (the report's code compares (score, move) pairs, which would
  always take the last such cell), for at most ``max_playout`` (20) moves; a playout
  that stops before the game ends counts as a draw (our reading: the report returns the
  unfinished state's status). The result is backed up to every node on the path.
* The move played (Algorithm 12, `SharedMCTS.best_move`): an immediate win, else a
  block of the opponent's immediate win (several: one at random), else the explored
  move maximising ``1 - mu_child``, plus Gaussian noise of standard deviation
  ``temperature`` when it is positive (ties at random).
* Training (4.2.4, `SharedMCTS.train`): self-play games on the shared tree, each move
  after ``iterations`` search iterations from the current position. Temperature: the
  learner's ``temperature`` (default 0.1, the report's) in the first game, decaying
  linearly to 0 at the middle of the run and 0 for the second half (our schedule; the
  report says only "early high, later 0"). The seats swap colours every game as in the
  report; since both seats search the same tree with the same settings this changes
  only the bookkeeping (results are counted by colour and by seat).
* ``iterations`` defaults to 200 per move: the report's base MCTS uses 2000 (3.2.4) with
  a fresh tree each move; the shared tree keeps every earlier iteration, so a tenth of
  that is plenty on 3x3 (in the tests 20 self-play games at 100 iterations a move are
  enough for the agent to draw every game against the perfect player).
* `SharedMCTS.agent` searches the shared tree at play time too, writing to it as the
  report's player does: games against it change the tree. Its randomness comes from the
  generator the game gives it, so games are reproducible from the same tree and seed.
* `SharedMCTS.save` writes the tree and the game settings as ``.npz`` (no pickle);
  `SharedMCTS.load` refuses a file for another game or a damaged one.

Conventions are those of `gomoku_jax.game`: boards ``[N, N]`` int8 (0 empty, 1 black,
2 white), players 0 black / 1 white, action = ``row * N + col``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import numpy as np

from algorithms.classical import (_check_board, _check_positive_int, _keys, _lines, _Lines,
                                  _padded, _window_counts, _winning_cells, canonical_key,
                                  check_stored_game, load_npz, save_npz)
from gomoku_jax.agents import PythonAgent
from gomoku_jax.game import Gomoku, State

__all__ = ["SharedMCTS", "SharedTree", "move_priorities", "ucb_score", "PRIORITY_WIN",
           "PRIORITY_BLOCK", "PRIORITY_THREAT", "PRIORITY_CENTRE", "PRIORITY_CORNER"]

PRIORITY_WIN, PRIORITY_BLOCK, PRIORITY_THREAT = 20.0, 18.0, 8.0
PRIORITY_CENTRE, PRIORITY_CORNER = 6.0, 4.0
_FORMAT = "seed004-shared-mcts-v1"
_EXPANSION_NOISE = 0.5  # below the smallest gap between two priorities (2)
_CACHE_LIMIT = 200_000  # positions whose move data is kept (cleared when full)


# ---------------------------------------------------------------- priorities


def _wins_batch(lines: _Lines, padded: np.ndarray, player: int) -> np.ndarray:
    """``[..., nn]`` bool: the empty cells where ``player``'s stone completes a win on each
    of the padded flat boards ``[..., nn + 1]`` (the rule's exactness included)."""
    return _winning_cells(lines, padded, player, _window_counts(lines, padded, player)[0])


def _positional(size: int) -> np.ndarray:
    """``[nn]``: the positional floor of each cell (centre 6, corners 4, else 0)."""
    grid = np.zeros((size, size))
    mid = [size // 2] if size % 2 else [size // 2 - 1, size // 2]
    for r in mid:
        for c in mid:
            grid[r, c] = PRIORITY_CENTRE
    for r in (0, size - 1):
        for c in (0, size - 1):
            grid[r, c] = PRIORITY_CORNER
    return grid.reshape(-1)


@dataclasses.dataclass(frozen=True, eq=False)
class _Moves:
    """What the search needs about one position (computed once, then cached)."""

    empty: np.ndarray  # [E] int: the empty cells
    children: np.ndarray  # [E] int64: canonical key of the position after each move
    priority: np.ndarray  # [E] float: Algorithm 9's priority of each move
    wins: np.ndarray  # [E] bool: the move wins at once
    blocks: np.ndarray  # [E] bool: the opponent would win at once on that cell


def _moves(lines: _Lines, padded: np.ndarray, player: int) -> _Moves:
    empty = np.flatnonzero(padded[:-1] == 0)
    nexts = np.repeat(padded[None], len(empty), axis=0)
    nexts[np.arange(len(empty)), empty] = player + 1
    children = _keys(nexts[:, :-1], lines.size)
    now = _wins_batch(lines, padded, player)
    wins = now[empty]
    blocks = _wins_batch(lines, padded, 1 - player)[empty]
    new_wins = _wins_batch(lines, nexts, player) & ~now  # a winning cell it lacked before
    threats = new_wins.any(-1)
    priority = np.where(wins, PRIORITY_WIN, np.where(
        blocks, PRIORITY_BLOCK, np.where(threats, PRIORITY_THREAT, 0.0)))
    priority = np.maximum(priority, _positional(lines.size)[empty])
    return _Moves(empty, children, priority, wins, blocks)


def move_priorities(env: Gomoku, board, player: int | None = None) -> np.ndarray:
    """``[N*N]`` float: Algorithm 9's priority of each move of ``player`` (default: the
    player to move, from the stone counts) on ``board`` ``[N, N]``; -inf on occupied
    cells. See the module docstring for the scores and our reading of a threat."""
    board = _checked_board(env, board, "move_priorities")
    player = _to_move(board) if player is None else _checked_player(player)
    padded = _padded(board)
    moves = _moves(_lines(env.size, env.k, env.rule), padded, player)
    out = np.full(env.num_actions, -np.inf)
    out[moves.empty] = moves.priority
    return out


# ---------------------------------------------------------------- the tree


class SharedTree:
    """The transposition table both players share: canonical key -> visits, value sum
    (results from the view of the player to move at that position)."""

    def __init__(self):
        self.visits: dict[int, int] = {}
        self.value_sums: dict[int, float] = {}

    def __len__(self) -> int:
        return len(self.visits)

    def __contains__(self, key) -> bool:
        return int(key) in self.visits

    def node(self, board) -> tuple[int, float] | None:
        """``(visits, value_sum)`` of ``board``'s node (any of its symmetric images), or
        None when it is not in the tree."""
        key = canonical_key(board)
        return (self.visits[key], self.value_sums[key]) if key in self.visits else None

    def mean(self, key: int) -> float:
        """``mu``: the mean result for the player to move at node ``key``."""
        return self.value_sums[key] / self.visits[key]

    def add(self, key: int, value: float) -> None:
        """One more visit of node ``key`` with result ``value`` (created if new)."""
        self.visits[key] = self.visits.get(key, 0) + 1
        self.value_sums[key] = self.value_sums.get(key, 0.0) + value

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``keys`` int64, ``visits`` int64, ``value_sums`` float64, sorted by key."""
        keys = np.array(sorted(self.visits), np.int64)
        visits = np.array([self.visits[k] for k in keys.tolist()], np.int64)
        sums = np.array([self.value_sums[k] for k in keys.tolist()], np.float64)
        return keys, visits, sums

    def __eq__(self, other) -> bool:
        return (isinstance(other, SharedTree) and self.visits == other.visits
                and self.value_sums == other.value_sums)

    __hash__ = None


def ucb_score(parent_visits: int, child_visits: int, child_mean: float, c: float) -> float:
    """Eq. 4.2: ``(1 - mu_child) + c * sqrt(ln N_parent / N_child)``."""
    return (1.0 - child_mean) + c * math.sqrt(math.log(parent_visits) / child_visits)


# ---------------------------------------------------------------- the learner


class SharedMCTS:
    """Seed 004 section 4.2: heuristic-guided MCTS on one tree shared by both players.

    Args:
      env: the game (default 3x3 tic-tac-toe); boards up to 6x6.
      iterations: search iterations before each move, in training and at play (200).
      c: the exploration constant of UCB1 (1.4, the report's default in 3.2.1).
      temperature: standard deviation of the noise on the final choice in the first
        training game (0.1, decaying to 0; see `train`).
      max_playout: the longest heavy playout in moves (20); one that stops before the
        game ends counts as a draw.
      tree: a `SharedTree` to start from (default a new, empty one).
    """

    def __init__(self, env: Gomoku | None = None, iterations: int = 200, c: float = 1.4,
                 temperature: float = 0.1, max_playout: int = 20,
                 tree: SharedTree | None = None):
        env = Gomoku(3, 3) if env is None else env
        if not isinstance(env, Gomoku):
            raise ValueError(f"SharedMCTS: env must be a Gomoku game, got {env!r}")
        if not 3 <= env.size <= 6:
            raise ValueError(f"SharedMCTS: boards from 3x3 to 6x6, got {env.size}x{env.size}")
        self.env = env
        self.iterations = _positive_int("iterations", iterations)
        self.c = _non_negative("c", c)
        self.temperature = _non_negative("temperature", temperature)
        self.max_playout = _positive_int("max_playout", max_playout)
        if tree is not None and not isinstance(tree, SharedTree):
            raise ValueError(f"SharedMCTS: tree must be a SharedTree, got {type(tree).__name__}")
        self.tree = SharedTree() if tree is None else tree
        self.lines = _lines(env.size, env.k, env.rule)
        self._cache: dict[tuple[bytes, int], _Moves] = {}

    # ------------------------------------------------------------------ positions
    def _moves_of(self, padded: np.ndarray, player: int) -> _Moves:
        key = (padded.tobytes(), player)
        moves = self._cache.get(key)
        if moves is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            moves = self._cache[key] = _moves(self.lines, padded, player)
        return moves

    def _root(self, state_or_board, player, owner: str) -> tuple[np.ndarray, int]:
        if isinstance(state_or_board, State):
            board = _checked_board(self.env, np.asarray(state_or_board.board), owner)
            player = int(state_or_board.current_player) if player is None else player
        else:
            board = _checked_board(self.env, state_or_board, owner)
        implied = _to_move(board)
        if player is not None and _checked_player(player) != implied:
            # the tree's nodes are keyed by the board alone: results backed up for the
            # wrong side would be read by both players
            raise ValueError(f"{owner}: player {player} is not the one to move on this board "
                             f"({'black' if implied == 0 else 'white'}, from its stones)")
        player = implied
        padded = _padded(board)
        if not (padded[:-1] == 0).any() or self._over(padded):
            raise ValueError(f"{owner}: the game on this board is over")
        return padded, player

    def _over(self, padded: np.ndarray) -> bool:
        """Whether either player has a completed line (the board may be any position)."""
        for player in (0, 1):
            full = _window_counts(self.lines, padded, player)[0] == self.lines.k
            if self.lines.rule == "standard":
                stone = player + 1
                full &= (padded[self.lines.before] != stone) & (padded[self.lines.after] != stone)
            if full.any():
                return True
        return False

    # ------------------------------------------------------------------ search
    def search(self, state_or_board, iterations: int | None = None, *,
               rng: np.random.Generator, player: int | None = None) -> int:
        """Run ``iterations`` (default the learner's) iterations from a position (a
        `State` or a board ``[N, N]``, ``player`` to move: default from the stones) on
        the shared tree; returns the root's canonical key."""
        iterations = self.iterations if iterations is None else _positive_int(
            "iterations", iterations)
        padded, player = self._root(state_or_board, player, "SharedMCTS.search")
        root = int(_keys(padded[None, :-1], self.env.size)[0])
        for _ in range(iterations):
            self._iterate(padded, player, root, rng)
        return root

    def _iterate(self, padded: np.ndarray, player: int, root: int,
                 rng: np.random.Generator) -> None:
        tree, c = self.tree, self.c
        board = padded.copy()
        path = [(root, player)]
        winner, finished = None, False
        while True:
            key, to_move = path[-1]
            moves = self._moves_of(board, to_move)
            explored = np.fromiter((int(k) in tree.visits for k in moves.children), bool,
                                   len(moves.children))
            if not explored.all() or key not in tree.visits:
                # Algorithm 10: only the best unexplored move (noise breaks ties).
                todo = np.flatnonzero(~explored)
                if len(todo) == 0:  # the root itself is new: nothing to select yet
                    break
                noisy = moves.priority[todo] + rng.random(len(todo)) * _EXPANSION_NOISE
                i = int(todo[np.argmax(noisy)])
            else:
                parent = tree.visits[key]
                scores = np.array([ucb_score(parent, tree.visits[int(k)], tree.mean(int(k)), c)
                                   for k in moves.children])
                best = np.flatnonzero(scores >= scores.max() - 1e-12)
                i = int(best[rng.integers(len(best))]) if len(best) > 1 else int(best[0])
            board[moves.empty[i]] = to_move + 1
            child = int(moves.children[i])
            path.append((child, 1 - to_move))
            if moves.wins[i]:
                winner, finished = to_move, True
            elif len(moves.empty) == 1:
                finished = True  # the board is full: a draw
            if finished or not explored[i]:
                break
        if not finished:
            winner = self._playout(board, path[-1][1], rng)
        for key, to_move in path:
            tree.add(key, 0.5 if winner is None else float(winner == to_move))

    def _playout(self, padded: np.ndarray, player: int, rng: np.random.Generator):
        """Algorithm 11 on a copy of ``padded``: the winner (0 or 1), or None for a draw
        (a full board, or ``max_playout`` moves without a result)."""
        board = padded.copy()
        for _ in range(self.max_playout):
            moves = self._moves_of(board, player)
            best = np.flatnonzero(moves.priority == moves.priority.max())
            i = int(best[rng.integers(len(best))]) if len(best) > 1 else int(best[0])
            if moves.wins[i]:
                return player
            if len(moves.empty) == 1:
                return None
            board[moves.empty[i]] = player + 1
            player = 1 - player
        return None

    # ------------------------------------------------------------------ the move
    def best_move(self, state_or_board, temperature: float = 0.0, *,
                  rng: np.random.Generator, player: int | None = None) -> int:
        """Algorithm 12 on the tree as it is (no search): take a win, else block one,
        else the explored move with the best ``1 - mu_child`` (+ noise of standard
        deviation ``temperature``); a position with no explored move gets the move of
        highest priority."""
        temperature = _non_negative("temperature", temperature)
        padded, player = self._root(state_or_board, player, "SharedMCTS.best_move")
        moves = self._moves_of(padded, player)
        for forced in (moves.wins, moves.blocks):
            if forced.any():
                cells = moves.empty[forced]
                return int(cells[rng.integers(len(cells))])
        tree = self.tree
        known = [i for i, k in enumerate(moves.children) if int(k) in tree.visits]
        if known:
            values = np.array([1.0 - tree.mean(int(moves.children[i])) for i in known])
            if temperature > 0:
                values = values + rng.normal(0.0, temperature, len(values))
            best = np.flatnonzero(values >= values.max() - 1e-12)
            return int(moves.empty[known[int(best[rng.integers(len(best))])]])
        best = np.flatnonzero(moves.priority == moves.priority.max())
        return int(moves.empty[best[rng.integers(len(best))]])

    # ------------------------------------------------------------------ training
    def train(self, games: int, seed: int = 0) -> dict:
        """Self-play ``games`` games on the shared tree; returns statistics: ``games``,
        ``black_wins``, ``white_wins``, ``draws``, ``first_seat_wins`` /
        ``second_seat_wins`` (the seats swap colours every game), ``mean_length``,
        ``tree_size``, ``seconds``. Game ``g`` (from 0) uses temperature
        ``self.temperature * max(0, 1 - g / (games / 2))``."""
        games = _positive_int("games", games)
        rng = np.random.default_rng(seed)
        nn = self.env.num_actions
        stats = dict(games=games, black_wins=0, white_wins=0, draws=0, first_seat_wins=0,
                     second_seat_wins=0)
        plies = 0
        start = time.perf_counter()
        for g in range(games):
            temperature = self.temperature * max(0.0, 1.0 - g / (games / 2))
            board = np.zeros((self.env.size, self.env.size), np.int8)
            player, winner = 0, None
            for ply in range(nn):
                self.search(board, rng=rng, player=player)
                a = self.best_move(board, temperature, rng=rng, player=player)
                moves = self._moves_of(_padded(board), player)
                won = bool(moves.wins[np.searchsorted(moves.empty, a)])
                board.reshape(-1)[a] = player + 1
                plies += 1
                if won:
                    winner = player
                    break
                player = 1 - player
            if winner is None:
                stats["draws"] += 1
            else:
                stats["black_wins" if winner == 0 else "white_wins"] += 1
                first_seat_black = g % 2 == 0  # the first seat plays black in even games
                seat = "first" if (winner == 0) == first_seat_black else "second"
                stats[f"{seat}_seat_wins"] += 1
        stats["mean_length"] = plies / games
        stats["tree_size"] = len(self.tree)
        stats["seconds"] = time.perf_counter() - start
        return stats

    # ------------------------------------------------------------------ playing
    def agent(self, name: str = "shared-mcts", iterations: int | None = None) -> PythonAgent:
        """A player that runs ``iterations`` (default the learner's) iterations on the
        live shared tree before each move (writing to it) and plays Algorithm 12's move
        at temperature 0; its randomness comes from the game's generator."""
        iterations = self.iterations if iterations is None else _positive_int(
            "iterations", iterations)
        return _SharedMCTSAgent(self, name, iterations)

    # ------------------------------------------------------------------ files
    def save(self, path: str | os.PathLike) -> None:
        """Write the tree and the game settings to ``path`` (``.npz``, no pickle)."""
        keys, visits, sums = self.tree.arrays()
        save_npz(path, keys=keys, visits=visits, value_sums=sums,
                 size=np.int32(self.env.size), k=np.int32(self.env.k),
                 rule=np.str_(self.env.rule), format=np.str_(_FORMAT))

    def load(self, path: str | os.PathLike) -> "SharedMCTS":
        """Replace the tree by the one saved in ``path``; refuses a file for another game
        or a damaged one (a ValueError naming the file and what is wrong)."""
        stored = _read(path)
        check_stored_game(path, stored, self.env, "the tree is")
        limit = 3 ** (self.env.size * self.env.size)
        keys, visits, sums = stored["keys"], stored["visits"], stored["value_sums"]
        if ((keys < 0) | (keys >= limit)).any():
            raise ValueError(f"{path}: damaged tree (a key outside the board's range)")
        tree = SharedTree()
        tree.visits = dict(zip(keys.tolist(), visits.tolist()))
        tree.value_sums = dict(zip(keys.tolist(), sums.tolist()))
        self.tree = tree
        return self

    @classmethod
    def from_file(cls, path: str | os.PathLike, **kwargs) -> "SharedMCTS":
        """A learner for the game stored in ``path``, with its tree."""
        stored = _read(path)
        return cls(Gomoku(stored["size"], stored["k"], stored["rule"]), **kwargs).load(path)


class _SharedMCTSAgent(PythonAgent):
    def __init__(self, learner: SharedMCTS, name: str, iterations: int):
        self.learner, self.name, self.env, self.iterations = learner, name, learner.env, iterations

    def select(self, state: State, rng: np.random.Generator) -> int:
        self.learner.search(state, self.iterations, rng=rng)
        return self.learner.best_move(state, 0.0, rng=rng)


# ---------------------------------------------------------------- checks and files


def _positive_int(name: str, value) -> int:
    _check_positive_int("SharedMCTS", name, value)
    return int(value)


def _non_negative(name: str, value) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value < 0:
        raise ValueError(f"SharedMCTS: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _checked_player(player) -> int:
    if isinstance(player, bool) or player not in (0, 1):
        raise ValueError(f"SharedMCTS: player must be 0 (black) or 1 (white), got {player!r}")
    return int(player)


def _checked_board(env: Gomoku, board, owner: str) -> np.ndarray:
    board = np.asarray(board)
    _check_board(board, env, owner)
    if not np.isin(board, (0, 1, 2)).all():
        raise ValueError(f"{owner}: board cells must be 0 (empty), 1 (black) or 2 (white)")
    return board.astype(np.int8)


def _to_move(board: np.ndarray) -> int:
    """The player to move (black moves first), or a ValueError for stone counts no game
    reaches."""
    blacks, whites = int((board == 1).sum()), int((board == 2).sum())
    if blacks - whites not in (0, 1):
        raise ValueError(f"SharedMCTS: {blacks} black and {whites} white stones: no game "
                         "reaches this board (black moves first, then each in turn)")
    return 0 if blacks == whites else 1


def _read(path) -> dict:
    stored = load_npz(path, ("keys", "visits", "value_sums", "size", "k", "rule", "format"),
                      "SharedMCTS", "a SharedMCTS tree")
    if str(stored["format"]) != _FORMAT:
        raise ValueError(f"{path}: format {str(stored['format'])!r}, this code reads {_FORMAT!r}")
    keys, visits, sums = stored["keys"], stored["visits"], stored["value_sums"]
    if not (keys.ndim == visits.ndim == sums.ndim == 1 and len(keys) == len(visits) == len(sums)):
        raise ValueError(f"{path}: damaged tree (keys, visits and value sums differ in shape)")
    if not (keys.dtype.kind == "i" and visits.dtype.kind == "i" and sums.dtype.kind == "f"):
        raise ValueError(f"{path}: damaged tree (wrong array types)")
    if len(np.unique(keys)) != len(keys):
        raise ValueError(f"{path}: damaged tree (a key stored twice)")
    if (visits < 1).any() or not np.isfinite(sums).all() or (sums < 0).any() or (sums > visits).any():
        raise ValueError(f"{path}: damaged tree (visits must be >= 1 and value sums in "
                         f"[0, visits])")
    return {"keys": keys.astype(np.int64), "visits": visits.astype(np.int64),
            "value_sums": sums.astype(np.float64), "size": int(stored["size"]),
            "k": int(stored["k"]), "rule": str(stored["rule"])}
