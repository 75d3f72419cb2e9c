"""Learners and search baselines, one module each (built on `gomoku_jax`).

`LEARNERS` maps the ``algorithm`` named at the top of an experiment config file to the
module that trains it; each such module provides a config dataclass and
``make_learner(config, devices=None)``.
"""

import importlib

LEARNERS = {"alphazero": ("algorithms.alphazero", "AlphaZeroConfig"),
            "dqn": ("algorithms.dqn", "DQNConfig"),
            "imitation": ("algorithms.imitation", "ImitationConfig"),
            "pipeline": ("algorithms.pipeline", "PipelineConfig")}


def learner_entry(algorithm: str):
    """``(config class, make_learner)`` of a learner by its config name."""
    if algorithm not in LEARNERS:
        raise ValueError(f"unknown algorithm {algorithm!r}; known: {', '.join(sorted(LEARNERS))}")
    module_name, config_name = LEARNERS[algorithm]
    module = importlib.import_module(module_name)
    return getattr(module, config_name), module.make_learner
