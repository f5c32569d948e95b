"""Offloading to host memory: optimizer states with a CPU optimizer step (DeepSpeed ZeRO-Offload,
Megatron ``--optimizer-cpu-offload``, FSDP2 ``CPUOffloadPolicy``) and stored activations
(Megatron ``--cpu-offloading-num-layers``), over the cluster's GPU-host link.

ZeRO-Offload (Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC
2021, §4): gradients go to the host as they are produced (overlapped with backward), the CPU runs
Adam on the fp32 master copy, and the updated bf16 parameters come back; the CPU step and the
parameter copy sit on the critical path (without the one-step delayed update). Activations are
copied out after each layer's forward and back before its backward, overlapped with compute.
"""

from __future__ import annotations

from costmodel.specs import ClusterSpec

HOST_DRAM_GBPS_PER_GPU = 40.0
"""Host memory bandwidth a CPU optimizer gets per GPU: a dual-socket host with about 300-400 GB/s of
DDR5 shared by 8 GPUs [assumption]; CPU Adam is memory-bound like the GPU one."""
CPU_ADAM_BYTES_PER_PARAM = 28.0
"""CPU Adam traffic per parameter: read the gradient, fp32 master, m, v, write them back (ZeRO-Offload's
CPU-Adam keeps all in fp32: 4 x 4 read + 3 x 4 write) [derived]."""


def host_seconds(cluster: ClusterSpec, nbytes: float) -> float:
    """Seconds to move ``nbytes`` one way over the GPU's host link."""
    bandwidth = cluster.host_link_bandwidth_gbps
    if nbytes <= 0 or bandwidth is None:
        return 0.0
    return nbytes / (bandwidth * 1e9)


def optimizer_offload_time(cluster: ClusterSpec, local_params: float, grad_bytes: int, param_bytes: int, backward_s: float) -> float:
    """Exposed time of an offloaded optimizer step for ``local_params`` parameters: the gradient copy
    beyond what hides behind the last backward, the CPU Adam step, and the parameter copy back."""
    grads = max(0.0, host_seconds(cluster, local_params * grad_bytes) - backward_s)
    cpu = CPU_ADAM_BYTES_PER_PARAM * local_params / (HOST_DRAM_GBPS_PER_GPU * 1e9)
    return grads + cpu + host_seconds(cluster, local_params * param_bytes)


def activation_offload_time(cluster: ClusterSpec, stored_bytes: float, compute_s: float) -> float:
    """Exposed time per micro-batch of copying a rank's stored activations out and back (2 x bytes
    over the link), hidden behind the rank's forward and backward compute up to ``compute_s``."""
    return max(0.0, 2 * host_seconds(cluster, stored_bytes) - compute_s)
