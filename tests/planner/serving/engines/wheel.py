"""An engine's own Python modules, fetched from the package registry at test time (never kept here).

As ``tests/planner/outputs/export/megatron_lm/wheel.py`` does for Megatron-LM: pip downloads one exact
wheel (``--no-deps``: nothing is installed), its SHA-256 is checked against the value recorded in
:class:`Wheel`, and only the files under the wanted folders are extracted into a cache outside the
repository (``$XDG_CACHE_HOME/meshplan``, else ``~/.cache/meshplan``), atomically.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


class FetchError(RuntimeError):
    """The wheel could not be fetched or is not the expected file (the tests skip with this reason)."""


@dataclass(frozen=True)
class Wheel:
    """One registry wheel and the folders of it a test needs."""

    dist: str
    version: str
    filename: str
    sha256: str
    """SHA-256 of ``filename`` as the registry serves it (the registry's simple index lists it)."""
    members: tuple[str, ...]
    """Folders or files inside the wheel to extract (e.g. ``sglang/srt/``)."""
    suffixes: tuple[str, ...] = ()
    """Extract only files whose names end so (``.py``: the Python code, not the compiled kernels); all when empty."""

    def root(self) -> Path:
        """The folder holding the extracted members (fetched and extracted once)."""
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "meshplan" / f"{self.dist}-{self.version}"
        done = cache / "extracted" / ".complete"
        if not done.is_file():
            _extract(self, _download(self, cache), cache / "extracted")
        return cache / "extracted"


def _download(wheel: Wheel, cache: Path) -> Path:
    path = cache / wheel.filename
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"{wheel.dist}=={wheel.version}", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(cache)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise FetchError(f"pip download {wheel.dist}=={wheel.version} failed: {err}") from None
        if done.returncode != 0 or not path.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise FetchError(f"pip download {wheel.dist}=={wheel.version} failed (no registry?): {last}")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != wheel.sha256:
        path.unlink()
        raise FetchError(f"{wheel.filename} has SHA-256 {digest}, expected {wheel.sha256}")
    return path


def _extract(wheel: Wheel, path: Path, target: Path) -> None:
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix="extracting-"))
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                wanted = name.startswith(wheel.members) and (not wheel.suffixes or name.endswith(wheel.suffixes))
                if wanted and not name.endswith("/") and ".." not in name.split("/"):
                    archive.extract(name, staging)
        (staging / ".complete").write_text(wheel.filename)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
