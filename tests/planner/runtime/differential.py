"""The differential harness: every drawn plan trains like one process, or the validator refused it by a rule.

Plans come from :mod:`differential_draw`. Each plan to run trains :data:`equality.STEPS` bf16
mixed-precision AdamW steps on CPU gloo worlds of its rank count (forkserver workers, as :mod:`equality` runs them;
one world trains many plans in turn) from the same seeded weights on the same seeded batches as the
unsplit model in this process (:func:`equality.reference`); its losses must equal the reference's
within :data:`RTOL`. A plan that raises on any rank ends its world: it is recorded as failed with
the error, and the plans after it run in a new world. An outcome is ``equal``, ``refused`` (the
validator named a native rule), or ``failed`` (losses differ, or the runtime raised), with the
command that replays it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shlex
import sys
import traceback
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

import torch.multiprocessing as mp

from differential_draw import Draw
from equality import _PRELOAD, BF16_RTOL, JOBS_PER_WORLD, STEPS, SEED, free_port, strict_warnings

CLI = Path(__file__).resolve().parents[3] / "cli.py"
RTOL = BF16_RTOL
"""Relative tolerance on each step's loss: plans train as ``meshplan run`` does, bf16 compute with fp32
master weights, against the one-process bf16 reference (the bound is justified at ``equality.BF16_RTOL``)."""


@dataclass(frozen=True)
class Outcome:
    """What became of one draw."""

    draw: Draw
    verdict: str
    """``equal``, ``refused`` or ``failed``."""
    detail: str = ""
    memory: tuple[tuple[int, float, float], ...] = ()
    """``check-memory``'s figures: (pipeline rank, measured peak GiB, predicted peak GiB) per rank kind."""

    def replay(self, folder: str) -> str:
        """The shell commands that reproduce this draw: write the plan, check its memory, then run it."""
        model = shlex.quote(self.draw.model)
        run = (f"torchrun --standalone --nproc-per-node {self.draw.world} {CLI} run plan.json "
               f"--model {model} --steps {STEPS} --seed {SEED}")
        return f"(cd {folder} && {self.draw.command} && meshplan check-memory plan.json --model {model} && {run})"


def _worker(rank: int, world: int, port: int, out: str, jobs: list[tuple[str, str, str]]) -> None:
    import torch
    import torch.distributed as dist

    from planner.noise import silence_third_party
    from planner.plans.schema import Plan
    from planner.runtime.apply import apply
    from planner.runtime.init import materialize
    from planner.runtime.models import build_model
    from planner.runtime.tasks import task_for

    silence_third_party()
    strict_warnings()
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(seconds=120))
    try:
        for name, model, plan_json in jobs:
            try:
                plan = Plan.model_validate_json(plan_json)
                module = build_model(model)
                task = task_for(model, module, plan.request.seq_len)
                runtime = apply(plan, module)
                torch.manual_seed(SEED)
                materialize(runtime, build_model(model, device="cpu"))
                losses = [runtime.step(task.batch(SEED, s, plan.request.global_batch, plan.request.seq_len))
                          for s in range(STEPS)]
            except Exception:
                (Path(out) / f"{name}.rank{rank}.err").write_text(traceback.format_exc())
                raise
            if rank == 0:
                (Path(out) / f"{name}.json").write_text(json.dumps(losses))
            dist.barrier()
    finally:
        dist.destroy_process_group()


