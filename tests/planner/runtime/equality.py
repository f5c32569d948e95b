"""The equality harness: train plans on CPU gloo worlds and one process, compare losses and weights.

Workers run in a forkserver that has imported torch, transformers and the runtime once
(``set_forkserver_preload``), so a world starts in about a second; each world trains many plans in
turn (one process group, one mesh per plan). Every plan trains ``STEPS`` fp32 AdamW steps from the
same seeded full weights on the same seeded batches (``planner.runtime.init``); the reference is the
unsplit module's own ``forward`` trained in this process. These exact comparisons run in fp32
(``apply(..., precision=FP32)``: the split must be exact); ``meshplan run``'s default bf16 mixed
precision is compared with :data:`BF16_RTOL` by the differential harness and the CLI test.
"""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp

STEPS, SEED, VOCAB = 3, 1234, 128
RTOL = 1e-5
"""Relative tolerance on losses and final parameters (fp32: reduction order differs across splits)."""
BF16_RTOL = 1e-2
"""Relative tolerance on each step's loss of a bf16 mixed-precision run (``planner.runtime.precision``)
against the one-process bf16 reference (:func:`reference` with ``mixed``). bf16 keeps 8 significant
bits: every rounded op is off by up to 2^-9 = 2.0e-3 relative (unit roundoff; 3.9e-3 between
neighbours). Splits change where the roundings fall: tensor parallelism rounds each rank's partial
matmul sum to bf16 before the reduction, and pipeline / data parallelism change the shapes (so the
kernels' blocking and summation order) of every GEMM; activations differ by a few roundoffs per
layer, and each AdamW step (lr 1e-3 over the root of the second moment) moves a weight by up to lr
whatever the gradient's size, so step 2's weights differ wherever a tiny gradient changed sign. The
mean over the batch's tokens averages most of it out: over ``bench/differential.py --plans 20 --seed
0`` (28 plans run, 2026-12-04) the largest difference was 1.4e-3 (the CNN's regression loss), the
median 3e-5. 1e-2 is 2.5 steps of bf16 resolution (3.9e-3) and 7x that largest figure. A split
that is wrong in the forward (a moved stage boundary) misses it by far; gradient-only errors are
what the exact fp32 tests (:func:`compare`, RTOL on losses and every weight) are for. The fp32 tests (:func:`compare`) keep RTOL."""
ATOL = 1e-5
"""Absolute floor for parameters: AdamW normalises each gradient element, so roundoff on a near-zero
gradient element moves its weight by up to a fraction of lr = 1e-3; 1e-5 is 1 % of one step."""

ROUNDOFF = 1e-6
"""A tensor whose reference gradient never exceeds ROUNDOFF x the model's largest gradient element has
a gradient that is zero in exact arithmetic (the key bias: softmax ignores a shift shared by all keys);
AdamW divides that roundoff by its own square root and moves each element by up to lr per step, in
a direction no split can reproduce. Such tensors are only checked to have moved at most STEPS x lr."""
LR = 1e-3

VIEW_WARNING = r"FSDP2-wrapped module .*returned a view tensor"
"""FSDP2's warning that a unit's output is a view, whose in-place update would silently skip the unit's
backward all-gather (``planner.runtime.fsdp.fresh_outputs`` prevents it): an error in every runtime
test, in this process (``conftest.py``) and in the workers (:func:`strict_warnings`)."""


def strict_warnings() -> None:
    """In a worker: :data:`VIEW_WARNING` raises (after any ``silence_third_party``, which hides FSDP2's advice)."""
    warnings.filterwarnings("error", message=VIEW_WARNING, category=UserWarning)


_PRELOAD = ["torch", "torch.distributed.pipelining", "torch.distributed.fsdp", "torch.distributed.tensor.parallel",
            "transformers.models.llama.modeling_llama", "planner.runtime.apply", "planner.runtime.init",
            "planner.runtime.models", "planner.plans.schema", "planner.intake.trace", "planner.intake.trace.load"]


@dataclass(frozen=True)
class Job:
    """One plan of one model to train: ``model`` is what ``build_model`` takes."""

    name: str
    model: Any
    plan_json: str
    corrupt: bool = False
    """Move the first stage boundary in the applied module by one layer (the negative test)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Reference:
    """The unsplit model's losses and final weights, and the tensors with roundoff-only gradients."""

    losses: list[float]
    params: dict[str, torch.Tensor]
    start: dict[str, torch.Tensor]
    roundoff: set[str]


