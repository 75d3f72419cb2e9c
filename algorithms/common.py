"""What the compiled learners share: the device mesh, batch sharding, programs that
take the hyperparameters as inputs (compiled once for a sweep), a gated SGD step and
per-game selection. (`algorithms.alphazero`, `algorithms.dqn`, `algorithms.imitation`.)"""

from __future__ import annotations

import collections
import copy
import dataclasses
import functools
import hashlib
import json
import threading
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from gomoku_jax import compiled, networks
from gomoku_jax import search as search_lib
from gomoku_jax.config import ConfigError, changed

__all__ = ["SearchPlayer", "ShardedLearner", "check_batches", "clear_programs", "fingerprint",
           "keep_if", "per_game",
           "make_optimizer", "play_search", "search_objects", "select_games", "sgd_step",
           "switched_on",
           "unused_optimizer_settings"]


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


def unused_optimizer_settings(train, prefix: str = "") -> list[str]:
    """A sentence for each of ``train.momentum`` (sgd's) and ``train.weight_decay``
    (adamw's) changed from its default under a ``train.optimizer`` that does not use it;
    the keys named with ``prefix`` in front (a pipeline stage's, ``"master."``)."""
    return [f"{prefix}train.{name} ({getattr(train, name)}) does nothing with "
            f"{prefix}train.optimizer {train.optimizer!r}: only {user} uses it"
            for name, user in (("momentum", "sgd"), ("weight_decay", "adamw"))
            if hasattr(train, name) and train.optimizer != user and changed(train, name)]


def search_objects(config) -> tuple:
    """The Q terms' factories ``config.search`` resolved from their names when it was made
    (`gomoku_jax.search.SearchConfig`), for a program's key; none without a search."""
    search = getattr(config, "search", None)
    return tuple(getattr(search, "_qtransforms", ()))


def play_search(search: search_lib.SearchConfig, eval_simulations: int,
                simulations: int | None = None,
                algorithm: str | None = None) -> search_lib.SearchConfig:
    """The play-time search of a config's training ``search``: ``eval_simulations`` (or
    ``simulations``), no root noise, no Gumbel noise and no local exploration (so the
    move is deterministic), never the tactical prior; it keeps ``reuse_tree`` unless
    ``algorithm`` switches to Gumbel."""
    algorithm = algorithm or search.algorithm
    return dataclasses.replace(
        search, num_simulations=simulations or eval_simulations,
        dirichlet_fraction=0.0, gumbel_scale=0.0, algorithm=algorithm,
        reuse_tree=search.reuse_tree and algorithm == "puct",
        local_exploration=0.0)


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


class _NotCompiled:
    """Stands in, inside a traced view of a config, for a setting that the compiled
    programs do not read (``seed``, ``eval``...): reading it there is a bug of the
    learner, so it fails loudly instead of baking in one learner's value."""

    def __init__(self, name: str):
        self._name = name

    def _refuse(self, *_):
        raise TypeError(f"config.{self._name} is not an input of the compiled programs "
                        "(read it outside them)")

    def __getattr__(self, attr):
        if attr.startswith("__"):  # copy, pickle and the like probe for these
            raise AttributeError(attr)
        raise AttributeError(f"config.{self._name} is not an input of the compiled "
                             f"programs (read config.{self._name}.{attr} outside them)")

    __bool__ = __int__ = __float__ = __index__ = __len__ = __iter__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __mod__ = __pow__ = __neg__ = _refuse
    __hash__ = None

    def __repr__(self):
        return f"<config.{self._name}: not compiled>"


def _get(config, path: str):
    """The setting at dotted ``path`` (None under a section that is None)."""
    for part in path.split("."):
        if config is None:
            return None
        config = getattr(config, part)
    return config


def _set_unchecked(config, path: str, value):
    """A copy of the (frozen, nested) dataclass ``config`` with ``path`` set to
    ``value``, without ``__post_init__``: only for traced views, whose values were
    validated as numbers in the learner's own config."""
    head, _, rest = path.partition(".")
    new = copy.copy(config)
    object.__setattr__(new, head, _set_unchecked(getattr(config, head), rest, value)
                       if rest else value)
    return new


