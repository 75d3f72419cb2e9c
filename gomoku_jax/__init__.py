"""gomoku-jax: a JAX-native, vectorised research framework for k-in-a-row games.

The public surface is re-exported here; submodules hold the rest:
`game`, `features`, `symmetry`, `tactics`, `render`, `reference`, `agents`, `arena`,
`ratings`, `gomocup`, `records` (game record datasets), `networks`, `search`, `replay`,
`ops` (an argmax without ``jnp.argmax``'s slow CPU lowering), `io` (checkpoints and params
files), `exported` (portable agents), `config` (experiment configs), `training` (the
training driver), `tree_search` (linear-time batched search and tree reuse), `play` (the
browser board), `compiled` (keeping a process that compiles many programs under Linux's
limit on memory mappings) and `sweep` (ablation sweeps over any config key; imports the
learners).
"""

__version__ = "0.1.0"

from gomoku_jax import (
    agents,
    arena,
    compiled,
    config,
    exported,
    features,
    gomocup,
    io,
    networks,
    ops,
    ratings,
    records,
    render,
    replay,
    search,
    symmetry,
    tactics,
    tree_search,
)
from gomoku_jax.exported import export_agent, load_agent
from gomoku_jax.io import CheckpointError, Checkpointer, read_exported, write_exported
from gomoku_jax.networks import NETWORKS, NetworkConfig, init_network, make_network, param_count
from gomoku_jax.search import SearchConfig, TacticalPrior, run_search, search_agent
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
    "compiled",
    "config",
    "exported",
    "io",
    "networks",
    "ops",
    "records",
    "replay",
    "search",
    "tree_search",
    "CheckpointError",
    "Checkpointer",
    "NETWORKS",
    "NetworkConfig",
    "SearchConfig",
    "TacticalPrior",
    "export_agent",
    "init_network",
    "load_agent",
    "make_network",
    "param_count",
    "read_exported",
    "run_search",
    "search_agent",
    "write_exported",
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
