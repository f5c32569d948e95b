"""Single-device microbenchmarks: GEMMs at transformer shapes, SDPA attention, memory bandwidth and
the fixed cost of one small kernel.

Each function runs on the calling rank only and returns seconds per call (``timing.time_call``); the
caller runs them on every rank at once, as training does, and takes the median over ranks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from planner.runtime.profile.timing import Budget, time_call

ATTENTION_BACKWARD_FACTOR = 2.5
"""Backward attention FLOPs over forward, as the cost model charges them (``costmodel/layer_transformer.py``:
``attention_time(cluster, 2.5 * core, d)``; FlashAttention-2's backward recomputes the scores)."""


@dataclass(frozen=True)
class GemmShape:
    """One projection of a transformer layer: (m x k) @ (k x n)."""

    role: str
    hidden: int
    tp: int
    m: int
    n: int
    k: int

    @property
    def label(self) -> str:
        return f"h{self.hidden}/tp{self.tp}"

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k


def transformer_gemms(hidden_sizes: tuple[int, ...], tokens: int, tp_degrees: tuple[int, ...]) -> list[GemmShape]:
    """The four GEMMs of a GPT layer (Megatron-LM column/row split; Narayanan et al. SC21 sec. 2):
    QKV (h -> 3h/t), attention output (h/t -> h), MLP up (h -> 4h/t) and down (4h/t -> h), for
    ``tokens`` = micro-batch x sequence rows."""
    shapes = []
    for h in hidden_sizes:
        for t in tp_degrees:
            if h % t:
                continue
            shapes += [
                GemmShape("qkv", h, t, tokens, 3 * h // t, h),
                GemmShape("proj", h, t, tokens, h, h // t),
                GemmShape("fc1", h, t, tokens, 4 * h // t, h),
                GemmShape("fc2", h, t, tokens, h, 4 * h // t),
            ]
    return shapes


def time_gemm(shape: GemmShape, dtype: torch.dtype, device: torch.device, budget: Budget) -> float:
    """Seconds of one GEMM of ``shape``; fp8 through ``torch._scaled_mm`` (per-tensor scales, bf16 out)."""
    if dtype.is_floating_point and dtype.itemsize == 1:
        a = torch.randn(shape.m, shape.k, device=device).to(dtype)
        b = torch.randn(shape.n, shape.k, device=device).to(dtype).t()
        one = torch.ones((), device=device)
        return time_call(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), device, budget)
    a = torch.randn(shape.m, shape.k, device=device, dtype=dtype)
    b = torch.randn(shape.k, shape.n, device=device, dtype=dtype)
    return time_call(lambda: a @ b, device, budget)


def attention_backends(device: torch.device) -> list[str]:
    """SDPA backends worth forcing on this device (besides SDPA's own choice, ``default``)."""
    if device.type == "cuda":
        return ["flash", "efficient", "cudnn", "math"]
    return ["flash", "math"]


@contextlib.contextmanager
def _backend(name: str) -> Iterator[None]:
    """``torch.nn.attention.sdpa_kernel`` for a backend name; ``default`` forces nothing."""
    if name == "default":
        yield
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel

    chosen = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
              "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[name]
    with sdpa_kernel([chosen]):
        yield


def attention_flops(batch: int, heads: int, seq_len: int, head_dim: int) -> float:
    """Forward + backward FLOPs of causal attention as the cost model counts them: forward
    4·b·s·(s/2)·H·d (``costmodel/flops.py`` ``attn_core`` with the causal half), backward
    :data:`ATTENTION_BACKWARD_FACTOR` times that."""
    forward = 4.0 * batch * seq_len * (seq_len / 2) * heads * head_dim
    return forward * (1.0 + ATTENTION_BACKWARD_FACTOR)


def time_attention(
    backend: str, batch: int, heads: int, seq_len: int, head_dim: int, dtype: torch.dtype,
    device: torch.device, budget: Budget,
) -> float | None:
    """Seconds of one causal SDPA forward + backward through ``backend``; None where it cannot run."""
    shape = (batch, heads, seq_len, head_dim)
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in range(3))
    grad = torch.randn(shape, device=device, dtype=dtype)

    def step() -> None:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(grad)

    try:
        with _backend(backend):
            return time_call(step, device, budget)
    except RuntimeError:  # the backend does not support this device, dtype or shape
        return None


def time_copy(nbytes: int, device: torch.device, budget: Budget) -> float:
    """Seconds to copy an ``nbytes`` buffer into another (reads and writes ``nbytes`` each)."""
    src = torch.empty(nbytes // 4, device=device, dtype=torch.float32).uniform_()
    dst = torch.empty_like(src)
    return time_call(lambda: dst.copy_(src), device, budget)


def time_small_kernel(device: torch.device, calls: int) -> float:
    """Seconds per launch of a tiny elementwise kernel (256 floats), back to back: the fixed cost a
    kernel pays whatever its size (``EfficiencySpec.kernel_overhead_us``)."""
    x = torch.zeros(256, device=device)
    return time_call(lambda: x.add_(1.0), device, Budget(iters=calls, repeats=3, warmup=calls // 10 + 1))