def _dtype(config, path: str):
    """float32 for a setting declared a float (an integer value included), else int32."""
    *parents, leaf = path.split(".")
    owner = _get(config, ".".join(parents)) if parents else config
    declared = {f.name: str(f.type) for f in dataclasses.fields(owner)}.get(leaf, "")
    return np.float32 if "float" in declared else np.int32


def per_game(total, finished):
    """``total / finished``, a metric's mean over the games that finished; NaN when none
    did (a 0 would read as a real value in a plot: a game length of 0, every game
    lost)."""
    return jnp.where(finished > 0, total / jnp.maximum(finished, 1).astype(jnp.float32),
                     jnp.nan)


def fingerprint(tree) -> str | None:
    """A digest of the arrays of ``tree`` (None for no arrays): programs that bake them
    in as constants are keyed on it."""
    leaves = jax.tree.leaves(tree)
    if not leaves:
        return None
    digest = hashlib.sha256()
    for leaf in leaves:
        array = np.asarray(jax.device_get(leaf))
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


class _Program:
    """A jitted program shared by learners (see `ShardedLearner._shared_program`);
    ``traces`` counts how many times it was traced, by whichever learner called it,
    leaving out the traces that `gomoku_jax.compiled.release_if_crowded` forced by
    dropping JAX's caches (the first trace after each release)."""

    def __init__(self, learner, name: str, impl: Callable, **jit_kwargs):
        self.name = name
        self.traces = 0
        self._releases = None  # compiled.releases() at the last trace

        def traced(*args):
            *args, hyper = args
            # a Python side effect: counts traces, not calls
            releases = compiled.releases()
            if self._releases is None or releases == self._releases:
                self.traces += 1
            self._releases = releases
            return impl(learner._traced_view(hyper), *args)

        self.jitted = jax.jit(traced, **jit_kwargs)

    def __call__(self, *args):
        return self.jitted(*args)


