"""One run per checkpoint at a time.

A run holds an exclusive `flock` on `<checkpoint>/../<name>.lock` for its whole life (for a
checkpoint on object storage, a file in the home: `RunoffConfig.lock_path`). The kernel
drops the lock when the holder dies (even by SIGKILL), so a stale lock is taken over for free;
the file itself records who holds it so that a refused run can name the holder.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from core.errors import ConfigError, LockHeldError

logger = logging.getLogger(__name__)


def lock_path(checkpoint_dir: Path) -> Path:
    """The lock lives beside the checkpoint so that deleting a checkpoint keeps the lock."""
    return checkpoint_dir.parent / f"{checkpoint_dir.name}.lock"


def local_lock_file(location: object, name: str) -> Path:
    """The lock file `name` of a folder: inside it when it is local; for a folder on object
    storage (where no lock can be held), a file of this user's private lock folder
    (`private_lock_dir`) named after the folder's URI, shared by every runoff process the user
    runs on this machine whatever its home. Such a lock keeps out runs of this user on this
    machine only (README, "Scaling out")."""
    if isinstance(location, Path):
        return location / name
    protocol, path = getattr(location, "protocol", ""), getattr(location, "path", str(location))
    return private_lock_dir() / protocol / path.strip("/") / name


def private_lock_dir() -> Path:
    """`<temporary folder>/runoff-locks-<uid>`: created mode 0700, and refused unless it is a
    real folder that this user owns and nobody else may write. The temporary folder is shared:
    another user who made the folder first (with a symlink for a lock file) would otherwise
    have runoff truncate any file it can write."""
    folder = Path(tempfile.gettempdir()) / f"runoff-locks-{os.getuid()}"
    with suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    info = os.lstat(folder)
    problem = None
    if not stat.S_ISDIR(info.st_mode):
        problem = "is not a folder"
    elif info.st_uid != os.getuid():
        problem = f"belongs to uid {info.st_uid}, not to this user (uid {os.getuid()})"
    elif info.st_mode & 0o022:
        problem = f"may be written by others (mode {stat.S_IMODE(info.st_mode):o})"
    if problem:
        raise ConfigError(
            f"the lock folder {folder} {problem}: runoff keeps its object-storage locks there and "
            "will not use it; remove it (or point TMPDIR elsewhere) and run again"
        )
    return folder


def open_lock_file(path: Path) -> int:
    """Open (creating) the lock file `path`, never through a symbolic link."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(
                f"the lock file {path} is a symbolic link: runoff does not follow it (it would "
                "write where the link points); remove it and run again"
            ) from None
        raise


def read_holder(path: Path) -> dict[str, object]:
    try:
        holder = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def describe_holder(holder: dict[str, object]) -> str:
    if not holder:
        return "an unknown process"
    started = holder.get("started_at")
    since = (
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started))
        if isinstance(started, int | float)
        else "?"
    )
    return f"pid {holder.get('pid')} on {holder.get('host')} ({holder.get('what')}, since {since})"


@contextmanager
def checkpoint_lock(checkpoint_dir: object, what: str, lock: Path | None = None) -> Iterator[Path]:
    """Hold the lock of `checkpoint_dir` (the file `lock`, else the one beside a local
    checkpoint) or raise LockHeldError naming the live holder."""
    if lock is None and not isinstance(checkpoint_dir, Path):
        raise TypeError(f"{checkpoint_dir} is not a local folder: pass its lock file")
    path = lock or lock_path(checkpoint_dir)  # type: ignore[arg-type]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = describe_holder(read_holder(path))
            raise LockHeldError(
                f"{checkpoint_dir} is in use by {holder}: wait for it to finish "
                "(a lock left by a dead process is taken over automatically)"
            ) from None
        previous = read_holder(path)
        if previous:
            logger.info("taking over the lock left by %s", describe_holder(previous))
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "what": what,
            "started_at": time.time(),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        try:
            yield path
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def blocking_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (created if missing), waiting for the holder to end:
    for short critical sections shared by processes (unlike `checkpoint_lock`, which refuses)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_lock_file(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
