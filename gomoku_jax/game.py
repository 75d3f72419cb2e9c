"""The k-in-a-row game: static settings, the `State` pytree and pure `init` / `step`.

Conventions (shared by every module):

* Action index = ``row * size + col``; row 0 is the top row.
* Black moves first. Player ids are colours: 0 = black, 1 = white. On the board,
  0 = empty, 1 = black, 2 = white.
* Rules: ``freestyle`` (k or more in a row wins) and ``standard`` (exactly k; an
  overline does not win). A full board with no winner is a draw.
* Under ``jit`` an illegal action cannot raise: the mover loses at once and the
  state says so (pgx convention). No stone is placed, so ``last_action`` and
  ``move_count`` stay those of the last legal move and the illegal action is recorded
  nowhere. ``Gomoku.play`` is the checked, Python-facing way to make a move.
* Stepping a finished game changes nothing and gives zero rewards. Once a game is
  over, ``legal_action_mask`` is all True (pgx convention, so that masked softmaxes
  never divide by zero) and ``current_player`` stays the player who made the last move
  (or the illegal one), so a finished state's observation is from that player's view:
  mind it when building value targets.

The env object is stateless and hashable; it holds only static settings and the
constant index tables derived from them. Write logic for one game and batch it with
``jax.vmap``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from gomoku_jax import features as _features
from gomoku_jax.config import check_count, check_int, plain_fields

__all__ = [
    "BLACK",
    "BLACK_STONE",
    "DIRECTIONS",
    "EMPTY",
    "RULES",
    "WHITE",
    "WHITE_STONE",
    "GameConfig",
    "Gomoku",
    "IllegalMoveError",
    "State",
    "auto_reset",
    "cell_or_off",
    "check_key",
    "describe_result",
    "game_words",
    "is_winning_run",
    "legal_action_of_rank",
    "random_games",
    "run_through_centre",
    "sample_legal_action",
]

RULES = ("freestyle", "standard")
MIN_SIZE, MAX_SIZE = 3, 19

EMPTY, BLACK_STONE, WHITE_STONE = 0, 1, 2
BLACK, WHITE = 0, 1

# The four line directions as (d_row, d_col): horizontal, vertical, diagonal, anti-diagonal.
DIRECTIONS = ((0, 1), (1, 0), (1, 1), (1, -1))


class IllegalMoveError(ValueError):
    """A move that the rules forbid: off the board, on an occupied cell, or after the end."""


@dataclasses.dataclass(frozen=True)
class GameConfig:
    """Static settings of a k-in-a-row game on a square board.

    Attributes:
      size: board side, 3 to 19.
      k: stones in a row needed to win, 3 to ``size``.
      rule: ``"freestyle"`` (k or more wins) or ``"standard"`` (exactly k wins).
    """

    size: int = 15
    k: int = 5
    rule: str = "freestyle"

    def __post_init__(self):
        plain_fields(self)
        check_int("GameConfig", "size", self.size, MIN_SIZE, MAX_SIZE)
        check_int("GameConfig", "k", self.k, None)  # an integer; its range:
        if not 3 <= self.k <= self.size:  # (too large: the default 5 on a small board)
            why = f" (no more than the board's size {self.size})" if self.k > self.size else ""
            raise ValueError(f"GameConfig.k must be an integer from 3 to {self.size}{why}, "
                             f"got {self.k}")
        if self.rule not in RULES:
            raise ValueError(
                f"GameConfig.rule must be one of {', '.join(RULES)}, got {self.rule!r}"
            )

    @property
    def num_actions(self) -> int:
        return self.size * self.size


@struct.dataclass
class State:
    """One game. Frozen pytree; batch it with ``jax.vmap`` (leading dims ``[B, ...]``).

    The observation is derived on access from the board, the player to move and the
    last move, in the encoding chosen by the env (``observation_spec``), so a training
    loop that never reads it never pays for it.
    """

    board: jax.Array  # [N, N] int8: 0 empty, 1 black, 2 white
    current_player: jax.Array  # [] int32: player to move (0 black, 1 white); the mover once over
    legal_action_mask: jax.Array  # [N*N] bool; all True once the game is over
    rewards: jax.Array  # [2] float32, indexed by player: reward of the last step
    terminated: jax.Array  # [] bool
    truncated: jax.Array  # [] bool (never set by the game itself)
    last_action: jax.Array  # [] int32, -1 before the first move
    move_count: jax.Array  # [] int32: stones on the board
    winner: jax.Array  # [] int32: -1 none or draw, 0 black, 1 white
    observation_spec: _features.ObservationSpec = struct.field(
        pytree_node=False, default=_features.ObservationSpec()
    )

    @property
    def observation(self) -> jax.Array:
        """Planes ``[..., N, N, C]`` float32 from the view of ``current_player``."""
        return _features.observe(self, self.observation_spec)


def _line_table(size: int, reach: int) -> np.ndarray:
    """``[size*size, 4, 2*reach+1]`` int32: cells at offsets -reach..reach from each cell
    along each direction, -1 where the offset falls off the board."""
    n = size
    t = np.arange(-reach, reach + 1)
    rows, cols = np.divmod(np.arange(n * n), n)
    table = np.full((n * n, len(DIRECTIONS), 2 * reach + 1), -1, np.int32)
    for d, (dr, dc) in enumerate(DIRECTIONS):
        rr = rows[:, None] + dr * t[None, :]
        cc = cols[:, None] + dc * t[None, :]
        ok = (rr >= 0) & (rr < n) & (cc >= 0) & (cc < n)
        table[:, d, :] = np.where(ok, rr * n + cc, -1)
    return table


def _trailing_ones(x: jax.Array) -> jax.Array:
    """Number of consecutive set bits from bit 0 of a non-negative int32."""
    return jax.lax.population_count((x ^ (x + 1)) >> 1)


def run_through_centre(line: jax.Array) -> jax.Array:
    """Length of the run of True through the centre of ``[..., 2*reach+1]`` bool lines.

    Each side is packed into an integer (bit j = the cell j+1 steps from the centre)
    and its run counted with a popcount, so every cell is read once: no cell is
    re-read per window, which keeps XLA's fused code small. Counts saturate at the
    line's reach on each side. Returns ``[...]`` int32 (0 where the centre is False).
    """
    width = line.shape[-1]
    reach = (width - 1) // 2
    weights = jnp.asarray(1 << np.arange(reach), jnp.int32)
    after = jnp.sum(line[..., reach + 1 :].astype(jnp.int32) * weights, axis=-1)
    before = jnp.sum(line[..., reach - 1 :: -1].astype(jnp.int32) * weights, axis=-1)
    centre = line[..., reach].astype(jnp.int32)
    return centre * (_trailing_ones(before) + _trailing_ones(after) + 1)


def is_winning_run(run: jax.Array, k: int, rule: str) -> jax.Array:
    """Whether a run length wins: ``>= k`` (freestyle) or ``== k`` (standard)."""
    return run == k if rule == "standard" else run >= k


def _cumsum_small(x: jax.Array) -> jax.Array:
    """Inclusive cumulative sum of a short vector as a masked sum (XLA:CPU's cumsum
    lowers to a slow reduce-window)."""
    n = x.shape[-1]
    lower = np.tril(np.ones((n, n), np.int32))
    return jnp.sum(lower * x[..., None, :], axis=-1)


def legal_action_of_rank(legal_action_mask: jax.Array, bits: jax.Array) -> jax.Array:
    """The legal action at rank ``floor(bits * L / 2**32)`` among the ``L`` legal ones.

    ``bits`` is a uniform uint32, so the result is a uniformly random legal action
    (bias below ``L / 2**32``). The rank is found in two short passes (row totals,
    then within the chosen row), which is much cheaper on CPU than a draw per cell.
    One game: ``[N*N]`` bool and ``[]`` uint32 -> int32 (0 if nothing is legal).
    """
    nn = legal_action_mask.shape[-1]
    n = math.isqrt(nn)
    m = legal_action_mask.reshape(n, n).astype(jnp.int32)
    row_counts = m.sum(axis=1)
    row_cum = _cumsum_small(row_counts)
    total = row_cum[-1].astype(jnp.uint32)
    # floor(bits * total / 2**32) exactly, in 32-bit arithmetic (total < 2**9).
    bits = bits.astype(jnp.uint32)
    high = (bits >> 16) * total + (((bits & 0xFFFF) * total) >> 16)
    rank = (high >> 16).astype(jnp.int32)
    row = jnp.argmax(row_cum > rank)
    rank_in_row = rank - (row_cum[row] - row_counts[row])
    col = jnp.argmax(_cumsum_small(m[row]) > rank_in_row)
    return (row * n + col).astype(jnp.int32)


def check_key(key, what: str) -> None:
    """ValueError unless ``key`` is a JAX random key: a typed key (``jax.random.key``) or
    raw ``uint32 [..., 2]`` key data (``jax.random.PRNGKey``); ``what`` names it. Only
    the dtype and shape are read, so it costs nothing under ``jit``."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and (jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) or (
            dtype == jnp.uint32 and np.shape(key)[-1:] == (2,))):
        return
    raise ValueError(f"{what} must be a JAX random key (jax.random.key(seed)), got "
                     f"{_described(key)}")


