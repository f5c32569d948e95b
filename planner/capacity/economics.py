"""What a plan costs to train on a token budget: time, GPU-hours, money and energy.

- time to train = steps · step time, steps = tokens needed / (batch · sequence) (``planner.capacity.batch``);
- GPU-hours = GPUs · time / 3600 h; cost = GPU-hours · the user's price per GPU-hour;
- energy = time · (GPUs · TDP · u + nodes · P_node), where u is the modelled utilisation (the share
  of the step the GPU runs compute kernels: (compute + recompute) / step time, from the estimate's
  time breakdown; communication, pipeline bubbles and the optimizer's memory-bound update count as
  idle) and P_node is the power a node draws besides its GPUs (CPUs, memory, NICs, fans), taken as
  the vendor's maximum system power minus its GPUs' TDP (an upper bound; :data:`NODE_OVERHEAD_W`).

The GPU's TDP comes from its profile (``profiles/gpus.json`` ``tdp_w``, with its source); a cluster
with no TDP or no known node overhead has no energy figure unless the user gives one.
"""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.specs import ClusterSpec

NODE_OVERHEAD_W: dict[str, tuple[float, str]] = {
    "a100-80gb": (3300.0, "NVIDIA DGX A100 datasheet: 6.5 kW maximum system power, minus 8 x 400 W GPU TDP"),
    "a100-40gb": (3300.0, "NVIDIA DGX A100 datasheet: 6.5 kW maximum system power, minus 8 x 400 W GPU TDP"),
    "h100-sxm": (4600.0, "NVIDIA DGX H100 datasheet: ~10.2 kW maximum system power, minus 8 x 700 W GPU TDP"),
    "h200": (4600.0, "NVIDIA DGX H200 datasheet: ~10.2 kW maximum system power, minus 8 x 700 W GPU TDP"),
    "h800": (4600.0, "HGX H800 taken as the DGX H100 chassis (~10.2 kW maximum, minus 8 x 700 W) [assumption]"),
    "b200": (6300.0, "NVIDIA DGX B200 datasheet: ~14.3 kW maximum system power, minus 8 x 1000 W GPU TDP"),
}
"""Per-node power besides the GPUs, watts, by GPU profile name, with its source."""

@dataclass(frozen=True)
class PowerModel:
    """The power figures energy is computed from, each with where it came from."""

    gpu_tdp_w: float | None
    gpu_tdp_source: str
    node_overhead_w: float | None
    node_overhead_source: str

    @property
    def known(self) -> bool:
        return self.gpu_tdp_w is not None and self.node_overhead_w is not None


def power_model(cluster: ClusterSpec, gpu_tdp_w: float | None = None, node_overhead_w: float | None = None) -> PowerModel:
    """The cluster's power figures: the user's when given, else the GPU profile's TDP and
    :data:`NODE_OVERHEAD_W`; ``None`` (with the reason) where neither knows."""
    from profiles import gpu_sources

    if gpu_tdp_w is not None:
        tdp, tdp_src = gpu_tdp_w, "--gpu-tdp-w (given)"
    elif cluster.gpu.tdp_w is not None:
        tdp, tdp_src = cluster.gpu.tdp_w, _gpu_source(gpu_sources, cluster.gpu.name)
    else:
        tdp, tdp_src = None, f"no TDP in the {cluster.gpu.name} profile: pass --gpu-tdp-w"
    if node_overhead_w is not None:
        node, node_src = node_overhead_w, "--node-overhead-w (given)"
    elif cluster.gpu.name in NODE_OVERHEAD_W:
        node, node_src = NODE_OVERHEAD_W[cluster.gpu.name]
    else:
        node, node_src = None, f"no node overhead known for {cluster.gpu.name} nodes: pass --node-overhead-w"
    return PowerModel(tdp, tdp_src, node, node_src)


def _gpu_source(gpu_sources, name: str) -> str:
    from profiles import ProfileError

    try:
        return gpu_sources(name).get("tdp_w", "profiles/gpus.json tdp_w")
    except ProfileError:  # a GPU defined inline in a cluster file has no entry in gpus.json
        return "the cluster file's gpu.tdp_w"


@dataclass(frozen=True)
class TrainingCost:
    """Time, GPU-hours, money and energy of one configuration on the token budget."""

    tokens_needed: float
    steps: float
    time_to_train_s: float
    gpu_hours: float
    cost_usd: float | None
    utilisation: float
    energy_kwh: float | None


def utilisation(breakdown: dict[str, float], step_time_s: float) -> float:
    """Share of the step the GPU runs compute kernels: (compute + recompute) / step time."""
    return min(1.0, (breakdown["compute"] + breakdown["recompute"]) / step_time_s)


def training_cost(*, tokens: float, step_time_s: float, global_batch: int, seq_len: int, gpus: int, nodes: int,
                  breakdown: dict[str, float], price_per_gpu_hour: float | None, power: PowerModel,
                  critical_batch: int | None) -> TrainingCost:
    """The figures of the module docstring for one plan."""
    from planner.capacity.batch import steps_needed, tokens_needed

    steps = steps_needed(tokens, global_batch, seq_len, critical_batch)
    seconds = steps * step_time_s
    gpu_hours = gpus * seconds / 3600.0
    u = utilisation(breakdown, step_time_s)
    energy = None
    if power.known:
        watts = gpus * power.gpu_tdp_w * u + nodes * power.node_overhead_w  # type: ignore[operator]
        energy = seconds * watts / 3.6e6
    cost = gpu_hours * price_per_gpu_hour if price_per_gpu_hour is not None else None
    return TrainingCost(tokens_needed(tokens, global_batch, critical_batch), steps, seconds, gpu_hours, cost, u, energy)
