"""The epochs a node used survive its restart (and never go down)."""

from __future__ import annotations

from pathlib import Path

import pytest

from server.coordination.epochs import EpochStore


def test_an_epoch_saved_is_there_after_a_restart(tmp_path: Path) -> None:
    store = EpochStore(str(tmp_path), "eu", "a")
    assert store.load() == 0
    store.save(3)
    assert EpochStore(str(tmp_path), "eu", "a").load() == 3
    assert (tmp_path / "eu" / "a.epoch").read_text() == "3\n"
    assert EpochStore(str(tmp_path), "eu", "b").load() == 0  # each node its own


def test_a_lower_epoch_never_replaces_a_higher_one(tmp_path: Path) -> None:
    store = EpochStore(str(tmp_path), "eu", "a")
    store.save(7)
    store.save(2)
    assert EpochStore(str(tmp_path), "eu", "a").load() == 7
    assert not list((tmp_path / "eu").glob("*.tmp*"))  # no temporary file left behind


def test_a_damaged_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "eu").mkdir()
    (tmp_path / "eu" / "a.epoch").write_text("garbage")
    with pytest.raises(ValueError, match="does not hold an epoch") as info:
        EpochStore(str(tmp_path), "eu", "a").load()
    assert "\n" not in str(info.value)


def test_without_a_folder_epochs_live_in_memory() -> None:
    store = EpochStore("", "eu", "a")
    store.save(4)
    assert store.load() == 4 and store.path is None
