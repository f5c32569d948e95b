"""The sweep's grid, parsed from what a user types: GPU counts, batches, sequence lengths, clusters,
token budgets, durations and prices. Every mistake is an :class:`InputError` of one line that says
what was typed and how to fix it.

Grammar (each flag a comma-separated list of items):

- ``--gpus``: ``N`` or ``LO..HI`` (every power of two from LO to HI), e.g. ``64..4096`` or ``64,96,128``.
- ``--global-batch``: ``B`` (each one a grid point), or ``auto`` / ``LO..HI`` (candidates, every power
  of two in the range, of which each point keeps the one that trains fastest; :mod:`planner.capacity.batch`).
- ``--seq-len``: ``S`` items; ``--cluster``: presets or JSON files.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from planner.errors import InputError
from planner.intake.arguments import MAX_COUNT, MAX_GPUS

AUTO_SPAN = 4
"""``--global-batch auto`` tries every power of two within this factor of the critical batch."""
_SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
_DURATION = {"s": 1.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
MAX_TOKENS = 1e18
"""Largest token budget (``--tokens``): a thousand times the largest published training run."""
MAX_SECONDS = 100 * 365.25 * 86400.0
"""Longest deadline (``--deadline``): a century."""


@dataclass(frozen=True)
class BatchChoice:
    """Either fixed batches (each a grid dimension value) or candidates chosen per point."""

    fixed: tuple[int, ...] = ()
    """Global batches that are grid points of their own."""
    candidates: tuple[int, ...] = ()
    """Global batches a point chooses from (``auto`` or a range); empty when ``fixed`` is used."""

    @property
    def chosen_per_point(self) -> bool:
        return bool(self.candidates)


def _items(text: str, flag: str) -> list[str]:
    items = [x.strip() for x in str(text).split(",")]
    if not text or not all(items):
        raise InputError(f"{flag} {text!r} has an empty item; give comma-separated values such as 64,128")
    return items


def _positive(text: str, flag: str) -> int:
    """A positive integer within ``plan``'s bound of ``flag`` (:func:`most_of`)."""
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{flag}: {text!r:.40} is not a whole number; give positive integers or LO..HI") from None
    if value <= 0:
        raise InputError(f"{flag}: {value} must be positive")
    if value > most_of(flag):
        raise InputError(f"{flag}: {text:.40} is over the {most_of(flag):,} that meshplan plan accepts")
    return value


def most_of(flag: str) -> int:
    """The bound ``meshplan plan`` puts on ``flag`` (``planner.intake.arguments.count_problems``)."""
    return MAX_GPUS if flag == "--gpus" else MAX_COUNT


def powers_of_two(lo: int, hi: int, flag: str) -> tuple[int, ...]:
    """Every power of two p with lo <= p <= hi, or an InputError for an empty range."""
    if lo > hi:
        raise InputError(f"{flag} {lo}..{hi} is an empty range (its start is above its end); write it as {hi}..{lo}")
    out = tuple(2 ** k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1))
    if not out:
        raise InputError(f"{flag} {lo}..{hi} holds no power of two; widen the range or list the values")
    return out


def _range(item: str, flag: str) -> tuple[int, ...]:
    lo, hi = item.split("..", 1)
    return powers_of_two(_positive(lo, flag), _positive(hi, flag), flag)


def parse_counts(text: str, flag: str) -> tuple[int, ...]:
    """``64..4096`` / ``64,96,128`` / a mix, as sorted distinct positive integers."""
    values: set[int] = set()
    for item in _items(text, flag):
        values.update(_range(item, flag) if ".." in item else (_positive(item, flag),))
    return tuple(sorted(values))


