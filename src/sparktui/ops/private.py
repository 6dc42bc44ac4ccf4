"""Private places in the state dir: a directory 0700 whatever the umask, and
never a symlink followed in its place (a planted link would send the night's
recording or an incident's bundle, logs and all, wherever it points)."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path


def private_dir(path: Path) -> None:
    """``path`` a real directory, 0700 whatever the umask; a symlink (or
    anything else) in its place is refused, never followed."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{path}: not a directory (a symlink is not followed)")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