def bf16_copy(module: torch.nn.Module) -> torch.nn.Module:
    """The compute copy of FSDP2 mixed precision for a one-process reference: ``module``'s parameters
    in bf16 (buffers keep their dtype: FSDP2 casts parameters only)."""
    import copy

    compute = copy.deepcopy(module)
    for p in compute.parameters():
        p.data = p.data.to(torch.bfloat16)
    return compute


def mixed_backward(master: torch.nn.Module, compute: torch.nn.Module, loss_of: Any) -> torch.Tensor:
    """One step's forward and backward as ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``
    runs it on one rank: the fp32 ``master`` weights cast into the bf16 ``compute`` copy, the loss
    (``loss_of(compute)``, fp32) backward through bf16, the gradients cast to fp32 into the master's."""
    with torch.no_grad():
        for p, c in zip(master.parameters(), compute.parameters()):
            c.copy_(p)
            c.grad = None
    loss = loss_of(compute)
    loss.backward()
    for p, c in zip(master.parameters(), compute.parameters()):
        p.grad = c.grad.float()
    return loss


def reference(model: Any, mixed: bool = False, batch: int | None = None, seq: int | None = None) -> Reference:
    """Losses and final weights of ``STEPS`` steps of the unsplit model in this process; ``mixed``:
    bf16 compute with fp32 master weights (:func:`mixed_backward`), as ``meshplan run`` trains; on
    batches of ``batch`` x ``seq`` tokens (``plan_helpers``' BATCH x SEQ by default)."""
    from planner.runtime.apply import default_optimizer, next_token_loss
    from planner.runtime.init import synthetic_tokens
    from planner.runtime.models import build_model
    from plan_helpers import BATCH, SEQ

    BATCH, SEQ = batch or BATCH, seq or SEQ  # noqa: N806

    torch.manual_seed(SEED)
    module = build_model(model, device="cpu")
    opt = default_optimizer(list(module.parameters()))
    start = {n: p.detach().clone() for n, p in module.named_parameters()}
    grad_max = dict.fromkeys(start, 0.0)
    losses = []
    compute = bf16_copy(module) if mixed else None
    for step in range(STEPS):
        tokens = synthetic_tokens(SEED, step, BATCH, SEQ, VOCAB)

        def loss_of(m: torch.nn.Module, tokens: torch.Tensor = tokens) -> torch.Tensor:
            out = m(tokens[:, :-1])
            return next_token_loss(out.logits if hasattr(out, "logits") else out, tokens[:, 1:])

        opt.zero_grad()
        if compute is not None:
            loss = mixed_backward(module, compute, loss_of)
        else:
            loss = loss_of(module)
            loss.backward()
        for n, p in module.named_parameters():
            grad_max[n] = max(grad_max[n], p.grad.abs().max().item())
        opt.step()
        losses.append(loss.item())
    top = max(grad_max.values())
    roundoff = {n for n, g in grad_max.items() if g < ROUNDOFF * top}
    return Reference(losses, {n: p.detach().clone() for n, p in module.named_parameters()}, start, roundoff)


def _corrupt(plan: Any) -> Any:
    """The plan with its first stage boundary moved one layer later in the module only."""
    stages = [s.model_copy(update={"layers": list(s.layers), "layer_recompute": list(s.layer_recompute)}) for s in plan.stages]
    stages[0].layers.append(stages[1].layers[0])  # the boundary layer now also runs at the end of chunk 0
    stages[0].layer_recompute.append("none")
    return plan.model_copy(update={"stages": stages})


