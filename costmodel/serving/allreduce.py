"""Decode-time tensor-parallel all-reduce: latency and bandwidth terms per algorithm, chosen per
message size and engine as the engines choose.

A decode step's TP all-reduces are small (batch x hidden x 2 bytes: 512 KiB for 32 tokens of an
8192-wide model), so their latency, not the ring's bandwidth, sets their time. Serving engines
therefore run their own NVLink kernels instead of NCCL's ring for these sizes:

- **one-shot**: every GPU reads the whole buffer of each of its n − 1 peers over NVLink (P2P loads
  of IPC-mapped buffers) and reduces locally: one kernel, a flag barrier before and after,
  (n − 1)·S bytes into each GPU (vLLM ``csrc/custom_all_reduce.cuh`` ``cross_device_reduce_1stage``;
  TensorRT-LLM ``customAllReduceKernels.cu`` ONESHOT).
- **two-shot**: reduce-scatter then all-gather through the same peer buffers: 2(n − 1)/n·S bytes,
  one barrier more (``cross_device_reduce_2stage``; TensorRT-LLM TWOSHOT).
- **ring**: NCCL's ring with its fastest protocol (``costmodel.comm.all_reduce``, NCCL
  ``src/graph/tuning.cc`` latencies): 2(n − 1) hops of latency.

Which one runs: vLLM and SGLang pick one-shot below 512 KiB on <= 4 GPUs (256 KiB on <= 8, always
on 2) and two-shot above, up to their 8 MiB registered buffer, then NCCL (vLLM
``custom_all_reduce.cuh`` ``allreduce()`` thresholds and ``CustomAllreduce.max_size``; SGLang's
``sgl-kernel`` port keeps them). TensorRT-LLM's AUTO strategy looks up, per SM generation (Hopper
and earlier as SM90, Blackwell as SM100), TP size, hidden size and token count, the strategy its
own sweep measured fastest: one-shot, two-shot or NCCL, never NVLS
(``cpp/tensorrt_llm/common/customAllReduceUtils.h`` ``AllReduceBestStrategyTableSM90`` /
``SM100``), summarised in :data:`TRTLLM_LOOKUP`. A group spanning nodes runs NCCL's hierarchical
ring.

Where vLLM's ``fuse_allreduce_rms`` pass runs (``EngineDefaults.flashinfer_allreduce_fusion``), the all-reduce and
the residual add and RMSNorm after it are one FlashInfer kernel, TensorRT-LLM's Lamport one-shot (two-shot above
a size), up to vLLM's per-GPU and TP-size caps (:data:`FI_FUSION_MAX_MB`, :func:`lamport_one_shot`).
"""

from __future__ import annotations

import math

from costmodel.comm import all_reduce, place_group
from costmodel.serving.engines import EngineDefaults
from costmodel.specs import ClusterSpec

ACTIVATION_BYTES = 2.0
"""Bytes per activation element between layers (bf16)."""
GRAPH_LAUNCH_SAVING_US = 0.4
"""What replaying a kernel from a CUDA graph saves over a stream launch: NVIDIA's "Getting Started
with CUDA Graphs" (A. Gray, NVIDIA developer blog, 2019) measures 3.4 µs per short kernel from a
graph against 3.8 µs from a stream; the rest of a short kernel's time is its ramp-up and tail."""


def kernel_floor_us(cluster: ClusterSpec) -> float:
    """Time one decode kernel costs beyond its bytes and FLOPs, µs: the cluster's per-kernel launch
    and tail (``EfficiencySpec.kernel_overhead_us``, the training model's constant) less what a
    CUDA-graph replay saves (:data:`GRAPH_LAUNCH_SAVING_US`)."""
    return max(cluster.efficiency.kernel_overhead_us - GRAPH_LAUNCH_SAVING_US, 0.0)


TRTLLM_LOOKUP: dict[tuple[int, int], tuple[int, int]] = {
    (90, 2): (8 * 2**20, 8 * 2**20), (90, 4): (2 * 2**20, 4 * 2**20), (90, 8): (2**19, 2**19),
    (100, 2): (8 * 2**20, 8 * 2**20), (100, 4): (2 * 2**20, 4 * 2**20), (100, 8): (2 * 2**20, 4 * 2**20),
}
"""(SM generation, TP size) -> (elements below which TensorRT-LLM's AUTO all-reduce runs one-shot,
elements below which it runs two-shot; NCCL above): where the RESIDUAL_RMS_NORM rows of its
``AllReduceBestStrategyTableSM90`` / ``SM100`` (``customAllReduceUtils.h``; strategy 4 ONESHOT,
5 TWOSHOT, 0 NCCL) switch, read at token count x hidden size for hidden sizes 4096 and 8192 (on
8 Hopper GPUs a 32 x 8192 message is the last one-shot and 64 x 8192 goes to NCCL). TP sizes
between the table's 2, 4 and 8 take the row below, as its log2 index does."""
VLLM_CUSTOM_MAX_BYTES = 8 * 2**20
"""vLLM's custom all-reduce buffer: messages above 8 MiB go to NCCL
(``vllm/distributed/device_communicators/custom_all_reduce.py``, ``max_size=8192 * 1024``)."""


