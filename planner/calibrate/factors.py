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

    def start(self, cluster: ClusterSpec) -> float:
        """The value that leaves ``cluster`` as it is."""
        return 1.0 if self.multiplier else max(getattr(cluster.efficiency, self.fields[0]), self.low)

    def upper(self, cluster: ClusterSpec) -> float:
        """The bound above which no field can move (a multiplier stops where every field reaches 1)."""
        if not self.multiplier:
            return self.high
        lowest = min(getattr(cluster.efficiency, f) for f in self.fields)
        return min(self.high, max(1.0, 1.0 / lowest))

    def updates(self, cluster: ClusterSpec, value: float) -> dict[str, float]:
        """The fields' new values for ``value``."""
        eff = cluster.efficiency
        if self.multiplier:
            return {f: min(1.0, getattr(eff, f) * value) for f in self.fields}
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
    """``cluster`` with every factor in ``values`` applied to its efficiencies."""
    updates: dict[str, float] = {}
    for name, value in values.items():
        updates.update(FACTORS[name].updates(cluster, value))
    eff = EfficiencySpec.model_validate({**cluster.efficiency.model_dump(), **updates})
    return cluster.model_copy(update={"efficiency": eff})


Predictor = Callable[[ClusterSpec], list[float]]
"""Predicted step times of every run on a cluster."""
