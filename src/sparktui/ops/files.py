"""Files in the state dir and recipes replaced whole: a reader sees the old
file or the new one, never half of either, and a crash or a full disk leaves
no temporary file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def replace_file(path: Path, text: str, mode: int) -> None:
    """Write `text` beside `path` with `mode`, fsync, and swap it in atomically.
    The new file is created exclusively (``mkstemp``) and renamed over `path`:
    a symlink planted at either name is never followed."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