def _world(world: int, jobs: list[tuple[str, str, str]], out: Path) -> None:
    multiprocessing.set_forkserver_preload(_PRELOAD)
    here = str(Path(__file__).parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        mp.start_processes(_worker, args=(world, free_port(), str(out), jobs), nprocs=world, start_method="forkserver")
    except (mp.ProcessRaisedException, mp.ProcessExitedException):
        pass  # the plan that raised left its .err files; the caller reruns the rest


def _error(out: Path, name: str) -> str:
    errors = sorted(out.glob(f"{name}.rank*.err"))
    if not errors:
        return "the world ended without a result (a rank crashed or timed out)"
    last = [next((x for x in reversed(e.read_text().splitlines()) if x.strip()), "error") for e in errors]
    own = [x for x in last if "gloo" not in x and "Connection closed" not in x]  # a peer's error, not the cause
    return (own or last)[0]


def run_draws(draws: list[Draw], references: dict[str, list[float]], out: Path) -> list[Outcome]:
    """Run every draw with a plan, grouped by world size; compare with the reference losses by model."""
    outcomes: dict[str, Outcome] = {d.name: Outcome(d, "refused", d.refusal or "") for d in draws if d.plan_json is None}
    by_world: dict[int, list[Draw]] = {}
    for d in draws:
        if d.plan_json is not None:
            by_world.setdefault(d.world, []).append(d)
    for world, group in sorted(by_world.items()):
        pending = list(group)
        while pending:
            part, later = pending[:JOBS_PER_WORLD], pending[JOBS_PER_WORLD:]  # a new world every few jobs
            _world(world, [(d.name, d.model, d.plan_json or "") for d in part], out)
            done = [d for d in part if (out / f"{d.name}.json").exists()]
            for d in done:
                outcomes[d.name] = _judge(d, json.loads((out / f"{d.name}.json").read_text()), references[d.model])
            rest = [d for d in part if d not in done]
            if rest:  # the first plan without a result ended the world
                outcomes[rest[0].name] = Outcome(rest[0], "failed", _error(out, rest[0].name))
            pending = rest[1:] + later
    return [outcomes[d.name] for d in draws]


def check_memories(outcomes: list[Outcome]) -> list[Outcome]:
    """``check-memory`` (``planner.runtime.memcheck``: one process, fake tensors) on every plan that ran:
    its figures join the outcome; an error fails it, whatever its losses did."""
    from planner.plans.schema import Plan
    from planner.runtime.memcheck.check import check_memory

    out = []
    for o in outcomes:
        if o.draw.plan_json is None:
            out.append(o)
            continue
        try:
            result = check_memory(Plan.model_validate_json(o.draw.plan_json), model=o.draw.model)
        except Exception as err:  # any error is a finding: the validator accepted this plan
            out.append(replace(o, verdict="failed", detail=f"check-memory: {type(err).__name__}: {err}; {o.detail}"))
            continue
        figures = tuple((r.pp_rank, r.measured_peak_gib, r.predicted_peak_gib) for r in result.ranks)
        out.append(replace(o, memory=figures))
    return out


def _judge(d: Draw, losses: list[float], want: list[float]) -> Outcome:
    worst = max(abs(a - b) / abs(b) for a, b in zip(losses, want))
    if worst <= RTOL:
        return Outcome(d, "equal", f"max relative loss difference {worst:.1e}")
    return Outcome(d, "failed", f"losses {losses} differ from one process's {want} (max relative {worst:.1e} > {RTOL})")


def references(models: list[str]) -> dict[str, list[float]]:
    """One-process losses of each model: the unsplit module's own forward, same seed, same batches."""
    return {m: reference_losses(m) for m in sorted(set(models))}


def reference_losses(model: str) -> list[float]:
    """:data:`STEPS` AdamW steps of the unsplit ``model`` in this process on its task's seeded batches
    (``planner.runtime.tasks``: next tokens, or features and regression targets), bf16 compute with fp32
    master weights as ``meshplan run`` (``equality.mixed_backward``); the losses."""
    import torch

    from equality import bf16_copy, mixed_backward
    from planner.runtime.apply import default_optimizer
    from planner.runtime.precision import cpu_has_fast_bf16
    from planner.runtime.models import build_model
    from planner.runtime.tasks import split_rows, task_for
    from plan_helpers import BATCH, SEQ

    torch.manual_seed(SEED)
    module = build_model(model, device="cpu")
    task = task_for(model, module, SEQ)
    opt = default_optimizer(list(module.parameters()))
    compute = bf16_copy(module) if cpu_has_fast_bf16() else None  # the runtime's own choice (planner.runtime.precision)
    losses = []
    for step in range(STEPS):
        inputs, labels = split_rows(task.batch(SEED, step, BATCH, SEQ), 0, BATCH, torch.device("cpu"))
        if compute is not None and inputs.is_floating_point():  # FSDP2 casts floating inputs to the compute dtype (cast_forward_inputs)
            inputs = inputs.to(torch.bfloat16)

        def loss_of(m: torch.nn.Module, inputs: torch.Tensor = inputs, labels: torch.Tensor = labels) -> torch.Tensor:
            out = m(inputs)
            return task.loss(out.logits if hasattr(out, "logits") else out, labels)

        opt.zero_grad()
        if compute is not None:
            loss = mixed_backward(module, compute, loss_of)
        else:
            loss = loss_of(module)
            loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def summary(outcomes: list[Outcome]) -> dict[str, int]:
    """Counts: plans drawn, run, equal, refused with a rule, failed."""
    count = {v: sum(o.verdict == v for o in outcomes) for v in ("equal", "refused", "failed")}
    return {"plans": len(outcomes), "run": count["equal"] + count["failed"], **count}


def kinds(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """(run, equal) of the plans the native rules used to refuse: cp > 1, a mixture-of-experts model
    with sp on, zb-h1 with tp > 1."""
    import json

    out: dict[str, tuple[int, int]] = {}
    for o in outcomes:
        if o.draw.plan_json is None:
            continue
        plan = json.loads(o.draw.plan_json)
        mesh, moe = plan["mesh"], any(layer.get("is_moe") for layer in plan.get("model", {}).get("layers", []))
        moe = moe or "mixtral" in o.draw.name
        tags = [t for t, on in (("cp > 1", mesh["cp"] > 1), ("MoE with sp", moe and mesh["sp"]),
                                ("zb-h1 with tp > 1", plan["schedule"]["name"] == "zb-h1" and mesh["tp"] > 1)) if on]
        for tag in tags:
            run, equal = out.get(tag, (0, 0))
            out[tag] = (run + 1, equal + (o.verdict == "equal"))
    return out
