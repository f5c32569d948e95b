"""What ``meshplan profile`` measures: sizes and shapes per device, and the ``--sizes`` syntax.

A GPU node is measured at the sizes training uses (hidden 2k-8k, 4k-token micro-batches, collectives
up to 1 GiB); a CPU "cluster" (one process per "GPU") at sizes scaled down so that the whole profile
takes seconds, near the tiny models a CPU trains.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planner.errors import InputError
from planner.runtime.profile.timing import Budget

KIB, MIB, GIB = 1024, 1024**2, 1024**3
_UNITS = {"": 1, "b": 1, "k": KIB, "kb": KIB, "kib": KIB, "m": MIB, "mb": MIB, "mib": MIB, "g": GIB, "gb": GIB, "gib": GIB}


@dataclass(frozen=True)
class ProfileOptions:
    """Every knob of one profile run (keyword-only; defaults per device from :func:`default_options`)."""

    device: str
    """``cuda`` or ``cpu``."""
    collective_bytes: tuple[int, ...]
    """Buffer sizes S of every collective."""
    hidden_sizes: tuple[int, ...]
    """Hidden sizes whose layer GEMMs are timed."""
    tokens: int
    """Rows of each GEMM (micro-batch x sequence)."""
    tp_degrees: tuple[int, ...]
    """TP splits of each GEMM."""
    attention_seq_lens: tuple[int, ...]
    attention_head_dims: tuple[int, ...]
    attention_tokens: int
    """Tokens per attention call (batch = tokens / sequence length)."""
    attention_heads: int
    memory_bytes: tuple[int, ...]
    compute_budget: Budget = field(default_factory=Budget)
    comm_budget: Budget = field(default_factory=Budget)
    kernel_calls: int = 200


def default_options(device: str, quick: bool = False) -> ProfileOptions:
    """The sizes for ``device``; ``quick`` trims them (tests, a first look)."""
    if device == "cuda":
        return ProfileOptions(
            device="cuda",
            collective_bytes=size_range(4 * KIB, (64 * MIB) if quick else GIB),
            hidden_sizes=(4096,) if quick else (2048, 4096, 8192),
            tokens=4096,
            tp_degrees=(1, 8) if quick else (1, 2, 4, 8),
            attention_seq_lens=(2048,) if quick else (1024, 2048, 4096, 8192),
            attention_head_dims=(128,) if quick else (64, 128),
            attention_tokens=16384,
            attention_heads=16,
            memory_bytes=(64 * MIB,) if quick else (16 * MIB, 64 * MIB, 256 * MIB, GIB),
            compute_budget=Budget(iters=10, repeats=5, warmup=3),
            comm_budget=Budget(iters=10 if quick else 20, repeats=3, warmup=3),
            kernel_calls=1000,
        )
    return ProfileOptions(
        device="cpu",
        collective_bytes=size_range(4 * KIB, MIB if quick else 16 * MIB),
        hidden_sizes=(128, 256) if quick else (128, 256, 512),
        tokens=256,
        tp_degrees=(1, 2),
        attention_seq_lens=(128,) if quick else (128, 256, 512),
        attention_head_dims=(32,) if quick else (32, 64),
        attention_tokens=512,
        attention_heads=4,
        memory_bytes=(4 * MIB, 16 * MIB) if quick else (4 * MIB, 16 * MIB, 64 * MIB),
        compute_budget=Budget(iters=2 if quick else 3, repeats=3, warmup=1),
        comm_budget=Budget(iters=3 if quick else 5, repeats=3, warmup=1),
        kernel_calls=100 if quick else 300,
    )


def size_range(low: int, high: int) -> tuple[int, ...]:
    """``low``, 4 x low, ... up to ``high`` (and ``high`` itself)."""
    sizes, size = [], low
    while size < high:
        sizes.append(size)
        size *= 4
    return tuple(sizes + [high])


def parse_size(text: str) -> int:
    """``64KiB``, ``1M``, ``4096`` -> bytes (binary units)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise InputError(f"--sizes: cannot read size '{text}' (write e.g. 4KiB, 64MiB, 1GiB or a byte count)")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size < 4:
        raise InputError(f"--sizes: size '{text}' is below one fp32 element (4 bytes)")
    return size


def parse_sizes(text: str) -> tuple[int, ...]:
    """``4KiB..1GiB`` (powers of 4 between, both ends kept) or a comma list ``1KiB,1MiB``."""
    if ".." in text:
        low, _, high = text.partition("..")
        lo, hi = parse_size(low), parse_size(high)
        if hi < lo:
            raise InputError(f"--sizes: range '{text}' runs backwards (write MIN..MAX)")
        return size_range(lo, hi)
    sizes = tuple(sorted({parse_size(part) for part in text.split(",") if part.strip()}))
    if not sizes:
        raise InputError("--sizes: no size given (write e.g. 4KiB..64MiB or 1KiB,1MiB)")
    return sizes


def parse_ints(text: str, flag: str) -> tuple[int, ...]:
    """``128,256`` -> (128, 256), each a positive integer."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"{flag}: write positive integers separated by commas, not '{text}'") from None
    if not values or min(values) <= 0:
        raise InputError(f"{flag}: write positive integers separated by commas, not '{text}'")
    return values