def parse_batches(text: str, critical_batch: int | None) -> BatchChoice:
    """``--global-batch``: fixed values, or ``auto`` / a range chosen per point (needs the critical batch)."""
    text = str(text).strip().lower()
    if text != "auto" and ".." not in text:
        return BatchChoice(fixed=parse_counts(text, "--global-batch"))
    if critical_batch is None:
        raise InputError(f"--global-batch {text} chooses the batch per point and needs --critical-batch B "
                         "(the gradient-noise scale in sequences; McCandlish et al. 2018)")
    if critical_batch > MAX_COUNT:
        raise InputError(f"--critical-batch of about 2^{critical_batch.bit_length() - 1} is over the {MAX_COUNT:,} sequences that meshplan plan accepts as a batch")
    if text == "auto":
        lo, hi = max(1, critical_batch // AUTO_SPAN), min(critical_batch * AUTO_SPAN, MAX_COUNT)
        return BatchChoice(candidates=powers_of_two(lo, hi, "--global-batch auto"))
    if "," in text:
        raise InputError(f"--global-batch {text}: give either one range LO..HI (chosen per point) or a list of batches, not both")
    return BatchChoice(candidates=_range(text, "--global-batch"))


def parse_names(text: str, flag: str) -> tuple[str, ...]:
    """Comma-separated names in order, without duplicates."""
    return tuple(dict.fromkeys(_items(text, flag)))


def parse_amount(text: str, flag: str) -> float:
    """``2T``, ``500B``, ``1.5e12``: a positive number with an optional K/M/B(G)/T/P suffix."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbgtp]?)\s*", str(text).lower())
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"{flag} {text!r:.40} is not a positive amount; write e.g. 2T, 500B or 1.5e12")
    return check_amount(float(match.group(1)) * _SUFFIX[match.group(2)], flag)


def check_amount(value: float, flag: str = "--tokens") -> float:
    """``value`` when it is a finite token budget above 0 and at most :data:`MAX_TOKENS`."""
    if not 0 < value <= MAX_TOKENS:  # NaN and infinities fail too
        raise InputError(f"{flag} must be a positive number of tokens of at most {MAX_TOKENS:g}, got {value!r}")
    return value


def check_seconds(value: float, flag: str = "--deadline") -> float:
    """``value`` when it is a finite duration above 0 and at most :data:`MAX_SECONDS` (a century)."""
    if not 0 < value <= MAX_SECONDS:
        raise InputError(f"{flag} must be a positive duration of at most a century, got {value!r} s")
    return value


def parse_duration(text: str, flag: str = "--deadline") -> float:
    """``30d``, ``12h``, ``2w``, ``90min``, ``3600s`` as seconds."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(s|min|h|d|w)\s*", str(text).lower())
    if not match or float(match.group(1)) <= 0:
        raise InputError(f"{flag} {text!r:.40} is not a duration; write e.g. 30d, 12h, 2w, 90min or 3600s")
    return check_seconds(float(match.group(1)) * _DURATION[match.group(2)], flag)


def parse_prices(text: str | None, clusters: tuple[str, ...]) -> dict[str, float]:
    """``--price-per-gpu-hour``: one price for every cluster, or one per cluster in ``--cluster`` order."""
    if text is None:
        return {}
    prices = []
    for item in _items(text, "--price-per-gpu-hour"):
        try:
            value = float(item)
        except ValueError:
            value = math.nan
        if not 0 < value < math.inf:
            raise InputError(f"--price-per-gpu-hour: {item!r} is not a positive number of US dollars")
        prices.append(value)
    if len(prices) == 1:
        return {c: prices[0] for c in clusters}
    if len(prices) != len(clusters):
        raise InputError(f"--price-per-gpu-hour has {len(prices)} prices for {len(clusters)} clusters; give one, or one per cluster")
    return dict(zip(clusters, prices))


def holdable_problem(gpus: int, gpus_per_node: int, cluster: str) -> str | None:
    """Why ``gpus`` cannot be a job on ``cluster``: not whole nodes (a job of less than one node must
    divide the node), or ``None`` when it can."""
    if gpus < gpus_per_node and gpus_per_node % gpus == 0:
        return None
    if gpus % gpus_per_node == 0:
        return None
    return (f"--gpus {gpus} does not fill whole {cluster} nodes of {gpus_per_node} GPUs; use multiples of {gpus_per_node} "
            f"(or a divisor of it) for this cluster")
