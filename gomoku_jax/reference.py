"""A straightforward NumPy engine for one game, with Python loops.

It is the plain reference the JAX engine is tested against and the baseline its
benchmark is measured against: the kind of engine most Gomoku projects start with
(seed 000 section 2): a NumPy board, a step that places a stone, then walks the four
lines through it. Same conventions as `gomoku_jax.game`.
"""

from __future__ import annotations

import numpy as np

from gomoku_jax.game import DIRECTIONS, GameConfig, IllegalMoveError

__all__ = ["NumpyGomoku", "NumpyPureMCTS"]


class NumpyGomoku:
    """A mutable single-game engine: ``reset()``, ``step(action)``, ``legal_actions()``."""

    def __init__(self, size: int = 15, k: int = 5, rule: str = "freestyle"):
        self.config = GameConfig(size, k, rule)
        self.reset()

    def reset(self) -> None:
        n = self.config.size
        self.board = np.zeros((n, n), np.int8)
        self.current_player = 0
        self.move_count = 0
        self.last_action = -1
        self.terminated = False
        self.winner = -1

    def copy(self) -> "NumpyGomoku":
        """An independent copy of the game (for search)."""
        game = NumpyGomoku.__new__(NumpyGomoku)
        game.__dict__.update(self.__dict__)
        game.board = self.board.copy()
        return game

    def legal_actions(self) -> np.ndarray:
        return np.flatnonzero(self.board.reshape(-1) == 0)

    def _run_through(self, row: int, col: int, dr: int, dc: int) -> int:
        n, stone = self.config.size, self.board[row, col]
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < n and 0 <= c < n and self.board[r, c] == stone:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        return run

    def wins_at(self, row: int, col: int) -> bool:
        k, standard = self.config.k, self.config.rule == "standard"
        for dr, dc in DIRECTIONS:
            run = self._run_through(row, col, dr, dc)
            if run == k or (run > k and not standard):
                return True
        return False

    def step(self, action: int) -> None:
        """Play ``action`` for the player to move; raises on an illegal move."""
        n = self.config.size
        if self.terminated:
            raise IllegalMoveError("the game is over")
        if not 0 <= action < n * n:
            raise IllegalMoveError(f"action {action} is off the {n}x{n} board")
        row, col = divmod(int(action), n)
        if self.board[row, col] != 0:
            raise IllegalMoveError(f"({row}, {col}) is occupied")
        self.board[row, col] = self.current_player + 1
        self.move_count += 1
        self.last_action = int(action)
        if self.wins_at(row, col):
            self.terminated, self.winner = True, self.current_player
        elif self.move_count == n * n:
            self.terminated = True
        else:
            self.current_player = 1 - self.current_player

    def play_random_game(self, rng: np.random.Generator) -> int:
        """Play one game of uniformly random legal moves from the empty board; return
        its number of plies."""
        self.reset()
        while not self.terminated:
            self.step(int(rng.choice(self.legal_actions())))
        return self.move_count


class _Node:
    __slots__ = ("children", "visits", "score", "untried", "mover")

    def __init__(self, untried: list[int], mover: int):
        self.children: dict[int, _Node] = {}
        self.visits = 0
        self.score = 0.0  # summed results for ``mover``, the player who moved here
        self.untried = untried
        self.mover = mover


class NumpyPureMCTS:
    """Plain pure MCTS (UCT, random rollouts) in Python and NumPy, one game at a time:
    the kind of baseline the reports use, and the reference the JAX search's benchmark
    is measured against. Draws count half."""

    def __init__(self, size: int, k: int, rule: str = "freestyle", simulations: int = 1000,
                 exploration: float = 2 ** 0.5, seed: int = 0):
        self.config = GameConfig(size, k, rule)
        self.simulations, self.exploration = simulations, exploration
        self.rng = np.random.default_rng(seed)

    def search(self, game: NumpyGomoku) -> int:
        """The most visited move after ``simulations`` rounds from ``game``'s position."""
        root = _Node(list(game.legal_actions()), 1 - game.current_player)
        for _ in range(self.simulations):
            sim, node, path = game.copy(), root, [root]
            while not node.untried and node.children and not sim.terminated:
                log_n = np.log(node.visits)
                action, node = max(
                    node.children.items(),
                    key=lambda kv: kv[1].score / kv[1].visits
                    + self.exploration * np.sqrt(log_n / kv[1].visits),
                )
                sim.step(action)
                path.append(node)
            if node.untried and not sim.terminated:
                action = node.untried.pop(int(self.rng.integers(len(node.untried))))
                mover = sim.current_player
                sim.step(action)
                child = _Node(list(sim.legal_actions()), mover)
                node.children[action] = child
                path.append(child)
            while not sim.terminated:
                legal = sim.legal_actions()
                sim.step(int(legal[self.rng.integers(len(legal))]))
            for n in path:
                n.visits += 1
                n.score += 0.5 if sim.winner < 0 else float(sim.winner == n.mover)
        return int(max(root.children.items(), key=lambda kv: kv[1].visits)[0])
