"""What the compiled learners share: the device mesh, batch sharding, a gated SGD step
and per-game selection. (`algorithms.alphazero`, `algorithms.dqn`.)"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gomoku_jax import networks
from gomoku_jax.config import ConfigError

__all__ = ["ShardedLearner", "keep_if", "select_games", "sgd_step"]


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
