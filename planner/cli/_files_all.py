"""Writing a set of files all or nothing (``sweep --report``: a page, and every point's plan and
report in a folder beside it).

Every destination is checked before anything is written (as ``-o`` checks its path: a directory, a
device, a FIFO or a symbolic link in the way is refused). The files are then written into a hidden
staging folder beside the page and moved into place with ``os.replace`` (atomic per file, on the
same file system), the page last. When anything fails, the staging folder, the files already moved
(when they were new) and a folder this call created are removed again.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from planner.cli._common import UsageError, check_output


def check_folder(folder: Path, flag: str, anchor: Path) -> None:
    """Refuse a path for the files' folder that exists and is not a directory (a symbolic link too);
    the message names what the user gave (``flag anchor``), then the folder meshplan derived from it."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return
    except OSError as err:
        raise UsageError(f"{flag} {anchor}: cannot write its plans folder {folder}: {err.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{flag} {anchor}: cannot write its plans folder: {folder} is in the way and is not a directory; "
                         f"move it away or give {flag} another name")


def _check_generated(path: Path, anchor: Path, flag: str) -> None:
    """Refuse a file meshplan names itself (a plan beside the page) when a non-file is in its way or
    its folder is not writable; the message names what the user gave (``flag anchor``) and says
    what to move, since the user never typed ``path``."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    except OSError as err:
        raise UsageError(f"{flag} {anchor}: cannot write its plans folder {path.parent}: {err.strerror}") from None
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
        raise UsageError(f"{flag} {anchor}: cannot write its plans folder {path.parent}: {path.name} there is {kind}; "
                         f"move it away or give {flag} another name")
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"{flag} {anchor}: cannot write its plans folder {path.parent}: it is not writable; "
                         f"make it writable or give {flag} another name")


def write_all(files: dict[Path, str], anchor: Path, flag: str) -> None:
    """Write every ``path -> text`` of ``files`` (in order; each path is ``anchor``'s parent or a folder
    beside it) or none of them; a failure is a "cannot write" :class:`UsageError`."""
    folders = sorted({p.parent for p in files} - {anchor.parent})
    for folder in folders:
        check_folder(folder, flag, anchor)
    for path in files:
        if path == anchor:
            check_output(str(path), flag)
        elif path.parent.is_dir():
            _check_generated(path, anchor, flag)
    base = anchor.parent if str(anchor.parent) else Path(".")
    staging = Path(tempfile.mkdtemp(dir=base, prefix=f".{anchor.name}.", suffix=".tmp"))
    created = [f for f in folders if not f.exists()]
    moved: list[Path] = []
    try:
        staged = _stage(files, staging)
        for folder in created:
            folder.mkdir()
        for path, temp in staged.items():
            existed = path.exists()
            os.replace(temp, path)
            if not existed:
                moved.append(path)
    except OSError as err:
        _undo(moved, created)
        raise UsageError(f"{flag}: cannot write {anchor}: {err.strerror or err}; nothing was written") from None
    except BaseException:
        _undo(moved, created)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stage(files: dict[Path, str], staging: Path) -> dict[Path, Path]:
    """Each file's text written under ``staging``; returns destination -> staged file."""
    umask = os.umask(0)
    os.umask(umask)
    out = {}
    for i, (path, text) in enumerate(files.items()):
        temp = staging / f"{i}.tmp"
        temp.write_text(text, encoding="utf-8")
        os.chmod(temp, 0o666 & ~umask)
        out[path] = temp
    return out


def _undo(moved: list[Path], created: list[Path]) -> None:
    """Remove the new files already moved into place, then the folders this write created."""
    for path in moved:
        path.unlink(missing_ok=True)
    for folder in reversed(created):
        shutil.rmtree(folder, ignore_errors=True)
