"""The imitation experiment's data step: the records folder is topped up in chunks and
reused, and ``--generate-only`` stops before training."""

import glob

import pytest

from experiments import imitation_strength
from gomoku_jax import records


def _games(folder):
    files = sorted(glob.glob(str(folder / "*.jsonl.gz")))
    return files, sum(len(records.read_records(f)) for f in files)


def test_generate_only_tops_the_folder_up_in_chunks_and_reuses_it(tmp_path, capsys):
    args = ["--records", str(tmp_path), "--depth", "1", "--chunk", "2", "--generate-only",
            "--no-progress", "--workdir", str(tmp_path / "never")]
    # two worker processes, kept for both chunks
    assert imitation_strength.main(["--games", "3", "--workers", "2", *args]) == 0
    files, games = _games(tmp_path)
    assert games == 3 and len(files) == 2  # a chunk of 2, then the 1 missing
    assert "3 games" in capsys.readouterr().out
    stamps = {f: open(f, "rb").read() for f in files}
    imitation_strength.main(["--games", "3", *args])  # enough already: nothing new
    assert _games(tmp_path) == (files, 3)
    imitation_strength.main(["--games", "4", *args])  # one more, in a new file
    more, games = _games(tmp_path)
    assert games == 4 and len(more) == 3 and set(files) < set(more)
    assert all(open(f, "rb").read() == stamps[f] for f in files)  # old files untouched
    assert not (tmp_path / "never").exists()  # no training
    header = records.read_header(more[-1])["metadata"]
    assert header["black"] == header["white"] == "gomokubot-1"
    capsys.readouterr()
    imitation_strength.main(["--games", "0", *args])  # none to make: those there are counted
    assert f"{tmp_path}: 4 games" in capsys.readouterr().out
    assert _games(tmp_path) == (more, 4)


def test_the_shipped_dataset_takes_only_its_own_bot(tmp_path):
    """Other games would break the shipped folder's one-bot, one-seed-per-file layout."""
    with pytest.raises(ValueError, match="gomokubot-2 only"):  # one line when run directly
        imitation_strength.main(["--depth", "3", "--generate-only", "--no-progress",
                                 "--workdir", str(tmp_path / "never")])
    assert imitation_strength.DATA.is_dir() and not (tmp_path / "never").exists()


@pytest.mark.parametrize("argv, why", [
    (["--opening-stones-data", "2"], "4-stone openings only"),
    (["--chunk", "100"], "files of 200 games"),
])
def test_the_shipped_dataset_takes_only_its_own_openings_and_files(argv, why, tmp_path,
                                                                    monkeypatch):
    """Games from other openings, or files of another size, would break what the shipped
    folder's README says of every game and file in it."""
    monkeypatch.setattr(imitation_strength, "generate",
                        lambda *a, **kw: pytest.fail("the games were started"))
    with pytest.raises(ValueError, match=why):
        imitation_strength.main(["--games", "20200", "--generate-only", "--no-progress",
                                 "--workdir", str(tmp_path / "never"), *argv])
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("argv, why", [
    (["--opponent", "bogus"], "unknown agent 'bogus'"),
    (["--set", "train.nope=1"], "nope"),
    # the match's openings: once only checked by the match, after the training
    (["--opening-stones", "9"], "--opening-stones must be at most 2"),
])
def test_a_bad_opponent_or_override_is_refused_before_the_games_and_training(
        argv, why, tmp_path, monkeypatch):
    monkeypatch.setattr(imitation_strength, "generate",
                        lambda *a, **kw: pytest.fail("the games were started"))
    with pytest.raises(ValueError, match=why):
        imitation_strength.main(["--records", str(tmp_path / "records"), "--games", "4",
                                 "--no-progress", "--workdir", str(tmp_path / "never"),
                                 *argv])
    assert not (tmp_path / "never").exists()


def test_records_that_name_a_file_are_refused_naming_the_option(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(ValueError, match="--records .*afile exists and is not a folder"):
        imitation_strength.main(["--records", str(tmp_path / "afile"), "--games", "4",
                                 "--generate-only", "--no-progress"])
