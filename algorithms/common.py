"""What the compiled learners share: the device mesh, batch sharding, a gated SGD step
and per-game selection. (`algorithms.alphazero`, `algorithms.dqn`.)"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gomoku_jax import networks
from gomoku_jax import search as search_lib
from gomoku_jax.config import ConfigError

__all__ = ["SearchPlayer", "ShardedLearner", "keep_if", "make_optimizer", "play_search",
           "select_games", "sgd_step"]


def make_optimizer(train) -> optax.GradientTransformation:
    """``train.optimizer`` (``sgd`` with ``train.momentum``, ``adam``, ``adamw`` with
    ``train.weight_decay``) at ``train.learning_rate``, the rate injected as a
    hyperparameter so that schedules and the KL-adaptive rule can set it in the state."""
    makers = {"sgd": lambda: functools.partial(optax.sgd, momentum=train.momentum),
              "adam": lambda: optax.adam,
              "adamw": lambda: functools.partial(optax.adamw,
                                                 weight_decay=train.weight_decay)}
    return optax.inject_hyperparams(makers[train.optimizer]())(
        learning_rate=train.learning_rate)


def play_search(search: search_lib.SearchConfig, eval_simulations: int,
                simulations: int | None = None,
                algorithm: str | None = None) -> search_lib.SearchConfig:
    """The play-time search of a config's training ``search``: ``eval_simulations`` (or
    ``simulations``), no root noise, no Gumbel noise (so the move is deterministic),
    never the tactical prior; it keeps ``reuse_tree`` unless ``algorithm`` switches to
    Gumbel."""
    algorithm = algorithm or search.algorithm
    return dataclasses.replace(
        search, num_simulations=simulations or eval_simulations,
        dirichlet_fraction=0.0, gumbel_scale=0.0, algorithm=algorithm,
        reuse_tree=search.reuse_tree and algorithm == "puct")


class SearchPlayer:
    """Playing for learners of a policy-value network: ``self.config`` (with ``game``,
    ``network``, ``search``, ``eval`` and ``play_search``), ``self.env`` and
    ``self.evaluate``, which `_setup_player` sets. ``play_name`` names the agent,
    ``play_label`` the player in reports."""

    play_name = "learner"
    play_label = "Learner"

    def _setup_player(self, config) -> None:
        """``config``, its game (``env``), its network (``module``) and the network's
        inference-mode evaluation function (``evaluate``) for the search."""
        self.config = config
        self.env = config.game.env()
        self.module = config.network.module(config.game.size)
        # ``(variables, states [B]) -> (logits [B, A], value [B])``, inference mode
        self.evaluate = search_lib.network_evaluate(self.module)

    def export_metadata(self) -> dict:
        """What `gomoku_jax.exported` stores to rebuild the play-time agent."""
        cfg = self.config
        return {"agent": "search", "game": dataclasses.asdict(cfg.game),
                "network": {"name": cfg.network.name, "options": dict(cfg.network.options)},
                "search": cfg.play_search().to_dict()}

    def describe_play(self) -> str:
        return (f"{self.play_label} searching {self.config.eval.simulations} simulations "
                f"per move ({self.config.search.algorithm}, argmax).")

    def agent(self, variables, simulations: int | None = None, name: str | None = None,
              algorithm: str | None = None):
        """The play-time agent (the config's ``play_search``), argmax."""
        search_cfg = self.config.play_search(simulations, algorithm)
        return search_lib.search_agent(name or self.play_name, self.env, self.evaluate,
                                       variables, search_cfg)


class ShardedLearner:
    """Base of a learner whose games and training batches are split over a ``data``
    mesh axis spanning ``devices`` (default: every device); parameters, optimizer
    state and buffers are replicated. Subclasses set ``config`` (with ``seed``) and
    ``_init`` (the jitted initialiser) and call `_setup_mesh` first."""

    def _setup_mesh(self, devices, batch_sizes: Mapping[str, int]) -> None:
        devices = list(jax.devices() if devices is None else devices)
        n = len(devices)
        for name, value in batch_sizes.items():
            if value % n:
                raise ConfigError(f"{name} ({value}) must be a multiple of the number of "
                                  f"devices ({n})")
        self.mesh = Mesh(np.asarray(devices), ("data",))
        self._rep = NamedSharding(self.mesh, P())
        self._games_sharding = NamedSharding(self.mesh, P("data"))

    def init(self, key: jax.Array | None = None):
        """A fresh state from ``key`` (default: ``PRNGKey(config.seed)``)."""
        key = jax.random.PRNGKey(self.config.seed) if key is None else key
        return self._init(key)

    def _constrain(self, tree):
        """A training batch split over the devices along its first axis."""
        if self.mesh.size == 1:
            return tree
        return jax.lax.with_sharding_constraint(tree, self._games_sharding)


def keep_if(flag: jax.Array, new: Any, old: Any) -> Any:
    """``new`` where the scalar ``flag`` holds, else ``old`` (pytrees alike)."""
    return jax.tree.map(lambda x, y: jnp.where(flag, x, y), new, old)


def select_games(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per game: ``new`` where ``mask [B]``, else ``old`` (pytrees with leading ``B``)."""
    return jax.tree.map(
        lambda a, b: jnp.where(mask.reshape(mask.shape + (1,) * (b.ndim - 1)), a, b), new, old)


def sgd_step(loss: Callable, tx: optax.GradientTransformation, variables, opt_state,
             ready: jax.Array, *args):
    """One optimizer step on ``loss(params, other_collections, *args) -> (value, (aux,
    new_collections))``, taken only when ``ready`` (else nothing changes).

    ``variables`` holds ``params`` and any other collections (BatchNorm statistics);
    returns ``(variables, opt_state, aux)``.
    """
    params, stats = networks.split_params(variables)
    grads, (aux, new_stats) = jax.grad(loss, has_aux=True)(params, stats, *args)
    updates, new_opt = tx.update(grads, opt_state, params)
    new_vars = {"params": optax.apply_updates(params, updates), **stats, **new_stats}
    return keep_if(ready, new_vars, variables), keep_if(ready, new_opt, opt_state), aux
