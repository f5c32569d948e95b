"""Run a sweep's chunks as Ray tasks (``pip install 'meshplan[ray]'``), for sweeps that outgrow one
machine. Each chunk is one ``ray.remote`` call of :func:`planner.capacity.runner.run_chunk`, the same
function the local runs call, so the outcomes are the same; the caller sorts them into task order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from planner.errors import InputError


def require_ray() -> Any:
    """The ``ray`` module, or an InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray, which is not installed: pip install 'meshplan[ray]' (or drop --ray to run on local processes)") from None
    return ray


def run_on_ray(run_chunk: Callable[[Any, list[Any]], list[Any]], job: Any, parts: Sequence[Sequence[Any]], address: str) -> list[Any]:
    """Outcomes of every chunk (``run_chunk(job, chunk)``, the runner's own function), run on the Ray
    cluster at ``address`` (``auto``, ``local`` or ``ray://host:port``)."""
    ray = require_ray()
    try:
        ray.init(address=None if address == "local" else address, ignore_reinit_error=True, log_to_driver=False)
    except ConnectionError as err:
        raise InputError(f"--ray {address}: cannot connect to a Ray cluster there ({err}); start one with `ray start --head` or give its address") from None
    remote = ray.remote(run_chunk)
    refs = [remote.remote(job, list(part)) for part in parts]
    return [outcome for chunk in ray.get(refs) for outcome in chunk]
