"""Private places in the state dir: every directory 0700 and every file 0600
whatever the umask, and never a symlink followed in their place (a planted
link would send the journal, a run lock, the night's recording or an
incident's bundle, logs and all, wherever it points).

The state dir itself is the operator's (named in the config): it may be a
symlink to wherever they keep it, and one that exists wider than 0700 (made
by an older sparktui under the umask, or by hand) is tightened to 0700, as is
every directory under it. Directories above it that are missing are made 0700
(the mode the XDG Base Directory spec asks for a directory it has to create);
ones that exist are never changed. Below the state dir nothing is followed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from sparktui.core.errors import OperatorError

DIR_MODE = 0o700
FILE_MODE = 0o600


class NotPrivate(OperatorError, OSError):
    """A place in the state dir that is not what it must be (a symlink or a
    file where a directory belongs, a symlink or a device where a file
    belongs) or cannot be made private: one line naming the path and what to
    do, never followed, never a traceback."""


def make_dirs(path: Path) -> None:
    """``path`` and its missing parents, each one this makes 0700; one that
    exists is left as it is (never chmod-ed: it is not ours to change)."""
    missing: list[Path] = []
    while not os.path.lexists(path):
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:  # made meanwhile by someone else: theirs
            continue
        os.chmod(folder, DIR_MODE)  # ours: 0700 even under a umask such as 0277


def private_dir(root: Path, *subdirs: str) -> Path:
    """``root`` (the state dir, or another directory of the product's own)
    made if need be, then each of ``subdirs`` in turn inside it; returns the
    innermost. Every one is a directory, 0700 whatever the umask. ``root``
    may be a symlink to a directory (the operator's choice); in place of a
    subdir a symlink, or anything but a directory, is refused (`NotPrivate`),
    never followed. Each level is opened and changed through its descriptor,
    so what is checked is what is changed."""
    make_dirs(root)
    fd = _open_dir(root, root, follow=True)
    path = root
    try:
        for name in subdirs:
            path = path / name
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, DIR_MODE, dir_fd=fd)
            inner = _open_dir(path, name, dir_fd=fd)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return path


def _open_dir(path: Path, name: Path | str, *, dir_fd: int | None = None,
              follow: bool = False) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
        link = not follow and stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
        raise NotPrivate(f"{path}: a symlink where a directory belongs: refused, not "
                         f"followed -> remove it" if link else
                         f"{path}: not a directory -> remove it or point [console] "
                         f"state_dir elsewhere") from None
    try:
        _tighten(fd, path, DIR_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _tighten(fd: int, path: Path, mode: int) -> None:
    have = stat.S_IMODE(os.fstat(fd).st_mode)
    if have == mode:
        return
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        raise NotPrivate(f"{path}: mode {have:04o} cannot be made {mode:04o} "
                         f"({exc.strerror}) -> make it this user's or point [console] "
                         f"state_dir elsewhere") from None


def open_private(path: Path, flags: int) -> int:
    """``path`` opened with ``flags`` (``O_CREAT`` added): made 0600, and an
    existing one tightened to 0600, whatever the umask (``O_CREAT``'s mode is
    masked by it); a symlink in its place is refused (`NotPrivate`), never
    followed, and so is anything but a regular file. ``O_EXCL`` in ``flags``
    still raises FileExistsError."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise NotPrivate(f"{path}: a symlink where a file belongs: refused, not followed "
                         f"-> remove it") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotPrivate(f"{path}: not a regular file -> remove it")
        _tighten(fd, path, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd
