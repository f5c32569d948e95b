"""What the serving search returns: priced deployments as plain frozen data."""

from __future__ import annotations

from dataclasses import dataclass

from costmodel.serving.specs import Instance


def instance_label(inst: Instance) -> str:
    """``tp4``, ``tp8 pp2``, ``tp8 ep8 adp``: the degrees that differ from 1."""
    parts = [f"tp{inst.tp}"]
    if inst.pp > 1:
        parts.append(f"pp{inst.pp}")
    if inst.ep > 1:
        parts.append(f"ep{inst.ep}")
    if inst.attention_dp:
        parts.append("adp")
    return " ".join(parts)


@dataclass(frozen=True)
class Candidate:
    """One priced deployment."""

    decode: Instance
    """The aggregated replicas' instance, or the decode workers'."""
    decode_workers: int
    batch: int
    """Sequences in flight per decode (or aggregated) worker."""
    per_gpu: float
    """Output tokens/s per GPU used."""
    ttft_s: float
    tpot_s: float
    gpus: int
    meets: bool
    """Meets both latency targets."""
    prefill: Instance | None = None
    prefill_workers: int = 0

    @property
    def mode(self) -> str:
        return "aggregated" if self.prefill is None else "disaggregated"

    @property
    def tokens_per_user(self) -> float:
        return 1.0 / self.tpot_s if self.tpot_s > 0 else 0.0

    @property
    def label(self) -> str:
        if self.prefill is None:
            return f"agg {instance_label(self.decode)} x{self.decode_workers} b{self.batch}"
        return (f"disagg {self.prefill_workers}xP[{instance_label(self.prefill)}] "
                f"{self.decode_workers}xD[{instance_label(self.decode)}] b{self.batch}")

    def key(self) -> tuple:
        """Sort key: higher throughput per GPU first, then lower TPOT, lower TTFT, fewer GPUs, then the
        label (ties stable)."""
        return (-round(self.per_gpu, 6), round(self.tpot_s, 9), round(self.ttft_s, 9), self.gpus, self.label)