def _traced(value) -> bool:
    """Whether a hyperparameter's value is an input of the compiled programs: a number
    that is `switched_on` (None and 0 are compiled in: they may switch a part of the
    program off, as ``train.kl_target=None`` or ``train.search_value_weight=0`` do)."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and switched_on(value))


# Compiled programs shared by learners whose configs differ only in traced settings,
# most recently used last.
_PROGRAMS: "collections.OrderedDict[tuple, _Program]" = collections.OrderedDict()
_PROGRAMS_KEPT = 16
_PROGRAMS_LOCK = threading.Lock()


def clear_programs() -> None:
    """Forget the shared compiled programs (the next learner compiles its own)."""
    with _PROGRAMS_LOCK:
        _PROGRAMS.clear()


class ShardedLearner:
    """Base of a learner whose games and training batches are split over a ``data``
    mesh axis spanning ``devices`` (default: every device); parameters, optimizer
    state and buffers are replicated. Subclasses set ``config`` (with ``seed``) and
    call `_setup_mesh` first, then `_setup_programs` last (or make their own programs
    with `_shared_program`, ``_init`` and ``_iteration`` among them).

    **Traced hyperparameters.** ``HYPERPARAMETERS`` names the dotted config settings
    (``train.learning_rate``, ``search.c_puct``...) that are inputs of the compiled
    programs rather than constants: `_shared_program` compiles a learner's function
    once for every config that differs from it only in those settings' values (and in
    ``seed``, ``checkpoint_every`` and ``eval``, which the programs do not read), so a
    sweep over seeds or learning rates compiles once. A setting at None or 0 is
    compiled in (it may switch a part of the program off), as are bools, strings and
    the settings that shape arrays (batch sizes, simulations, network widths)."""

    HYPERPARAMETERS: tuple[str, ...] = ()
    NOT_COMPILED: tuple[str, ...] = ("seed", "checkpoint_every", "eval")

    def _setup_mesh(self, devices, batch_sizes: Mapping[str, int]) -> None:
        devices = list(jax.devices() if devices is None else devices)
        check_batches(len(devices), batch_sizes)
        self.mesh = Mesh(np.asarray(devices), ("data",))
        self._rep = NamedSharding(self.mesh, P())
        self._games_sharding = NamedSharding(self.mesh, P("data"))

    def _mesh_devices(self) -> list:
        """The devices the games are split over (the ``data`` axis of ``self.mesh``),
        for the memory checks of what the games hold (search trees)."""
        return list(self.mesh.devices.flat)

    # ------------------------------------------------------------ hyperparameters
    def hyperparameters(self) -> dict[str, np.ndarray]:
        """The traced settings of this learner's config, by dotted name: float32 or
        int32 scalars (see the class docstring for which settings are traced)."""
        out = {}
        for path in self.HYPERPARAMETERS:
            value = _get(self.config, path)
            if _traced(value):
                out[path] = np.asarray(value, _dtype(self.config, path))
        return out

    def _program_data(self) -> dict:
        """What a compiled program depends on, as plain data: the config with the traced
        settings' values and the settings the programs do not read left out."""
        data = dataclasses.asdict(self.config)
        for name in self.NOT_COMPILED:
            data.pop(name, None)
        for path in self._hyper:
            if path not in self.HYPERPARAMETERS:
                continue  # a learner's own traced values (see `_traced_view`)
            *parents, leaf = path.split(".")
            node = data
            for part in parents:
                node = node[part]
            node[leaf] = "<traced>"
        return data

    def _traced_view(self, hyper: Mapping[str, jax.Array]):
        """This learner with a config whose traced settings are ``hyper``'s (tracers)
        and whose uncompiled settings cannot be read; `_derive` rebuilds what is
        computed from the config. A learner that traces values which are not config
        fields (`hyperparameters` names them) sets them on the view itself."""
        config = self.config
        for name in self.NOT_COMPILED:
            if hasattr(config, name):
                config = _set_unchecked(config, name, _NotCompiled(name))
        for path, value in hyper.items():
            if path in self.HYPERPARAMETERS:
                config = _set_unchecked(config, path, value)
        view = copy.copy(self)
        view.config = config
        view._derive()
        return view

    def _derive(self) -> None:
        """Set what the learner computes from ``self.config`` (its optimizer...); run
        at construction and again for each traced view."""

    def _program_objects(self) -> tuple:
        """What the programs bake in besides the config, for their key: objects that
        were resolved from names when the learner was built (the network's module,
        whose class a registry may have replaced; compiled opponents and the digest of
        their parameters; the search's Q terms, resolved when its config was made).
        Equal tuples mean the same program."""
        return (self.module, *search_objects(self.config))

    def _setup_programs(self, replicated_inputs: int = 0) -> None:
        """The learner's traced settings (`hyperparameters`, read once: the config is
        frozen) and its shared programs: ``_init`` from ``_init_impl(key)`` and
        ``_iteration`` from ``_iteration_impl(state, *inputs) -> (state, metrics)``,
        which donates the state; its ``replicated_inputs`` further inputs (an imitation
        learner's records) are replicated. Call it last in ``__init__``, or before the
        learner's other programs."""
        self._hyper = self.hyperparameters()
        sharding = self.state_sharding()
        cls = type(self)
        self._init = self._shared_program("init", cls._init_impl, out_shardings=sharding)
        self._iteration = self._shared_program(
            "iteration", cls._iteration_impl,
            in_shardings=(sharding,) + (self._rep,) * replicated_inputs,
            out_shardings=(sharding, self._rep), donate_argnums=0)

    def iteration(self, state):
        """One iteration: one compiled program, shared by the learners whose configs
        differ only in traced settings. Donates ``state``; returns ``(state,
        metrics)``."""
        return self._iteration(state, self._hyper)

    def _shared_program(self, name: str, impl: Callable, **jit_kwargs) -> _Program:
        """``impl(view, *args)`` compiled as ``program(*args, hyper)``, shared (an LRU
        of `_PROGRAMS_KEPT`) by every learner of the same class, devices, program data
        and program objects. ``jit_kwargs`` (shardings, donation) describe ``args``;
        ``hyper`` is replicated. The program traces through the view of the learner
        that made it: a learner computes everything it derives from traced settings in
        `_derive` (which the view runs again), never in ``__init__`` alone. Tests count
        `trace_count` (``chex.assert_max_traces`` cannot serve: it would count every
        program made here as one function)."""
        devices = tuple(d.id for d in self.mesh.devices.flat)
        data = json.dumps(self._program_data(), sort_keys=True, default=repr)
        key = (type(self), name, devices, data, self._program_objects())
        with _PROGRAMS_LOCK:
            program = _PROGRAMS.get(key)
            if program is not None:
                _PROGRAMS.move_to_end(key)
                return program
        in_shardings = jit_kwargs.pop("in_shardings", None)
        if in_shardings is not None:
            jit_kwargs["in_shardings"] = (*in_shardings, self._rep)
        # a copy as the learner is now: the cache does not keep the learner alive, nor
        # what it loads later (an imitation learner's records)
        program = _Program(copy.copy(self), name, impl, **jit_kwargs)
        with _PROGRAMS_LOCK:
            program = _PROGRAMS.setdefault(key, program)
            _PROGRAMS.move_to_end(key)
            while len(_PROGRAMS) > _PROGRAMS_KEPT:
                _PROGRAMS.popitem(last=False)
        return program

    @property
    def trace_count(self) -> int:
        """How many times this learner's ``iteration`` program was traced (by any of
        the learners that share it), the retraces forced by a release of JAX's caches
        (`gomoku_jax.compiled.release_if_crowded`) left out."""
        return self._iteration.traces

    def init(self, key: jax.Array | None = None):
        """A fresh state from ``key`` (default: ``PRNGKey(config.seed)``)."""
        key = jax.random.PRNGKey(self.config.seed) if key is None else key
        return self._init(key, self._hyper)

    def _constrain(self, tree):
        """A training batch split over the devices along its first axis."""
        if self.mesh.size == 1:
            return tree
        return jax.lax.with_sharding_constraint(tree, self._games_sharding)