FI_FUSION_MAX_MB: dict[tuple[int, int], tuple[float, float]] = {
    (90, 2): (64.0, 32.0), (90, 4): (2.0, 2.0), (90, 8): (0.5, 0.5),
    (100, 2): (64.0, 32.0), (100, 4): (32.0, 4.0), (100, 8): (1.0, 1.0),
}
"""(SM generation, TP size) -> (MiB up to which vLLM's ``fuse_allreduce_rms`` pass runs an all-reduce through
FlashInfer's fused TensorRT-LLM all-reduce + residual add + RMSNorm, MiB up to which it runs the one-shot kernel;
two-shot between): vLLM ``vllm/compilation/passes/fusion/allreduce_rms_fusion.py`` ``FI_ALLREDUCE_FUSION_MAX_SIZE_MB``
and ``_FI_ALLREDUCE_ONE_SHOT_MAX_SIZES_MB`` (v0.16 API docs). Other TP sizes are not fused
(``FI_SUPPORTED_WORLD_SIZES`` 2, 4, 8)."""


def _link_seconds(cluster: ClusterSpec, nbytes: float) -> float:
    """Seconds for ``nbytes`` over one GPU's NVLink at the cluster's achieved fraction."""
    return nbytes / (cluster.intra_node_bandwidth_gbps * 1e9 * cluster.efficiency.intra_node)


def _barrier(cluster: ClusterSpec) -> float:
    """One flag barrier across the group's GPUs: each GPU stores its flag into every peer
    (``st.release.sys``) and spins until every peer's flag has arrived (``ld.acquire.sys``), a round
    trip over NVLink, twice the cluster's one-hop ``intra_node_latency_us`` (vLLM
    ``custom_all_reduce.cuh`` ``barrier_at_start`` / ``barrier_at_end``)."""
    return 2.0 * cluster.intra_node_latency_us * 1e-6


