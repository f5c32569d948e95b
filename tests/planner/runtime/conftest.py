"""FSDP2's view-output warning is an error in every runtime test (:data:`equality.VIEW_WARNING`; the
spawned workers set the same filter themselves). The runtime tests' helper modules (``plan_helpers``, ``equality``, ``custom_model``) import by name:
pytest runs with ``--import-mode=importlib``, which puts no test folder on ``sys.path``, and the
spawned workers unpickle ``equality._worker`` by module name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = str(Path(__file__).parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def pytest_collection_modifyitems(items: list) -> None:
    """Turn FSDP2's "returned a view tensor" warning into an error for the tests of this folder."""
    from equality import VIEW_WARNING

    for item in items:
        if str(item.path).startswith(HERE):
            item.add_marker(pytest.mark.filterwarnings(f"error:{VIEW_WARNING}:UserWarning"))


@pytest.fixture()
def one_rank_world() -> Iterator[None]:
    """A one-process gloo world in this process, destroyed after the test."""
    import os

    import torch.distributed as dist

    from equality import free_port

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