def check_batches(devices: int, batch_sizes: Mapping[str, int]) -> None:
    """A ConfigError naming the first of ``batch_sizes`` (by dotted name) that does not
    split evenly over ``devices`` devices (a ValueError for no devices)."""
    if devices < 1:
        raise ValueError("devices is empty: give at least one device (None: all of them)")
    for name, value in batch_sizes.items():
        if value % devices:
            raise ConfigError(f"{name} ({value}) must be a multiple of the number of "
                              f"devices ({devices})")


def switched_on(value) -> bool:
    """Whether a hyperparameter that may be traced (see `ShardedLearner`) is set: not
    None and not 0. A traced value is never 0, so this is static."""
    return value is not None and not (isinstance(value, (int, float)) and value == 0)


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
    returns ``(variables, opt_state, aux)``. Without a step, ``aux``'s floats are NaN:
    a loss of a batch that trained nothing (drawn from a buffer still filling, empty
    slots included) is not a point of the learning curve.
    """
    params, stats = networks.split_params(variables)
    grads, (aux, new_stats) = jax.grad(loss, has_aux=True)(params, stats, *args)
    updates, new_opt = tx.update(grads, opt_state, params)
    new_vars = {"params": optax.apply_updates(params, updates), **stats, **new_stats}
    aux = jax.tree.map(lambda x: jnp.where(ready, x, jnp.nan)
                       if jnp.issubdtype(x.dtype, jnp.floating) else x, aux)
    return keep_if(ready, new_vars, variables), keep_if(ready, new_opt, opt_state), aux
