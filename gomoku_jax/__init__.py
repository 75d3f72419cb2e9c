"""gomoku-jax: a JAX-native, vectorised research framework for k-in-a-row games.

The public surface is re-exported here; submodules hold the rest:
`game`, `features`, `symmetry`, `tactics`, `render`, `reference`, `agents`, `arena`,
`ratings`, `gomocup`.
"""

__version__ = "0.1.0"

from gomoku_jax import agents, arena, features, gomocup, ratings, render, symmetry, tactics
from gomoku_jax.features import ENCODINGS, ObservationSpec
from gomoku_jax.game import (
    BLACK,
    DIRECTIONS,
    RULES,
    WHITE,
    GameConfig,
    Gomoku,
    IllegalMoveError,
    State,
    auto_reset,
    describe_result,
    random_games,
    sample_legal_action,
)

__all__ = [
    "agents",
    "arena",
    "gomocup",
    "ratings",
    "BLACK",
    "DIRECTIONS",
    "ENCODINGS",
    "RULES",
    "WHITE",
    "GameConfig",
    "Gomoku",
    "IllegalMoveError",
    "ObservationSpec",
    "State",
    "auto_reset",
    "describe_result",
    "features",
    "random_games",
    "render",
    "sample_legal_action",
    "symmetry",
    "tactics",
]
