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
"""

from __future__ import annotations

import math

from costmodel.comm import all_reduce, place_group
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


def nccl_ring(cluster: ClusterSpec, n: int, nbytes: float) -> float:
    """NCCL's ring (fastest protocol), inside or across nodes (``costmodel.comm.all_reduce``)."""
    return all_reduce(cluster, place_group(n, 1, cluster.gpus_per_node), nbytes)


def algorithms(cluster: ClusterSpec, engine: str, n: int, nbytes: float) -> dict[str, float]:
    """Seconds of each all-reduce algorithm ``engine`` may run for ``nbytes`` over ``n`` GPUs."""
    if n > cluster.gpus_per_node:
        return {"ring": nccl_ring(cluster, n, nbytes)}
    if engine == "trtllm":
        return trtllm_algorithm(cluster, n, nbytes)
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


def choose(cluster: ClusterSpec, engine: str, n: int, nbytes: float) -> tuple[str, float]:
    """(algorithm, seconds) of the all-reduce ``engine`` runs: vLLM / SGLang by their size
    thresholds, TensorRT-LLM by its tuned lookup table (see the module docstring)."""
    found = algorithms(cluster, engine, n, nbytes)
    name = min(found, key=lambda key: found[key])
    return name, found[name]


def decode_all_reduce(cluster: ClusterSpec, engine: str, tp: int, tokens: float, hidden: int) -> float:
    """Seconds of one TP all-reduce of ``tokens`` x ``hidden`` bf16 activations as ``engine`` runs it."""
    if tp <= 1 or tokens <= 0:
        return 0.0
    return choose(cluster, engine, tp, tokens * hidden * ACTIVATION_BYTES)[1]