def sample_legal_action(key: jax.Array, legal_action_mask: jax.Array) -> jax.Array:
    """A uniformly random legal action for one game (``[N*N]`` bool mask -> int32)."""
    check_key(key, "sample_legal_action: key")
    bits = jax.random.bits(key, (), jnp.uint32)
    return legal_action_of_rank(legal_action_mask, bits)


def game_words(size: int, k: int, rule: str) -> str:
    """A game in words for messages and reports: ``9x9 5 in a row (freestyle)``."""
    return f"{size}x{size} {k} in a row ({rule})"


@dataclasses.dataclass(frozen=True)
class Gomoku:
    """A k-in-a-row environment with pgx's interface: ``init(key)``, ``step(state, action)``.

    Args:
      size, k, rule: the game (see `GameConfig`).
      observation: name of the observation encoding (see `gomoku_jax.features.ENCODINGS`).
      positional_bias: standard deviation (in cells) of seed-001's Gaussian positional
        bias subtracted from the planes, or None for no bias.
    """

    size: int = 15
    k: int = 5
    rule: str = "freestyle"
    observation: str = "stones-colour"
    positional_bias: float | None = None

    def __post_init__(self):
        plain_fields(self)
        GameConfig(self.size, self.k, self.rule)  # validates
        spec = _features.ObservationSpec(self.observation, self.positional_bias, int(self.k),
                                         self.rule)
        object.__setattr__(self, "_spec", spec)

    @classmethod
    def from_config(cls, config: GameConfig, **kwargs) -> "Gomoku":
        return cls(config.size, config.k, config.rule, **kwargs)

    # ----------------------------------------------------------------- static facts
    @property
    def config(self) -> GameConfig:
        return GameConfig(self.size, self.k, self.rule)

    @property
    def id(self) -> str:
        return f"gomoku-{self.size}x{self.size}-k{self.k}-{self.rule}"

    @property
    def words(self) -> str:
        """The game in words for messages and reports: ``9x9 5 in a row (freestyle)``."""
        return game_words(self.size, self.k, self.rule)

    @property
    def num_actions(self) -> int:
        return self.size * self.size

    @property
    def num_players(self) -> int:
        return 2

    @property
    def observation_spec(self) -> _features.ObservationSpec:
        return self._spec

    @property
    def observation_shape(self) -> tuple[int, int, int]:
        return (self.size, self.size, _features.num_planes(self._spec))

    @functools.cached_property
    def _lines(self) -> np.ndarray:
        reach = self.k if self.rule == "standard" else self.k - 1
        return _line_table(self.size, reach)

    # ------------------------------------------------------------------ pure API
    def init(self, key: jax.Array | None = None) -> State:
        """The empty board, black to move. ``key`` is accepted for pgx compatibility."""
        del key
        nn = self.num_actions
        return State(
            board=jnp.zeros((self.size, self.size), jnp.int8),
            current_player=jnp.int32(BLACK),
            legal_action_mask=jnp.ones((nn,), jnp.bool_),
            rewards=jnp.zeros((2,), jnp.float32),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
            last_action=jnp.int32(-1),
            move_count=jnp.int32(0),
            winner=jnp.int32(-1),
            observation_spec=self._spec,
        )

    def from_board(self, board, to_move: int | None = None, last_action: int = -1) -> State:
        """A state for one game set up from a board (puzzles, tests, analysis).

        ``board`` is ``[N, N]`` with 0 / 1 / 2. The player to move defaults to black when
        both sides have as many stones, white when black has one more. The position is
        taken as not won; the caller vouches that nobody has already won. A full board is
        a finished draw (as `step` leaves one: every action legal, the player of the last
        move as ``current_player``, whatever ``to_move`` says).
        """
        board = np.asarray(board)
        n = self.size
        if board.shape != (n, n):
            raise ValueError(f"board must have shape ({n}, {n}), got {board.shape}")
        if not np.isin(board, (EMPTY, BLACK_STONE, WHITE_STONE)).all():
            raise ValueError("board cells must be 0 (empty), 1 (black) or 2 (white)")
        blacks, whites = int((board == BLACK_STONE).sum()), int((board == WHITE_STONE).sum())
        if to_move is None:
            if blacks - whites not in (0, 1):
                raise ValueError(
                    f"cannot infer the player to move from {blacks} black and {whites} "
                    "white stones: pass to_move"
                )
            to_move = BLACK if blacks == whites else WHITE
        if isinstance(to_move, bool) or not isinstance(to_move, (int, np.integer)) or (
                to_move not in (BLACK, WHITE)):
            raise ValueError(f"to_move must be 0 (black) or 1 (white), got {to_move!r}")
        if isinstance(last_action, bool) or not isinstance(last_action, (int, np.integer)) or (
                not -1 <= last_action < n * n):
            raise ValueError(f"last_action must be an integer from -1 (none) to {n * n - 1} "
                             f"(row * {n} + col), got {last_action!r}")
        if last_action >= 0 and board.reshape(-1)[last_action] == EMPTY:
            raise ValueError(f"last_action {last_action} is the cell {divmod(int(last_action), n)}"
                             ", which is empty: the last move must be one of the board's stones")
        full = blacks + whites == n * n
        if full:  # the player of the last move: black's when it has the extra stone
            to_move = {1: BLACK, 0: WHITE}.get(blacks - whites, 1 - to_move)
        return self.init().replace(
            board=jnp.asarray(board, jnp.int8),
            current_player=jnp.int32(to_move),
            legal_action_mask=jnp.asarray((board.reshape(-1) == EMPTY) | full),
            last_action=jnp.int32(last_action),
            move_count=jnp.int32(blacks + whites),
            terminated=jnp.bool_(full),
        )

    def wins_through(self, board: jax.Array, action: jax.Array, stone: jax.Array) -> jax.Array:
        """Whether the ``stone`` (1 or 2) at ``action`` on ``board`` completes a winning
        line. Looks only at the four lines through that cell: one gather through a
        precomputed index table, then the run through the cell in each direction.

        The lines reach k-1 cells each way under freestyle and k under standard, where
        the cell just beyond a run of k must be seen to rule out an overline."""
        flat = board.reshape(-1)
        idx = jnp.asarray(self._lines)[action]  # [4, 2*reach+1]
        own = (flat[jnp.maximum(idx, 0)] == stone) & (idx >= 0)
        return jnp.any(is_winning_run(run_through_centre(own), self.k, self.rule))

    def step(self, state: State, action: jax.Array, key: jax.Array | None = None) -> State:
        """Play ``action`` for ``state.current_player``. Pure and jittable; one game.

        An illegal action (occupied or off the board) ends the game: the mover loses.
        A finished game is returned unchanged with zero rewards. A state of another board
        size is a ``ValueError`` (when traced: it costs nothing at run time).
        """
        del key
        self._check_board("step", state)
        nn = self.num_actions
        dtype = _dtype_of(action)
        if np.shape(action) != () or dtype is None or not np.issubdtype(dtype, np.integer):
            raise ValueError(
                f"Gomoku.step: the action is one integer, the cell row * {self.size} + col, "
                f"for one game (vmap over a batch); got {_described(action)}"
                + (" (use Gomoku.play(state, row, col) for coordinates)"
                   if np.shape(action) == (2,) else ""))
        if isinstance(action, (int, np.integer, np.ndarray)) and not 0 <= int(action) < nn:
            action = -1  # off the board, however large (int32 would wrap it onto the board)
        action = cell_or_off(action, nn)
        acts = ~(state.terminated | state.truncated)
        player = state.current_player
        stone = (player + 1).astype(jnp.int8)
        flat = state.board.reshape(nn)

        cell = jnp.clip(action, 0, nn - 1)
        legal = (action >= 0) & (action < nn) & (flat[cell] == EMPTY)
        place = acts & legal
        board = jnp.where((jnp.arange(nn) == cell) & place, stone, flat)
        move_count = state.move_count + place.astype(jnp.int32)

        wins = place & self.wins_through(board, cell, stone)
        forfeit = acts & ~legal
        draw = place & ~wins & (move_count == nn)
        ends = wins | forfeit | draw
        winner = jnp.where(forfeit, 1 - player, jnp.where(wins, player, state.winner))
        decided = wins | forfeit
        rewards = jnp.where(
            decided, jnp.where(jnp.arange(2) == winner, 1.0, -1.0), 0.0
        ).astype(jnp.float32)
        terminated = state.terminated | ends
        return state.replace(
            board=board.reshape(self.size, self.size),
            current_player=jnp.where(place & ~ends, 1 - player, player).astype(jnp.int32),
            legal_action_mask=(board == EMPTY) | terminated,
            rewards=rewards,
            terminated=terminated,
            last_action=jnp.where(place, cell, state.last_action).astype(jnp.int32),
            move_count=move_count,
            winner=winner.astype(jnp.int32),
        )

    def observe(self, state: State, player_id: jax.Array | None = None) -> jax.Array:
        """Observation planes from ``player_id``'s view (default: the player to move); one
        game or a batch."""
        self._check_board("observe", state, batch=True)
        return _features.observe(state, self._spec, player=player_id)

    def with_planes(self, state: State) -> State:
        """``state`` (one game or a batch) read in this game's observation planes,
        whichever game made it: what an agent or a network built for this game sees.
        Static data only: free, and traceable."""
        return state.replace(observation_spec=self._spec)

    def _check_board(self, method: str, state: State, batch: bool = False) -> None:
        """ValueError unless ``state`` is one game (or, with ``batch``, any batch of games)
        of this board size (shapes are static: checked while tracing)."""
        shape = tuple(np.shape(state.board))
        if (shape[-2:] if batch else shape) != (self.size, self.size):
            what = ("a batch of games (vmap over it)" if len(shape) == 3
                    and shape[1:] == (self.size, self.size) else "a state of another game")
            raise ValueError(f"Gomoku.{method}: this is a {self.size}x{self.size} game; the "
                             f"state's board has shape {shape}, {what}")

    # ------------------------------------------------------------ Python helpers
    @functools.cached_property
    def _jit_step(self) -> Callable[[State, jax.Array], State]:
        return jax.jit(self.step)

    def play(self, state: State, row: int, col: int) -> State:
        """Checked move by coordinates for one (unbatched) game.

        Raises `IllegalMoveError` for a finished game, a cell off the board or an
        occupied cell, instead of the silent forfeit that ``step`` applies under jit.
        """
        self._check_board("play", state)
        if bool(state.terminated) or bool(state.truncated):
            raise IllegalMoveError(f"the game is over ({describe_result(state)})")
        coords = []
        for name, value in (("row", row), ("col", col)):
            if isinstance(value, (np.ndarray, jax.Array)) and value.ndim == 0 and (
                    np.issubdtype(value.dtype, np.integer)):  # jnp.argmax's, for one
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise IllegalMoveError(f"{name} must be an integer, got {value!r}")
            coords.append(int(value))
        row, col = coords
        n = self.size
        if not (0 <= row < n and 0 <= col < n):
            raise IllegalMoveError(
                f"({row}, {col}) is off the {n}x{n} board: row and col must be from 0 to {n - 1}"
            )
        occupant = int(state.board[row, col])
        if occupant != EMPTY:
            who = "black" if occupant == BLACK_STONE else "white"
            raise IllegalMoveError(f"({row}, {col}) is occupied by {who}")
        return self._jit_step(state, jnp.int32(row * n + col))

    def play_moves(self, moves: Sequence[tuple[int, int]], state: State | None = None) -> State:
        """Play a sequence of ``(row, col)`` moves from ``state`` (default: empty board)."""
        state = self.init() if state is None else state
        for i, move in enumerate(moves):
            try:
                row, col = move
            except (TypeError, ValueError):
                raise IllegalMoveError(f"move {i + 1} is {move!r}, not a (row, col) pair (an "
                                       "action index row * size + col goes to step)") from None
            try:
                state = self.play(state, row, col)
            except IllegalMoveError as err:
                raise IllegalMoveError(f"move {i + 1} {(row, col)}: {err}") from None
        return state


