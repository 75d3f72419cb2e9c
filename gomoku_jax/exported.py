"""Exported agents: one file with the params and all it takes to play them.

`export_agent` writes a ``.gjx`` file (format in `gomoku_jax.io`): a JSON header with
the game settings, the observation encoding, the network (registry name and options)
and the play-time search, followed by the variables. `load_agent` rebuilds a playing
agent from such a file with `gomoku_jax` alone: no training code, no config file,
nothing executed from the file.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, NamedTuple

import jax
import jax.numpy as jnp

from gomoku_jax import config as config_lib
from gomoku_jax import io as gio
from gomoku_jax import networks
from gomoku_jax import search as search_lib
from gomoku_jax.agents import JaxAgent, greedy_q_agent
from gomoku_jax.game import Gomoku

__all__ = ["Loaded", "export_agent", "folder_hint", "load", "load_agent", "load_network"]

# The agent kinds an exported file's header may name (``metadata.agent``; "search" when
# absent) and the kind of network each plays.
AGENT_KINDS = {"search": "policy-value", "q-greedy": "q"}


class Loaded(NamedTuple):
    agent: JaxAgent
    env: Gomoku  # the game the params were trained for
    metadata: dict


def export_agent(path, learner, variables, extra: Mapping[str, Any] | None = None) -> None:
    """Write the play-time agent of ``learner`` (its ``export_metadata()``: the game,
    the network and how the agent plays) with ``variables`` to ``path``."""
    meta = {**learner.export_metadata(), **dict(extra or {})}
    gio.write_exported(path, meta, jax.device_get(variables))


def folder_hint(path) -> str:
    """`` (did you mean FOLDER/final.gjx?)`` for a training run's folder given where its
    exported file was meant, else ``""``."""
    inside = os.path.join(path, "final.gjx")
    return f" (did you mean {inside}?)" if os.path.isfile(inside) else ""


def closest_file(path) -> str | None:
    """The exported file (``.gjx``) in ``path``'s folder whose name is closest to
    ``path``'s (``final.gjx`` for ``final``, ``final.gj`` or ``finl.gjx``), None when none
    is close (`config.closest_file`)."""
    return config_lib.closest_file(path, ".gjx")


def load_network(path):
    """``(metadata, env, module, variables)`` from an exported file."""
    if os.path.isdir(path):
        raise gio.CheckpointError(f"{path} is a folder, not an exported params file"
                                  f"{folder_hint(path)}")
    if not os.path.isfile(path):
        where = "" if os.path.isabs(path) else f" (in the current folder, {os.getcwd()})"
        close = closest_file(path)
        hint = f" (did you mean {close}?)" if close else ""
        raise gio.CheckpointError(f"{path}: no such params file{where}{hint}")
    meta, variables = gio.read_exported(path)
    try:
        game = meta["game"]
        net = meta["network"]
        env = Gomoku(game["size"], game["k"], game["rule"], observation=game["observation"],
                     positional_bias=game.get("positional_bias"))
        module = networks.make_network(net["name"], board_size=env.size, **net["options"])
    except (KeyError, TypeError, ValueError) as error:
        why = (f"the setting {error.args[0]!r} is missing" if isinstance(error, KeyError)
               else str(error))
        raise gio.CheckpointError(
            f"{path}: the exported file's settings cannot rebuild an agent ({why})") from None
    mismatch = networks.variables_mismatch(module, variables, env.observation_shape)
    if mismatch:
        shown = "; ".join(mismatch[:4]) + (f"; and {len(mismatch) - 4} more"
                                            if len(mismatch) > 4 else "")
        raise gio.CheckpointError(
            f"{path}: the params do not fit the network its header describes ({net['name']} "
            f"{net['options']} on {env.size}x{env.size}, {env.observation_shape[-1]} input "
            f"planes): {shown}")
    kind, network_kind = meta.get("agent", "search"), networks.NETWORKS[net["name"]][1]
    if not isinstance(kind, str) or kind not in AGENT_KINDS:
        raise gio.CheckpointError(f"{path}: unknown agent kind {kind!r} in its header "
                                  f"(known: {', '.join(AGENT_KINDS)})")
    wants = AGENT_KINDS[kind]
    if network_kind != wants:  # it would fail at every move
        raise gio.CheckpointError(
            f"{path}: its header says a {kind} agent, which plays a {wants} network, but "
            f"its network {net['name']!r} is a {network_kind} network")
    variables = jax.tree.map(jnp.asarray, variables)
    return meta, env, module, variables


def load(path, simulations: int | None = None, name: str | None = None) -> Loaded:
    """The playing agent of an exported file, its game and its metadata;
    ``simulations`` overrides the stored search's. The agent's name (default) is the one
    the command line gives it: ``path``, or ``path@N`` with ``simulations=N``."""
    meta, env, module, variables = load_network(path)
    name = name or (str(path) if simulations is None else f"{path}@{simulations}")
    kind = meta.get("agent", "search")
    if kind == "q-greedy":  # a Q network: the legal move of highest Q
        if simulations is not None:
            raise ValueError(f"{path} holds a Q network, which plays without search: "
                             "simulations do not apply")

        return Loaded(greedy_q_agent(name, module, variables, env), env, meta)
    config = stored_search(path, meta)
    if simulations is not None:
        config = dataclasses.replace(config, num_simulations=simulations)
    agent = search_lib.search_agent(name, env, search_lib.network_evaluate(module), variables,
                                    config)
    return Loaded(agent, env, meta)


def stored_search(path, meta) -> search_lib.SearchConfig:
    """The play-time search kept in an exported file's header ``meta``; a CheckpointError
    naming the file ``path`` when it is missing or invalid."""
    try:
        return search_lib.SearchConfig.from_dict(meta["search"])
    except (KeyError, TypeError, ValueError) as error:
        raise gio.CheckpointError(
            f"{path}: the exported file's play-time search is missing or invalid "
            f"({type(error).__name__}: {error})") from None


def load_agent(path, simulations: int | None = None, name: str | None = None) -> JaxAgent:
    """A playing agent from an exported file (see `load`)."""
    return load(path, simulations, name).agent
