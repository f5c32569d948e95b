"""The memory a plan leaves free on each GPU beyond its prediction: ``ClusterSpec.memory_headroom_gib``,
or by default :data:`DEFAULT_HEADROOM_FRACTION` of the GPU's memory. A plan fits only if its
prediction plus the headroom fits (:func:`usable_gib`: the search, ``estimate`` and the plan checks
compare the prediction with it). The headroom covers what the caching allocator reserves and does not
hand out (fragmentation: ``max_memory_reserved - max_memory_allocated``, torch.cuda memory
statistics) beyond the modelled allocator terms (``costmodel.rank_memory.rank_gpu_only_bytes``);
``meshplan profile`` measures it on the user's GPUs, ``--memory-headroom`` overrides it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from costmodel.specs import ClusterSpec

DEFAULT_HEADROOM_FRACTION = 0.0121
"""Default headroom as a share of the GPU's memory: the median over the bf16 steps of the H200 ground
truth (``profiles/memory_headroom.json``: fp32 master weights, autocast bf16, SDPA, fused AdamW, the
step the runtime runs in bf16 since issue 30) of ``max_memory_reserved - max_memory_allocated`` over
the GPU's 139.80 GiB: 0.81, 1.21, 0.80, 4.84 (full recomputation) and 1.53 %.
``tests/profiles/test_memory_headroom.py`` derives it again from that file."""


def headroom_gib(cluster: "ClusterSpec") -> float:
    """The cluster's ``memory_headroom_gib``, or :data:`DEFAULT_HEADROOM_FRACTION` of its GPU's memory."""
    if cluster.memory_headroom_gib is not None:
        return cluster.memory_headroom_gib
    return DEFAULT_HEADROOM_FRACTION * cluster.gpu.hbm_gib


def usable_gib(cluster: "ClusterSpec") -> float:
    """The memory a plan's prediction may fill on one GPU: its memory less :func:`headroom_gib`."""
    return cluster.gpu.hbm_gib - headroom_gib(cluster)


def with_headroom(cluster: "ClusterSpec", gib: float | None) -> "ClusterSpec":
    """``cluster`` with ``memory_headroom_gib`` set to ``gib`` (None: unchanged)."""
    return cluster if gib is None else cluster.model_copy(update={"memory_headroom_gib": float(gib)})
