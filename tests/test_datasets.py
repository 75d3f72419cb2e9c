"""The game-record datasets that come with the repository (``experiments/data/*/``).

Every file must read back with no malformed game, hold what its header says it holds,
be the chunk its name says (the seed that makes it again), and the dataset's README
must state what is really there.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from gomoku_jax import records

REPO = pathlib.Path(__file__).parents[1]
DATA = REPO / "experiments" / "data"
DATASETS = sorted(p for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []
# File names of the generator's chunks: <agent>_s<seed>.jsonl.gz.
CHUNK = re.compile(r"^(?P<agent>[a-z0-9-]+)_s(?P<seed>\d+)\.jsonl\.gz$")


def _config_files(pattern: str) -> list[pathlib.Path]:
    """What a config's ``data.paths`` entry names, read from the repository root."""
    return sorted(REPO.glob(pattern))


def test_configs_read_the_documented_part_of_the_dataset():
    root = REPO / "experiments" / "configs"
    folder = DATA / "gomokubot2_9x9"
    every = sorted(folder.glob("*.jsonl.gz"))
    imitation = json.loads((root / "imitation_9x9_cpu.json").read_text())["data"]["paths"]
    assert [f for p in imitation for f in _config_files(p)] == every
    # the pipeline's first stage: the first five files, 1,000 games
    pipeline = json.loads((root / "pipeline_9x9_cpu.json").read_text())
    files = [f for p in pipeline["imitation"]["data"]["paths"] for f in _config_files(p)]
    assert files == every[:5] and len(files) == 5
    assert sum(records.read_header(f)["metadata"]["games"] for f in files) == 1000


def test_the_repository_ships_the_imitation_dataset():
    # (the check below is parametrized over the folders: without one it would not run)
    assert "gomokubot2_9x9" in [p.name for p in DATASETS]


def contents_line(games: list[records.Game], files: int) -> str:
    """The README's contents line for these games."""
    wins = {"black": 0, "white": 0, "draw": 0}
    for g in games:
        wins[records.WINNER_NAMES[g.winner]] += 1
    mean = sum(len(g.moves) for g in games) / len(games)
    return (f"Contents: {len(games):,} games in {files} files; black won {wins['black']:,}, "
            f"white {wins['white']:,}, drawn {wins['draw']:,}; {mean:.1f} moves a game on "
            "average.")


@pytest.mark.parametrize("folder", DATASETS, ids=[p.name for p in DATASETS])
def test_dataset_files_are_whole_and_as_documented(folder):
    files = sorted(folder.glob("*.jsonl.gz"))
    assert files, f"{folder} holds no records files"
    assert sorted(folder.iterdir()) == sorted(files + [folder / "README.md"]), (
        f"{folder} holds files other than its records and README.md")
    games, seeds = [], set()
    for path in files:
        m = CHUNK.match(path.name)
        assert m, f"{path.name} is not named <agent>_s<seed>.jsonl.gz"
        meta = records.read_header(path)["metadata"]
        assert (meta["black"], meta["white"]) == (m["agent"], m["agent"]), path.name
        assert meta["seed"] == int(m["seed"]), path.name
        assert meta["generator"] == "experiments.generate_records", path.name
        seeds.add(meta["seed"])
        got = records.read_records(path, on_error="raise")  # replays every game
        played = meta["games"] - meta["forfeits_left_out"]
        assert len(got) == played, f"{path.name}: the header says {played} games"
        index = []  # the games' numbers in the run (forfeited ones are left out)
        for g in got:
            assert (g.size, g.k, g.rule) == (9, 5, "freestyle")
            assert (g.black, g.white) == (meta["black"], meta["white"])
            assert g.opening == meta["opening_stones"]
            prefix = f"experiments.generate_records seed={meta['seed']} game="
            assert g.source.startswith(prefix), g.source
            index.append(int(g.source[len(prefix):]))
            assert g.winner is not None, f"{path.name} game {index[-1]} is unfinished"
        assert index == sorted(set(index)) and index[-1] < meta["games"], path.name
        games += got
    assert len(seeds) == len(files)
    readme = (folder / "README.md").read_text()
    want = contents_line(games, len(files))
    assert want in readme.replace("\n", " "), (
        f"{folder / 'README.md'} does not state the contents; it should read:\n{want}")


def test_the_generator_makes_the_shipped_games_again():
    """The first games of the first file, played again by the generator with the seed
    in the header: the same moves (a change to the agents' search that alters their
    play shows here, not as a silently different dataset)."""
    from experiments.generate_records import _make, play_game

    path = sorted((DATA / "gomokubot2_9x9").glob("*.jsonl.gz"))[0]
    meta = records.read_header(path)["metadata"]
    shipped = records.read_records(path, on_error="raise")[:2]
    env, black, white = _make(9, 5, "freestyle", meta["black"], meta["white"])
    for i, game in enumerate(shipped):
        again = play_game(env, black, white, meta["seed"], i, meta["opening_stones"])
        assert again.forfeit is None
        assert [int(a) for a in again.moves] == [int(a) for a in game.moves], f"game {i}"