def cell_or_off(action: jax.Array, num_actions: int) -> jax.Array:
    """Integer ``action`` (any integer dtype, any shape) as an int32 cell, -1 where it is
    off a board of ``num_actions`` cells. The range is checked in the action's own dtype
    before it becomes int32: a 64-bit action (a traced or JAX one under x64) would
    otherwise wrap onto the board (2**32 + 40 to 40), and Python's 361 compared with an
    int8 would wrap to 105 (bounds a dtype cannot reach are not compared)."""
    action = jnp.asarray(action)
    info = jnp.iinfo(action.dtype)
    on_board = jnp.ones(action.shape, bool)
    if info.min < 0:
        on_board = on_board & (action >= 0)
    if num_actions <= info.max:
        on_board = on_board & (action < num_actions)
    return jnp.where(on_board, action.astype(jnp.int32), -1)


def _dtype_of(value):
    """``value``'s dtype (an array's, a tracer's or NumPy's reading of it), else None."""
    if hasattr(value, "dtype"):
        return value.dtype
    try:
        return np.asarray(value).dtype
    except (TypeError, ValueError):
        return None


def _described(value) -> str:
    """``value`` in words for an error: a Python value's type and repr (cut to 80
    characters), or an array's (or tracer's) shape and dtype."""
    if not hasattr(value, "dtype"):
        return f"{type(value).__name__} {value!r}"[:80]
    return f"an array of shape {np.shape(value)} and dtype {value.dtype}"