def _worker(rank: int, world: int, port: int, out: str, jobs: list[Job]) -> None:
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor

    from planner.runtime.apply import apply
    from planner.runtime.expert_parallel import gather_experts
    from planner.runtime.precision import FP32
    from planner.runtime.init import materialize, synthetic_tokens
    from planner.runtime.models import build_model
    from planner.runtime.stage import ROOT
    from planner.plans.schema import Plan

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    strict_warnings()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for job in jobs:
            plan = Plan.model_validate_json(job.plan_json)
            runtime = apply(_corrupt(plan) if job.corrupt else plan, build_model(job.model), precision=FP32)
            torch.manual_seed(SEED)
            materialize(runtime, build_model(job.model, device="cpu"))
            losses = [runtime.step(synthetic_tokens(SEED, s, plan.request.global_batch, plan.request.seq_len, VOCAB))
                      for s in range(STEPS)]
            params = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for n, p in runtime.named_parameters()}
            for stage in runtime.stages:  # expert parallelism: every rank of the EP group holds some experts
                params = gather_experts(stage, params, ROOT)
            writer = all(runtime.mesh.coordinate(d) == 0 for d in ("dp", "cp", "tp"))
            if writer:
                torch.save({"losses": losses, "params": params}, Path(out) / f"{job.name}.rank{rank}.pt")
            (Path(out) / f"{job.name}.rank{rank}.cpu").write_text(str(_cpu_seconds()))  # CPU cost, for the budget
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


JOBS_PER_WORLD = 8
"""Jobs one world trains before its processes end. Every job's DeviceMesh adds gloo groups whose
threads keep polling their sockets until the process exits (about 14 threads for five dimensions,
measured on torch 2.13.0; destroying the groups is no way out: DTensor's sharding caches keep the
old meshes and resolve their destroyed groups by name). One world of 300 jobs grew 1,600 threads a
process and spent most of two cores polling."""


def run_world(world: int, jobs: list[Job], out: Path) -> None:
    """Train ``jobs`` in gloo worlds of ``world`` processes (forkserver workers), a new world every
    :data:`JOBS_PER_WORLD` jobs.

    A world whose worker is killed by a signal (a native crash of gloo on an oversubscribed CPU: one
    SIGSEGV of the 8-process world in four full-suite runs, none in 14 reruns alone or under load;
    an earlier gloo TP run aborted the same way) runs once more, with a warning; a second crash, and
    any Python error or failed check, fails the test."""
    multiprocessing.set_forkserver_preload(_PRELOAD)
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    for first in range(0, len(jobs), JOBS_PER_WORLD):
        part = jobs[first:first + JOBS_PER_WORLD]
        try:
            mp.start_processes(_worker, args=(world, free_port(), str(out), part), nprocs=world, start_method="forkserver")
        except mp.ProcessExitedException as crash:
            if not crash.signal_name:
                raise
            warnings.warn(f"{world}-process world crashed ({crash}); running it once more", stacklevel=2)
            mp.start_processes(_worker, args=(world, free_port(), str(out), part), nprocs=world, start_method="forkserver")


def results(out: Path, name: str) -> tuple[list[float], dict[str, torch.Tensor]]:
    """Losses and merged full parameters of job ``name`` (every pipeline rank's writer)."""
    losses: list[float] | None = None
    params: dict[str, torch.Tensor] = {}
    for file in sorted(out.glob(f"{name}.rank*.pt")):
        data = torch.load(file)
        losses = losses or data["losses"]
        params.update(data["params"])
    assert losses is not None, f"no results for {name}"
    return losses, params


def compare(ref: Reference, got: tuple[list[float], dict[str, torch.Tensor]]) -> None:
    """AssertionError unless losses and every parameter agree to RTOL (ATOL near zero)."""
    losses, params = got
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(ref.losses), rtol=RTOL, atol=0)
    assert sorted(params) == sorted(ref.params), f"parameter names differ: {set(params) ^ set(ref.params)}"
    for name, want in ref.params.items():
        if name in ref.roundoff:
            moved = (params[name] - ref.start[name]).abs().max().item()
            assert moved <= STEPS * LR * 1.01, f"{name} moved {moved} > {STEPS} steps of lr {LR}"
            continue
        torch.testing.assert_close(params[name], want, rtol=RTOL, atol=ATOL, msg=lambda m, n=name: f"{n}: {m}")


def check_all(out: Path, jobs: list[Job], refs: dict[str, Reference]) -> None:
    """Every job's results equal its model's one-process reference (the model is the job name's first
    part); all mismatches reported at once."""
    failures = []
    for job in jobs:
        try:
            compare(refs[job.name.split("-")[0]], results(out, job.name))
        except AssertionError as err:
            failures.append(f"{job.name}: {str(err).splitlines()[0]}")
    assert not failures, "\n".join(failures)