def one_shot(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """One kernel, barriers at its start and end, (n − 1)·S read into each GPU."""
    return kernel_floor_us(cluster) * 1e-6 + 2 * _barrier(cluster) + _link_seconds(cluster, (n - 1) * nbytes)


def two_shot(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """Reduce-scatter then all-gather in one kernel, three barriers, 2(n − 1)/n·S per GPU."""
    return kernel_floor_us(cluster) * 1e-6 + 3 * _barrier(cluster) + _link_seconds(cluster, 2 * (n - 1) / n * nbytes)


def lamport_one_shot(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """TensorRT-LLM's fused one-shot all-reduce (FlashInfer ``trtllm_allreduce_fusion``, kernel
    ``allreduce_fusion_kernel_oneshot_lamport``): each GPU pushes its buffer into every peer's IPC buffer with plain
    stores and a -0.0 sentinel marks an element not yet arrived, so readers spin on the data itself: one kernel, one
    NVLink hop of latency (``intra_node_latency_us``) and no flag barriers, (n − 1)·S written by each GPU; the
    residual add and RMSNorm run in the same kernel (vllm-project/vllm issue 55261, description of the TensorRT-LLM
    kernel; FlashInfer ``csrc/trtllm_allreduce_fusion.cu``)."""
    return kernel_floor_us(cluster) * 1e-6 + cluster.intra_node_latency_us * 1e-6 + _link_seconds(cluster, (n - 1) * nbytes)


def lamport_two_shot(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """The fused two-shot variant: a Lamport reduce-scatter then all-gather, two hops, 2(n − 1)/n·S per GPU."""
    return kernel_floor_us(cluster) * 1e-6 + 2.0 * cluster.intra_node_latency_us * 1e-6 + \
        _link_seconds(cluster, 2 * (n - 1) / n * nbytes)


def fi_fusion_sizes(cluster: ClusterSpec, n: int) -> tuple[float, float] | None:
    """(fused bytes cap, one-shot bytes cap) of vLLM's FlashInfer all-reduce fusion on ``n`` GPUs of one node
    (:data:`FI_FUSION_MAX_MB`; Blackwell where the GPU takes MX block-scaled FP8, else Hopper), None where it does not
    run (a TP size outside 2, 4, 8, or a group spanning nodes)."""
    if n > cluster.gpus_per_node:
        return None
    caps = FI_FUSION_MAX_MB.get((100 if cluster.gpu.mxfp8 else 90, n))
    return None if caps is None else (caps[0] * 2**20, caps[1] * 2**20)


def fi_fused(cluster: ClusterSpec, n: int, nbytes: float) -> bool:
    """vLLM runs this all-reduce of ``nbytes`` over ``n`` GPUs fused with the residual add and RMSNorm."""
    caps = fi_fusion_sizes(cluster, n)
    return caps is not None and nbytes <= caps[0]


def nccl_ring(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """NCCL's ring (fastest protocol), inside or across nodes (``costmodel.comm.all_reduce``)."""
    return all_reduce(cluster, place_group(n, 1, cluster.gpus_per_node), nbytes)


def algorithms(cluster: ClusterSpec, engine: str, n: int, nbytes: float, fi_fusion: bool = False) -> dict[str, float]:
    """Seconds of each all-reduce algorithm ``engine`` may run for ``nbytes`` over ``n`` GPUs; ``fi_fusion``: the
    engine fuses it with the next RMSNorm through FlashInfer where the size allows (:func:`fi_fused`)."""
    if n > cluster.gpus_per_node:
        return {"ring": nccl_ring(cluster, n, nbytes)}
    if engine == "trtllm":
        return trtllm_algorithm(cluster, n, nbytes)
    caps = fi_fusion_sizes(cluster, n) if fi_fusion else None
    if caps is not None and nbytes <= caps[0]:  # fused (:func:`fi_fused`): one-shot up to its own cap
        if nbytes <= caps[1]:
            return {"fi-one-shot": lamport_one_shot(cluster, n, nbytes)}
        return {"fi-two-shot": lamport_two_shot(cluster, n, nbytes)}
    if nbytes > VLLM_CUSTOM_MAX_BYTES:
        return {"ring": nccl_ring(cluster, n, nbytes)}
    if n == 2 or (n <= 4 and nbytes < 512 * 1024) or (n <= 8 and nbytes < 256 * 1024):
        return {"one-shot": one_shot(cluster, n, nbytes)}
    return {"two-shot": two_shot(cluster, n, nbytes)}


def trtllm_algorithm(cluster: ClusterSpec, n: int, nbytes: float) -> dict[str, float]:
    """The algorithm TensorRT-LLM's AUTO strategy looks up for ``nbytes`` of bf16 over ``n`` GPUs
    (:data:`TRTLLM_LOOKUP`; Blackwell where the GPU takes MX block-scaled FP8, else SM90)."""
    sm = 100 if cluster.gpu.mxfp8 else 90
    size = 2 ** min(3, max(1, int(math.log2(n))))
    one_below, two_below = TRTLLM_LOOKUP[(sm, size)]
    elements = nbytes / ACTIVATION_BYTES
    if elements < one_below:
        return {"one-shot": one_shot(cluster, n, nbytes)}
    if elements < two_below:
        return {"two-shot": two_shot(cluster, n, nbytes)}
    return {"ring": nccl_ring(cluster, n, nbytes)}


def choose(cluster: ClusterSpec, engine: str, n: int, nbytes: float, fi_fusion: bool = False) -> tuple[str, float]:
    """(algorithm, seconds) of the all-reduce ``engine`` runs: vLLM / SGLang by their size
    thresholds, TensorRT-LLM by its tuned lookup table (see the module docstring); vLLM's FlashInfer
    fusion where ``fi_fusion``."""
    found = algorithms(cluster, engine, n, nbytes, fi_fusion)
    name = min(found, key=lambda key: found[key])
    return name, found[name]


def decode_all_reduce(cluster: ClusterSpec, engine: str, tp: int, tokens: float, hidden: int,
                      fi_fusion: bool = False) -> float:
    """Seconds of one TP all-reduce of ``tokens`` x ``hidden`` bf16 activations as ``engine`` runs it."""
    if tp <= 1 or tokens <= 0:
        return 0.0
    return choose(cluster, engine, tp, tokens * hidden * ACTIVATION_BYTES, fi_fusion)[1]


def fuses_add_norm(cluster: ClusterSpec, engine: EngineDefaults, tp: int, attention_dp: bool, hidden: int,
                   tokens: float | None = None) -> bool:
    """A decode layer's two TP all-reduces also add the residual and apply the next RMSNorm: the engine always fuses
    them (``EngineDefaults.fused_allreduce_norm``) or its FlashInfer fusion takes the message of ``tokens`` x
    ``hidden`` activations on this GPU (``EngineDefaults.flashinfer_allreduce_fusion``, :func:`fi_fused`; None: a
    small step). Not under attention DP, whose MoE layers gather and scatter instead."""
    if tp <= 1 or attention_dp:
        return False
    if engine.fused_allreduce_norm:
        return True
    nbytes = (tokens or 1.0) * hidden * ACTIVATION_BYTES
    return engine.flashinfer_allreduce_fusion and fi_fused(cluster, tp, nbytes)
