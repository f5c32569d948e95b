"""The few factors ``meshplan calibrate`` fits, each a named, documented change to a cluster's
``EfficiencySpec``. A factor is a multiplier of measured ceilings (``compute``, ``attention``,
``memory``, ``comm``:
how much of what the microbenchmarks reached a training step gets, as ``bench/calibrate.py``'s
``loop`` factor does for the presets) or an absolute time (``overhead``, ``step_fixed``). Efficiencies
stay within (0, 1]: a multiplied field is capped at 1.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from costmodel.specs import ClusterSpec, EfficiencySpec


@dataclass(frozen=True)
class Factor:
    """One fitted parameter: how it changes a cluster, its bounds and its starting value."""

    name: str
    doc: str
    fields: tuple[str, ...]
    """The ``EfficiencySpec`` fields it sets."""
    multiplier: bool
    """True: multiplies the fields' current values (start 1); False: is the field's value."""
    low: float
    high: float
    on_cluster: bool = False
    """The fields are the cluster's own (link latencies), not ``EfficiencySpec`` shares capped at 1."""

    def _holder(self, cluster: ClusterSpec) -> object:
        return cluster if self.on_cluster else cluster.efficiency

    def start(self, cluster: ClusterSpec) -> float:
        """The value that leaves ``cluster`` as it is."""
        return 1.0 if self.multiplier else max(getattr(self._holder(cluster), self.fields[0]), self.low)

    def upper(self, cluster: ClusterSpec) -> float:
        """The bound above which no field can move (an efficiency multiplier stops where every field reaches 1)."""
        if not self.multiplier or self.on_cluster:
            return self.high
        lowest = min(getattr(cluster.efficiency, f) for f in self.fields)
        return min(self.high, max(1.0, 1.0 / lowest))

    def updates(self, cluster: ClusterSpec, value: float) -> dict[str, float]:
        """The fields' new values for ``value``."""
        holder = self._holder(cluster)
        if self.multiplier:
            cap = float("inf") if self.on_cluster else 1.0
            return {f: min(cap, getattr(holder, f) * value) for f in self.fields}
        return {f: value for f in self.fields}


FACTORS: dict[str, Factor] = {
    f.name: f
    for f in (
        Factor("compute", "share of the measured GEMM ceiling a training step reaches (multiplies gemm_max)",
               ("gemm_max",), True, 0.05, 20.0),
        Factor("attention", "share of the measured attention-kernel rate a training step reaches (multiplies "
               "attention)", ("attention",), True, 0.02, 50.0),
        Factor("memory", "share of the measured bandwidth memory-bound kernels (norms, activations, the "
               "optimizer) reach (multiplies memory)", ("memory",), True, 0.05, 20.0),
        Factor("overhead", "fixed time of every kernel: launch on a GPU, op dispatch on a CPU, us "
               "(sets kernel_overhead_us)", ("kernel_overhead_us",), False, 0.01, 10_000.0),
        Factor("comm", "share of the measured collective bandwidth a training step reaches (multiplies "
               "intra_node and network)", ("intra_node", "network"), True, 0.02, 50.0),
        Factor("latency", "per-hop latency of every collective and send/receive (multiplies intra_node_latency_us "
               "and network_latency_us): on a time-shared CPU each blocking collective also waits for its peer "
               "processes to be scheduled, which a profile of back-to-back collectives does not see",
               ("intra_node_latency_us", "network_latency_us"), True, 0.1, 1000.0, on_cluster=True),
        Factor("step_fixed", "fixed host time per step outside the layers: optimizer launch, loss "
               "synchronisation, data, logging, s (sets step_fixed_s)", ("step_fixed_s",), False, 1e-6, 100.0),
        Factor("overlap", "compute slowdown while communication runs concurrently (sets "
               "overlap_slowdown)", ("overlap_slowdown",), False, 1e-4, 1.0),
    )
}
"""Every factor ``--params`` may name."""
DEFAULT_FACTORS = ("compute", "attention", "memory", "overhead", "comm", "step_fixed")
"""Fitted when ``--params`` is not given (those the runs exercise)."""


def apply(cluster: ClusterSpec, values: dict[str, float]) -> ClusterSpec:
    """``cluster`` with every factor in ``values`` applied to its efficiencies (and link latencies)."""
    updates: dict[str, float] = {}
    own: dict[str, float] = {}
    for name, value in values.items():
        (own if FACTORS[name].on_cluster else updates).update(FACTORS[name].updates(cluster, value))
    eff = EfficiencySpec.model_validate({**cluster.efficiency.model_dump(), **updates})
    return cluster.model_copy(update={"efficiency": eff, **own})


Predictor = Callable[[ClusterSpec], list[float]]
"""Predicted step times of every run on a cluster."""
