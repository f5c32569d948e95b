"""The runtime's numerics: which dtype computes, which keeps the master weights, what reduces gradients.

A plan priced with 2-byte parameters (``config.param_bytes == 2``, the cost model's default and
torchtitan's) trains as FSDP2 mixed precision: fp32 master weights and Adam states, every FSDP unit
computing in bf16 (``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``,
torch.distributed.fsdp; torchtitan's ``mixed_precision_param`` / ``mixed_precision_reduce``
defaults), gradients reduced and accumulated in fp32. FSDP2 wraps every plan for this, ``dp = 1``
included (a one-rank shard mesh, as torchtitan does), pipeline stages and tensor-parallel layers
alike, so no ``torch.autocast`` is needed anywhere: the cast is FSDP2's, per unit, once per step.

On CPU bf16 is used where oneDNN runs it natively (AVX-512-BF16 / AMX,
``torch.ops.mkldnn._is_mkldnn_bf16_supported``); gloo reduces, gathers and scatters bf16 tensors
(checked on torch 2.13). Elsewhere on CPU the run stays fp32 and the record says so. A plan priced
with 4-byte parameters trains in fp32. FP8 (``config.precision == "fp8"``) needs CUDA with compute
capability 8.9 or newer and torchao (:mod:`planner.runtime.fp8`). Runs of uneven shares or
injected slowdowns (:mod:`planner.runtime.shares`, CPU gloo only) keep fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from planner.plans.schema import Plan
from planner.runtime.fp8 import RECIPE


@dataclass(frozen=True)
class RunPrecision:
    """The dtypes one run trains with."""

    compute: torch.dtype
    """Dtype of the forward and backward (FSDP2's ``param_dtype``)."""
    master: torch.dtype = torch.float32
    """Dtype of the parameters the optimizer updates, and of its states."""
    reduce: torch.dtype = torch.float32
    """Dtype gradients are reduced in across data-parallel ranks (FSDP2's ``reduce_dtype``)."""
    fp8: bool = False
    """Linear layers of the transformer blocks train in Float8 (torchao)."""
    fp8_recipe: str = RECIPE
    """torchao's Float8 recipe (``Float8LinearConfig.from_recipe_name``; :data:`planner.runtime.fp8.RECIPE`)."""
    reason: str = ""
    """Why the compute dtype is what it is (the run record's note)."""

    @property
    def mixed(self) -> bool:
        """Compute in a narrower dtype than the master weights."""
        return self.compute != self.master

    def name(self, dtype: torch.dtype) -> str:
        """``torch.bfloat16`` as ``bfloat16``."""
        return str(dtype).removeprefix("torch.")


FP32 = RunPrecision(torch.float32, reason="fp32 asked for")


def cpu_has_fast_bf16() -> bool:
    """oneDNN runs bf16 natively on this CPU (AVX-512-BF16 or AMX)."""
    check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)
    return bool(check and check())


def plan_precision(plan: Plan, device_type: str) -> RunPrecision:
    """The precision ``plan`` is priced with, on ``device_type`` (see the module docstring)."""
    fp8 = plan.config.precision == "fp8"
    if plan.config.param_bytes != 2:
        return RunPrecision(torch.float32, reason=f"the plan prices {plan.config.param_bytes}-byte parameters")
    if device_type == "cuda":
        return RunPrecision(torch.bfloat16, fp8=fp8, reason="bf16 compute, fp32 master weights (the plan's precision)")
    if cpu_has_fast_bf16():
        return RunPrecision(torch.bfloat16, fp8=fp8,
                            reason="bf16 compute, fp32 master weights (the plan's precision; this CPU runs bf16 natively)")
    return RunPrecision(torch.float32, fp8=fp8, reason="fp32: this CPU has no native bf16 (AVX-512-BF16 / AMX); "
                        "the plan prices bf16 compute")


def mp_policy(precision: RunPrecision) -> object:
    """FSDP2's ``MixedPrecisionPolicy`` for ``precision`` (no cast when it is not mixed)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if not precision.mixed:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=precision.compute, reduce_dtype=precision.reduce)


def make_optimizer(device: torch.device, lr: float = 1e-3):  # type: ignore[no-untyped-def]
    """AdamW (Loshchilov and Hutter 2019), fused on CUDA (``torch.optim.AdamW(fused=True)``: one
    kernel over all parameters, torchtitan's default), the for-each implementation elsewhere."""

    def build(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return torch.optim.AdamW(params, lr=lr, fused=device.type == "cuda" or None)

    return build
