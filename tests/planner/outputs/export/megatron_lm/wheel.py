"""Megatron-LM's argument code (``megatron/training``), fetched from the package registry at test time.

No registry distribution for Python 3.11 ships ``megatron/training``: megatron-core <= 0.16.1 holds
``megatron/core`` only, and from 0.17.0 the wheel holds ``megatron/training`` too but requires
Python >= 3.12. pip itself downloads that exact wheel (``--python-version 3.12``: pip fetches a
wheel built for another Python without installing it), its SHA-256 is checked, and
``megatron/training`` is extracted into a cache outside the repository (``$XDG_CACHE_HOME/meshplan``,
else ``~/.cache/meshplan``). Nothing of Megatron-LM is kept in this repository.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "0.17.0"
WHEEL = f"megatron_core-{VERSION}-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl"
SHA256 = "0cbacf043603f9dc2735310e1b1dcd5c076c02caab13849c2d2fe6a99cbea4f6"
"""SHA-256 of :data:`WHEEL` as the registry serves it (checked before anything is extracted)."""
PREFIX = "megatron/training/"


class FetchError(RuntimeError):
    """The wheel could not be fetched or is not the expected file (the test is skipped with this reason)."""


def cache_root() -> Path:
    """Where fetched engine code lives: ``$XDG_CACHE_HOME/meshplan`` or ``~/.cache/meshplan``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "meshplan" / f"megatron-core-{VERSION}"


def training_root() -> Path:
    """The folder holding ``megatron/training`` extracted from the checked wheel (fetched once)."""
    root = cache_root()
    if (root / "extracted" / PREFIX / "arguments.py").is_file():
        return root / "extracted"
    wheel = _download(root)
    _extract(wheel, root / "extracted")
    return root / "extracted"


def _download(root: Path) -> Path:
    wheel = root / WHEEL
    if not wheel.is_file():
        root.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", f"megatron-core=={VERSION}", "--no-deps", "--only-binary=:all:",
               "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64", "--disable-pip-version-check", "-q", "-d", str(root)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as err:
            raise FetchError(f"pip download megatron-core=={VERSION} failed: {err}") from None
        if done.returncode != 0 or not wheel.is_file():
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise FetchError(f"pip download megatron-core=={VERSION} failed (no registry?): {last}")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    if digest != SHA256:
        wheel.unlink()
        raise FetchError(f"{WHEEL} has SHA-256 {digest}, expected {SHA256}")
    return wheel


def _extract(wheel: Path, target: Path) -> None:
    """``megatron/training/**`` of the wheel into ``target``, atomically (a half-written folder is never used)."""
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix="extracting-"))
    try:
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith(PREFIX) and not name.endswith("/") and ".." not in name.split("/"):
                    archive.extract(name, staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
