"""Atomic file writes shared by the library (``planner.save_plan``) and the command line (``-o``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str, executable: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it and a rename, so that readers see
    the old file or the new one, never a partial one. On failure nothing is left behind and the
    ``OSError`` propagates for the caller to word. The new file gets the usual mode (0666, or 0777
    when ``executable``, less the umask) instead of mkstemp's 0600."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, (0o777 if executable else 0o666) & ~umask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
