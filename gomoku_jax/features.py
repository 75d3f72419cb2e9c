"""Observation planes for networks, selectable by name.

Every encoding is from the view of one player (by default the player to move) and
channels-last, ``[..., N, N, C]`` float32, so it works on one game or on a batch.

Encodings (``ENCODINGS``):

* ``stones-colour`` (seed 000): own stones, opponent stones, colour (all ones when the
  viewer is black).
* ``stones-last-colour`` (seeds 002, 003): own, opponent, last move (one-hot), colour.
* ``stones-empty`` (seed 004): own, opponent, empty cells.
* ``stones-threats``: own, opponent, colour, then what a stone on each empty cell would
  make, first for the viewer, then for the opponent (`gomoku_jax.tactics.threat_moves`):
  a win (0 or 1), the directions in which it makes a four, and those in which it makes
  a three (counts 0 to 4). Hand-made tactical features, in the spirit of KataGo's ladder
  planes: the network sees at once where a win, a forced block or a double threat is,
  which it would otherwise have to learn from the stones. They need the game's ``k``
  and ``rule``, which `gomoku_jax.game.Gomoku` puts in the spec.

``positional_bias=sigma`` subtracts seed 001's 2-D Gaussian, centred on the board with
standard deviation ``sigma`` cells and density normalisation ``1 / (2 pi sigma^2)``, from
every plane (the report feeds ``planes - bias`` to the network).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
import numpy as np

from gomoku_jax.config import check_count, plain_fields

__all__ = ["ENCODINGS", "ObservationSpec", "gaussian_bias", "num_planes", "observe",
           "observe_position"]

ENCODINGS = {
    "stones-colour": ("own", "opponent", "colour"),
    "stones-last-colour": ("own", "opponent", "last", "colour"),
    "stones-empty": ("own", "opponent", "empty"),
    "stones-threats": ("own", "opponent", "colour", "own-five", "own-fours", "own-threes",
                       "opponent-five", "opponent-fours", "opponent-threes"),
}
_THREATS = ("five", "fours", "threes")  # the channels of tactics.threat_moves


@dataclasses.dataclass(frozen=True)
class ObservationSpec:
    """Static choice of observation: encoding name and optional positional-bias sigma,
    with the game's ``k`` and ``rule`` for the encodings that read tactics."""

    encoding: str = "stones-colour"
    positional_bias: float | None = None
    k: int = 5
    rule: str = "freestyle"

    def __post_init__(self):
        plain_fields(self)
        if self.encoding not in ENCODINGS:
            raise ValueError(
                f"observation encoding must be one of {', '.join(ENCODINGS)}, "
                f"got {self.encoding!r}"
            )
        if self.positional_bias is not None:
            sigma = self.positional_bias
            if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not (
                math.isfinite(sigma) and sigma > 0
            ):
                raise ValueError(
                    f"positional_bias must be a positive number (sigma in cells) or None, "
                    f"got {sigma!r}"
                )
            object.__setattr__(self, "positional_bias", float(sigma))


def num_planes(spec: ObservationSpec) -> int:
    return len(ENCODINGS[spec.encoding])


def gaussian_bias(size: int, sigma: float) -> np.ndarray:
    """Seed 001's positional bias: ``[size, size]`` 2-D Gaussian density at the centre."""
    check_count("gaussian_bias: size", size)
    if isinstance(sigma, bool) or not isinstance(sigma, (int, float, np.integer, np.floating)) \
            or not 0 < sigma < math.inf:
        raise ValueError(f"gaussian_bias: sigma must be a positive number of cells, got "
                         f"{sigma!r}")
    centre = (size - 1) / 2.0
    y, x = np.meshgrid(np.arange(size) - centre, np.arange(size) - centre, indexing="ij")
    g = np.exp(-0.5 * (x**2 + y**2) / sigma**2) / (2.0 * np.pi * sigma**2)
    return g.astype(np.float32)


def observe(state, spec: ObservationSpec, player: jax.Array | None = None) -> jax.Array:
    """Planes ``[..., N, N, C]`` float32 for ``state`` (one game or a batch).

    ``player`` (0 black, 1 white; broadcastable to the batch) chooses the viewer;
    default: ``state.current_player``.
    """
    if player is not None and not isinstance(player, jax.core.Tracer):  # concrete: checked
        values = np.asarray(player)
        if not np.issubdtype(values.dtype, np.integer) or values.dtype == np.bool_ or not (
                np.isin(values, (0, 1)).all()):
            raise ValueError(f"observe: player is 0 (black) or 1 (white), the viewer, "
                             f"got {player!r}")
    viewer = state.current_player if player is None else player
    return observe_position(state.board, viewer, state.last_action, spec)


def observe_position(board, viewer, last_action, spec: ObservationSpec) -> jax.Array:
    """`observe` from the arrays a state is made of (``board [..., N, N]``, the viewer
    ``[...]`` and the last action ``[...]``), for stored positions such as replay items."""
    board = jnp.asarray(board)
    n = board.shape[-1]
    viewer = jnp.asarray(viewer)
    viewer = jnp.broadcast_to(viewer, board.shape[:-2]).astype(jnp.int32)
    own_stone = (viewer + 1)[..., None, None]
    names = ENCODINGS[spec.encoding]
    threats = {}
    if any(name.endswith(_THREATS) for name in names):
        from gomoku_jax import tactics  # tactics imports the game, which imports this

        # Both players in one call: a side axis before the board's.
        sides = jnp.broadcast_to(board[..., None, :, :],
                                 board.shape[:-2] + (2,) + board.shape[-2:])
        made = tactics.threat_moves(sides, jnp.stack([viewer, 1 - viewer], axis=-1), spec.k,
                                    spec.rule)  # [..., 2, 3, N, N]
        for s, side in enumerate(("own", "opponent")):
            for i, what in enumerate(_THREATS):
                threats[f"{side}-{what}"] = made[..., s, i, :, :]
    planes = []
    for name in names:
        if name == "own":
            plane = board == own_stone
        elif name == "opponent":
            plane = (board != 0) & (board != own_stone)
        elif name == "empty":
            plane = board == 0
        elif name in threats:
            plane = threats[name]
        elif name == "colour":
            plane = jnp.broadcast_to((viewer == 0)[..., None, None], board.shape)
        else:  # "last"
            last = jnp.asarray(last_action)
            plane = (jnp.arange(n * n) == last[..., None]).reshape(board.shape)
        planes.append(plane.astype(jnp.float32))
    obs = jnp.stack(planes, axis=-1)
    if spec.positional_bias is not None:
        obs = obs - gaussian_bias(n, spec.positional_bias)[:, :, None]
    return obs
