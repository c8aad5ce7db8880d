"""Lock files in the shared temporary folder: a private folder per user, never a symlink."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.errors import ConfigError
from core.locking import blocking_lock, checkpoint_lock, local_lock_file

BUCKET_FOLDER = SimpleNamespace(protocol="s3a", path="/bucket/prefix/checkpoints/bronze")


@pytest.fixture
def temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The machine's temporary folder, for this test."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_object_storage_locks_live_in_a_folder_only_this_user_can_enter(temp: Path) -> None:
    lock = local_lock_file(BUCKET_FOLDER, "events.lock")
    folder = temp / f"runoff-locks-{os.getuid()}"
    assert lock == folder / "s3a" / "bucket" / "prefix" / "checkpoints" / "bronze" / "events.lock"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    with checkpoint_lock(BUCKET_FOLDER, "runoff bronze events", lock=lock):
        assert lock.is_file()


def test_a_lock_folder_another_user_made_is_refused(
    temp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    me = os.getuid()
    other = me + 1  # this process acts as another user; the folder is the real user's
    (temp / f"runoff-locks-{other}").mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: other)
    with pytest.raises(
        ConfigError, match=rf"belongs to uid {me}, not to this user \(uid {other}\)"
    ):
        local_lock_file(BUCKET_FOLDER, "events.lock")


@pytest.mark.parametrize("mode", [0o777, 0o720, 0o702])
def test_a_lock_folder_others_may_write_is_refused(temp: Path, mode: int) -> None:
    folder = temp / f"runoff-locks-{os.getuid()}"
    folder.mkdir()
    folder.chmod(mode)
    with pytest.raises(ConfigError, match=f"may be written by others \\(mode {mode:o}\\)"):
        local_lock_file(BUCKET_FOLDER, "events.lock")


def test_a_symlink_for_the_lock_folder_is_refused(temp: Path) -> None:
    elsewhere = temp / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    (temp / f"runoff-locks-{os.getuid()}").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="is not a folder"):
        local_lock_file(BUCKET_FOLDER, "events.lock")


def test_a_symlink_planted_as_the_lock_file_is_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    checkpoint = tmp_path / "checkpoints" / "bronze" / "events"
    checkpoint.mkdir(parents=True)
    planted = checkpoint.parent / "events.lock"
    planted.symlink_to(victim)
    with (
        pytest.raises(ConfigError, match=f"the lock file {planted} is a symbolic link"),
        checkpoint_lock(checkpoint, "runoff bronze events"),
    ):
        pass
    flush = tmp_path / "_pending" / ".lock"
    flush.parent.mkdir()
    flush.symlink_to(victim)
    with pytest.raises(ConfigError, match="is a symbolic link"), blocking_lock(flush):
        pass
    assert victim.read_text() == "keep me\n"