def describe_result(state: State) -> str:
    """A short human description of one game's status."""
    if np.shape(state.terminated) != ():
        raise ValueError(f"describe_result takes one game; got a batch of shape "
                         f"{np.shape(state.terminated)} (index it: jax.tree.map(lambda x: "
                         "x[i], state))")
    if not bool(state.terminated) and not bool(state.truncated):
        side = "black" if int(state.current_player) == BLACK else "white"
        return f"{side} to move"
    winner = int(state.winner)
    if winner < 0:
        return "draw" if bool(state.terminated) else "unfinished (truncated)"
    side = "black" if winner == BLACK else "white"
    # After a finished game current_player is the player who moved last: a winner who
    # did not make the last move won by the opponent's forfeit.
    if int(state.current_player) != winner:
        return f"{side} wins (the opponent played an illegal move)"
    return f"{side} wins"


def auto_reset(
    step_fn: Callable[[State, jax.Array, jax.Array], State],
    init_fn: Callable[[jax.Array], State],
) -> Callable[[State, jax.Array, jax.Array], State]:
    """Wrap ``step`` so that a game restarts in place once it is over (for learners).

    Same semantics as pgx's ``auto_reset``: the step that ends a game returns a fresh
    initial state that still carries that step's ``rewards`` and ``terminated=True``, so
    the learner sees the outcome; the next step starts the new game from it.
    """

    def wrapped(state: State, action: jax.Array, key: jax.Array) -> State:
        init_key, step_key = jax.random.split(key)
        over = state.terminated | state.truncated
        state = jax.tree.map(
            lambda fresh, cur: jnp.where(over, fresh, cur), init_fn(init_key), state
        )
        state = step_fn(state, action, step_key)
        fresh = init_fn(init_key).replace(
            rewards=state.rewards, terminated=state.terminated, truncated=state.truncated
        )
        over = state.terminated | state.truncated
        return jax.tree.map(lambda f, cur: jnp.where(over, f, cur), fresh, state)

    return wrapped


