"""A replica kind's step time as a function of its micro-batches, T_k(m), evaluated cheaply.

For a fixed recompute mode and split, once m exceeds the pipeline depth p the step is affine in m:
m times the slowest stage plus the fill and drain (``costmodel.pipeline``), 2(m − 1) exposed
pipeline hops (``p2p_exposed``), (m − 1) gradient accumulations and m host launches
(``costmodel.optimizer``, ``costmodel.engines``), while memory stops growing (in-flight micro-batches
are min(p, m), ``costmodel.memory``). So each (mode, split) is priced exactly at every m ≤ p + 1 and,
beyond, as the line through its prices at p + 1 and p + 2 (``tests/search/test_hetero.py`` checks
the line against direct prices, and the exhaustive check prices without it). T_k(m) is the fastest
fitting pair. ZeRO-2/3 reduce gradients per micro-batch behind a ``max`` (``costmodel.step``), so
they are always priced exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from costmodel.specs import ParallelConfig
from search.hetero.price import PoolKey, Pricing, _share
from search.hetero.units import Kind

SCREEN_PAIRS = 3
"""Splits per recompute mode a curve prices when the search is not proving (lowest bounds first)."""


class KindCurve:
    """T_k(m) of one kind in one job (its pools, the replica count, the base option)."""

    def __init__(self, pricing: Pricing, kind: Kind, keys: Sequence[PoolKey], used: frozenset[PoolKey],
                 base: ParallelConfig, replicas: int, modes: Sequence[str], exact_below_knee: bool = True) -> None:
        self.pricing, self.used, self.base, self.replicas = pricing, used, base, replicas
        self.stage_pools = [keys[e] for e in kind]
        self.knee = base.pp + 1
        self.low = 1 if exact_below_knee else 0
        """Below the knee prices are exact (m <= knee) or, when the search is not proving, the lines
        are used down to one micro-batch (time is affine there too; only which pairs fit differs)."""
        self._times: dict[int, float] = {}
        self._exact: dict[int, tuple[float, ParallelConfig] | None] = {}
        self._lines: list[tuple[float, float, ParallelConfig]] | None = None
        self._pairs = [(mode, sizes) for mode in modes
                       for sizes in pricing.splits(kind, keys, used, _share(base, replicas, self.knee).model_copy(update={"recompute": mode}))]
        self._affine = base.zero <= 1 and not base.offload_optimizer and not base.offload_activations
        self._bounds = [pricing.pair_line(self.stage_pools, base, mode, sizes) for mode, sizes in self._pairs]
        if not exact_below_knee:
            self._keep_promising()
        self.most = max(self.knee, base.global_batch // base.micro_batch - replicas + 1)

    def __call__(self, m: int) -> float:
        """T_k(m), ``math.inf`` when nothing fits (memoised: the allocation asks many times)."""
        t = self._times.get(m)
        if t is None:
            got = self.best(m, with_config=False)
            t = self._times[m] = math.inf if got is None else got[0]
        return t

    def best(self, m: int, with_config: bool = True) -> tuple[float, ParallelConfig | None] | None:
        """(step time, configuration) of the fastest fitting pair at ``m`` micro-batches, or None."""
        if (m > self.knee or not self.low) and self._affine and self._lines is None:
            self._fit()
        if (self.low and m <= self.knee) or not self._affine:
            if m not in self._exact:
                self._exact[m] = self._price_all(m)
            return self._exact[m]
        best = None
        for t0, slope, cfg in self._lines or []:
            t = t0 + slope * (m - self.knee)
            if best is None or t < best[0]:
                best = (t, cfg)
        if best is None or not with_config:
            return best
        return best[0], best[1].model_copy(update={"global_batch": m * self.base.micro_batch * self.replicas})

    def _keep_promising(self) -> None:
        """When not proving: only the ``SCREEN_PAIRS`` splits of lowest bound per recompute mode."""
        keep = []
        for mode in dict.fromkeys(mode for mode, _ in self._pairs):
            mine = [i for i, (m, _) in enumerate(self._pairs) if m == mode]
            keep += sorted(mine, key=lambda i: self._bound_at(i, self.knee))[:SCREEN_PAIRS]
        keep.sort()
        self._pairs = [self._pairs[i] for i in keep]
        self._bounds = [self._bounds[i] for i in keep]

    def _bound_at(self, i: int, m: int) -> float:
        """Lower bound on pair i's price at ``m`` (``Pricing.pair_line``)."""
        a, b = self._bounds[i]
        return a + b * m

    def _line_at(self, line: tuple[float, float, ParallelConfig], m: int) -> float:
        return line[0] + line[1] * (m - self.knee)

    def _config(self, mode: str, sizes: tuple[int, ...] | None, m: int) -> ParallelConfig:
        return _share(self.base, self.replicas, m).model_copy(update={"recompute": mode, "stage_layers": sizes})

    def _price(self, cfg: ParallelConfig) -> float | None:
        est = self.pricing.replica(self.stage_pools, self.used, cfg)
        return est.step_time_s if est.fits else None

    def _price_all(self, m: int) -> tuple[float, ParallelConfig] | None:
        """The fastest fitting pair at ``m``; a split that fits under a mode skips the slower modes
        after it (recomputing more never takes less time on the same split)."""
        best, fitted = None, set()
        for i in sorted(range(len(self._pairs)), key=lambda i: self._bound_at(i, m)):
            mode, sizes = self._pairs[i]
            if best is not None and best[0] <= self._bound_at(i, m):
                break  # this pair and every later one cannot be faster (pair_line is a lower bound)
            if sizes in fitted:
                continue
            cfg = self._config(mode, sizes, m)
            t = self._price(cfg)
            if t is not None:
                fitted.add(sizes)
            if t is not None and (best is None or t < best[0]):
                best = (t, cfg)
        return best

    def _fit(self) -> None:
        """Lines of the fitting pairs beyond the knee; a pair whose prices are not on a line turns
        the whole curve back to exact pricing."""
        lines, fitted = [], set()
        first = self.knee if self.low else 1
        for i in sorted(range(len(self._pairs)), key=lambda i: self._bound_at(i, self.knee)):
            mode, sizes = self._pairs[i]
            if sizes in fitted or any(self._line_at(line, m) <= self._bound_at(i, m) for m in (first, self.most)
                                      for line in lines if self._line_at(line, first) <= self._bound_at(i, first)
                                      and self._line_at(line, self.most) <= self._bound_at(i, self.most)):
                continue  # a priced line lies below this pair's lower bound over the whole range
            prices = [self._price(self._config(mode, sizes, self.knee + i)) for i in range(2)]
            if any(p is None for p in prices):
                continue
            fitted.add(sizes)
            slope = prices[1] - prices[0]
            lines.append((prices[0], slope, self._config(mode, sizes, self.knee)))
        self._lines = lines
