"""The best configurations found so far, one per distinct job shape, fitting ones first."""

from __future__ import annotations

import math

from search.types import Candidate, SearchRequest


def shape_key(c: Candidate) -> tuple:
    """What makes two plans different for a reviewer: degrees, schedule, batch split, sharding."""
    x = c.config
    return (x.tp, x.cp, x.pp, x.dp, x.ep, x.vpp, x.schedule, x.sp, x.zero, x.micro_batch)


class Pool:
    """Keeps the best candidate per shape; ranks fitting candidates by step time."""

    def __init__(self, top_k: int) -> None:
        self.top_k = max(1, top_k)
        self._best: dict[tuple, Candidate] = {}
        self._miss: Candidate | None = None
        self._order: tuple[Candidate, ...] | None = None
        """:meth:`ranked`, sorted once per change (the search asks after every option it evaluates)."""

    def add(self, c: Candidate) -> None:
        """Record ``c`` if it fits and beats its shape's best, or if it is the nearest miss so far."""
        if not c.fits:
            if self._miss is None or c.estimate.over_by_gib < self._miss.estimate.over_by_gib:
                self._miss = c
            return
        key = shape_key(c)
        old = self._best.get(key)
        if old is None or c.step_time_s < old.step_time_s:
            self._best[key] = c
            self._order = None

    def _ranked(self) -> tuple[Candidate, ...]:
        if self._order is None:
            self._order = tuple(sorted(self._best.values(), key=lambda c: c.step_time_s))
        return self._order

    def ranked(self) -> list[Candidate]:
        """Fitting candidates, fastest first (ties keep insertion order)."""
        return list(self._ranked())

    def best(self) -> Candidate | None:
        ranked = self._ranked()
        return ranked[0] if ranked else None

    def best_s(self) -> float:
        best = self.best()
        return best.step_time_s if best else math.inf

    def cutoff_s(self) -> float:
        """Step time an option must beat to enter the top k (infinite until k plans fit)."""
        ranked = self._ranked()
        return ranked[self.top_k].step_time_s if len(ranked) > self.top_k else math.inf

    def runners_up(self) -> tuple[Candidate, ...]:
        return tuple(self.ranked()[1 : self.top_k + 1])

    def nearest_miss(self) -> Candidate | None:
        return self._miss

    def hints(self, miss: Candidate | None, req: SearchRequest) -> tuple[str, ...]:
        """Changes that would make the nearest miss fit, most effective first."""
        if miss is None:
            return ("no configuration of the space applies: check the GPU count and batch",)
        x, est, c = miss.config, miss.estimate, req.constraints
        ratio = est.peak_memory_gib / est.capacity_gib
        out = [f"more GPUs (about {math.ceil(req.gpus * ratio)} for this memory per GPU)"]
        if x.zero < 3:
            out.append(_relaxed("ZeRO-3 / FSDP sharding of parameters", c.allows("zero", 3), "--zero"))
        if x.recompute != "full":
            out.append(_relaxed("full activation recomputation", c.allows("recompute", "full"), "--recompute"))
        if x.micro_batch > 1:
            out.append(_relaxed("micro-batch 1", c.allows("micro_batch", 1), "--micro-batch"))
        out.append("GPUs with more memory, or a shorter sequence")
        return tuple(out)


def _relaxed(change: str, allowed: bool, flag: str) -> str:
    """A hint, saying which constraint to loosen when the constraints forbid it."""
    return change if allowed else f"{change} (loosen {flag})"
