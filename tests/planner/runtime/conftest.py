"""The runtime tests' helper modules (``plan_helpers``, ``equality``, ``custom_model``) import by name:
pytest runs with ``--import-mode=importlib``, which puts no test folder on ``sys.path``, and the
spawned workers unpickle ``equality._worker`` by module name."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