@functools.partial(jax.jit, static_argnames=("env", "batch_size", "record"))
def random_games(
    env: Gomoku, key: jax.Array, batch_size: int, record: bool = False
) -> tuple[State, jax.Array | None]:
    """Play ``batch_size`` full games of uniformly random legal moves in one jitted call.

    All games advance in lockstep; finished games are left as they are (stepping them
    is a no-op) until the last one ends. Returns the final states ``[B, ...]`` and, with
    ``record=True``, the moves ``[B, N*N]`` int32 padded with -1 (else None).
    """
    check_key(key, "random_games: key")
    check_count("random_games: batch_size", batch_size)
    if not isinstance(record, (bool, np.bool_)):
        raise ValueError(f"random_games: record must be True or False, got {record!r}")
    nn = env.num_actions
    step = jax.vmap(env.step)
    choose = jax.vmap(legal_action_of_rank)

    def body(carry):
        t, state, moves = carry
        # One draw for the whole batch per ply (cheaper than a key per game).
        bits = jax.random.bits(jax.random.fold_in(key, t), (batch_size,), jnp.uint32)
        action = choose(state.legal_action_mask, bits)
        live = ~state.terminated
        state = step(state, action)
        if record:
            moves = moves.at[:, t].set(jnp.where(live, action, -1))
        return t + 1, state, moves

    def cond(carry):
        t, state, _ = carry
        return (t < nn) & ~jnp.all(state.terminated)

    state = jax.vmap(env.init)(jax.random.split(key, batch_size))
    moves = jnp.full((batch_size, nn), -1, jnp.int32) if record else None
    _, state, moves = jax.lax.while_loop(cond, body, (jnp.int32(0), state, moves))
    return state, moves
