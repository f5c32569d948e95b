"""``meshplan run plan.json --model M``: train a plan natively on torch.distributed and measure it.

Started under ``torchrun --nproc-per-node K`` (one process per rank of the plan), or with
``--nproc-per-node K`` to have meshplan check the plan against the model first and then start
``torchrun --standalone`` itself (a plan that does not fit the model exits 2 before any worker
starts). A one-rank plan runs in this process. Rank 0 prints the run record and writes it with ``-o``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from planner.cli._common import EXIT_NO_PLAN, EXIT_OK, UsageError, add_retrace, add_subparser, check_output, positive_int, write_output

_EXAMPLES = """\
  meshplan plan --model config.json --cluster cpu4.json --gpus 4 --global-batch 8 --seq-len 32 -o plan.json
  torchrun --standalone --nproc-per-node 4 -m cli run plan.json --model config.json --steps 10 -o run.json
  meshplan run plan.json --model config.json --nproc-per-node 4 --json"""

_DESCRIPTION = """\
Build the model (on meta, then the unsplit model's weights from --seed, sharded), apply the plan with
PyTorch's DeviceMesh, DTensor tensor/sequence parallelism, FSDP2, activation checkpointing and
torch.distributed.pipelining, train --steps steps on seeded synthetic tokens of the plan's batch and
sequence, and print the run record: step time (median after --warmup, and spread), tokens/s, MFU,
peak memory per rank and the loss per step, each beside the plan's prediction with the error.
The same --seed gives the same losses under every plan of one model and batch."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` subcommand."""
    parser = add_subparser(subparsers, "run", "train a plan on torch.distributed and measure it", _DESCRIPTION, _EXAMPLES)
    parser.add_argument("plan", metavar="PLAN_JSON", help="a plan written by meshplan plan")
    parser.add_argument("--model", metavar="M", help="the plan's model: preset, config.json or file.py:factory (checked against "
                        "the plan's model SHA-256; needed unless the plan's model is a preset or --retrace is given)")
    parser.add_argument("--steps", type=positive_int, default=10, help="training steps (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="steps left out of the timing (default 2)")
    parser.add_argument("--seed", type=_seed, default=0, help=f"seed of the initial weights and the batches, 0..{MAX_SEED} (default 0)")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="default: cuda when available, else cpu")
    parser.add_argument("--nproc-per-node", type=positive_int, metavar="K",
                        help="check the plan, then start torchrun --standalone with K processes")
    parser.add_argument("--inject-slowdown", metavar="RANK=SPEED",
                        help="emulate slow ranks (3=0.5[,R=S...]): after each micro-batch's forward and backward a rank at speed S "
                             "waits (1/S - 1) x that compute (data-parallel plans: whole-model, pipelined or tensor-parallel replicas, cp 1)")
    parser.add_argument("-o", "--output", metavar="RUN_JSON", help="write the run record (rank 0)")
    parser.add_argument("--json", action="store_true", help="print the run record as one JSON object")
    add_retrace(parser)
    parser.set_defaults(run=run)


MAX_SEED = 2**32 - 1
"""Largest ``--seed``: each step's batch seed is ``seed x 1,000,003 + step``, which torch's
``Generator.manual_seed`` must hold in 64 bits; 32-bit seeds are NumPy's range as well."""


def _seed(text: str) -> int:
    """argparse type: an integer seed in 0..:data:`MAX_SEED`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got '{text:.40}'") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be in 0..{MAX_SEED}, got '{text:.40}'")
    return value


def check_device(device: str | None) -> None:
    """Refuse ``--device cuda`` where torch sees no CUDA device (a CPU build, or no GPU)."""
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        build = "a CPU-only build of torch" if torch.version.cuda is None else "no CUDA device visible"
        raise UsageError(f"--device cuda, but this machine has {build} (torch {torch.__version__}); use --device cpu")


def run(args: argparse.Namespace) -> int:
    """Launch, or be one rank of, the run."""
    if args.warmup < 0 or args.warmup >= args.steps:
        raise UsageError(f"run: --warmup {args.warmup} must be at least 0 and less than --steps {args.steps}")
    if args.output:
        check_output(args.output, "-o")  # refuse a bad output path before any work
    check_device(args.device)
    if args.inject_slowdown:
        from planner.runtime.shares_run import parse_injection

        parse_injection(args.inject_slowdown)  # a bad flag before any work
    from planner.plans.load import load_plan
    from planner.plans.named_model import runtime_model

    plan = load_plan(args.plan, retrace=args.retrace)
    model = runtime_model(plan, args.model, args.retrace)  # never what the plan names, unless --retrace
    if "RANK" in os.environ:
        return _rank(args, plan, model)
    _preflight(args, plan, model)
    if plan.hetero is not None or args.inject_slowdown:  # uneven shares / injected slowdown: planner.runtime.shares
        from planner.runtime.shares import check_share_plan, share_ranks

        ranks = share_ranks(plan)
        check_share_plan(plan, args.nproc_per_node or ranks)
        if args.nproc_per_node is None:
            raise UsageError(f"run: the plan's replicas take {ranks} ranks; start under torchrun --nproc-per-node "
                             f"{ranks} or pass --nproc-per-node {ranks}")
    elif args.nproc_per_node is None and plan.request.gpus == 1:
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
        return _rank(args, plan, model)
    if args.nproc_per_node is None:
        raise UsageError(f"run: the plan has {plan.request.gpus} ranks; start under torchrun --nproc-per-node "
                         f"{plan.request.gpus} or pass --nproc-per-node {plan.request.gpus}")
    argv = ["run", args.plan, "--steps", str(args.steps), "--warmup", str(args.warmup), "--seed", str(args.seed)]
    argv += [*(["--model", args.model] if args.model else []), *(["--device", args.device] if args.device else []),
             *(["-o", args.output] if args.output else []), *(["--json"] if args.json else []),
             *(["--retrace"] if args.retrace else []),
             *(["--inject-slowdown", args.inject_slowdown] if args.inject_slowdown else [])]
    cli = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "cli.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc_per_node}", cli, *argv]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}  # torchrun's own value, without its banner
    with tempfile.TemporaryDirectory(prefix="meshplan-run-") as folder:
        env[_OOM_MARK] = os.path.join(folder, "oom")
        code = subprocess.run(cmd, check=False, env=env).returncode
        return EXIT_NO_PLAN if code and os.path.exists(env[_OOM_MARK]) else code


_OOM_MARK = "MESHPLAN_OOM_MARK"
"""Environment variable naming the file a worker creates when it runs out of memory: torchrun exits 1
whatever its workers' codes, so the launcher turns that into exit 3 (the worker printed the line)."""


@contextlib.contextmanager
def _oom_marked() -> Iterator[None]:
    """Create the launcher's :data:`_OOM_MARK` file when the block ends in ``RankOutOfMemory``."""
    from planner.runtime.oom import RankOutOfMemory

    try:
        yield
    except RankOutOfMemory:
        if os.environ.get(_OOM_MARK):
            with open(os.environ[_OOM_MARK], "w", encoding="utf-8"):
                pass
        raise


def _preflight(args: argparse.Namespace, plan: object, model: object) -> None:
    """The plan fits the model and the process count, checked before any worker starts."""
    from planner.runtime.apply import preflight
    from planner.runtime.models import build_model

    world = args.nproc_per_node or 1
    preflight(plan, build_model(model, trace=plan.model.trace), world, args.device or _default_device())  # type: ignore[attr-defined]


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank(args: argparse.Namespace, plan: object, model: object) -> int:
    import torch.distributed as dist

    from planner.errors import InputError
    from planner.runtime.run import run_plan

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if plan.hetero is not None or args.inject_slowdown:  # type: ignore[attr-defined]
        from planner.runtime.oom import oom_answered

        with _oom_marked(), oom_answered("run", int(os.environ.get("RANK", "0")), plan, plan.estimate.peak_memory_gib):  # type: ignore[attr-defined]
            return _share_rank(args, plan, model)
    if world != plan.request.gpus:  # type: ignore[attr-defined]
        if os.environ.get("RANK") != "0":
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        raise InputError(f"the plan has {plan.request.gpus} ranks but torchrun started {world}; "  # type: ignore[attr-defined]
                         f"use --nproc-per-node {plan.request.gpus}")  # type: ignore[attr-defined]
    device = args.device or _default_device()
    _init_group(device)
    from planner.runtime.oom import oom_answered, plan_rank_prediction

    rank = int(os.environ.get("RANK", "0"))
    with _oom_marked(), oom_answered("run", rank, plan, plan_rank_prediction(plan, rank)):
        record = _on_group(lambda: run_plan(plan, model, steps=args.steps, warmup=args.warmup, seed=args.seed,  # type: ignore[arg-type]
                                            device_type=device, retrace=args.retrace))
    if record is None:
        return EXIT_OK
    _write_record(args, record)
    if args.json:
        print(record.to_json(), end="")
    else:
        from planner.runtime.report import record_text

        print(record_text(record))
    return EXIT_OK


def _init_group(device: str) -> None:
    """The default process group: gloo on CPU; on CUDA nccl bound to this rank's GPU (``device_id``,
    after ``set_device``), so that torch.distributed neither guesses the device nor warns about it."""
    import torch
    import torch.distributed as dist

    if device != "cuda":
        dist.init_process_group("gloo")
        return
    local = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=local)


def _on_group(call: Callable[[], Any]) -> Any:
    """``call()`` on the initialised process group, which is destroyed after; a refusal is printed by
    rank 0 only (every rank raises the same line)."""
    import torch.distributed as dist

    from planner.errors import InputError

    try:
        result = call()
        dist.barrier()  # no rank tears the group down while a peer's last collective or send is in flight
        return result
    except InputError:
        if dist.get_rank() != 0:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stderr.fileno())
        raise
    finally:
        dist.destroy_process_group()


def _write_record(args: argparse.Namespace, record: Any) -> None:
    """The run record to ``-o``, when given (rank 0 only reaches here with a record)."""
    if args.output:
        write_output(args.output, record.to_json())


def _share_rank(args: argparse.Namespace, plan: object, model: object) -> int:
    """One rank of a run of uneven shares or an injected slowdown (``planner.runtime.shares_run``, CPU gloo)."""
    import torch.distributed as dist

    from planner.runtime.shares_run import parse_injection, run_shares

    inject = parse_injection(args.inject_slowdown)
    dist.init_process_group("gloo")
    record = _on_group(lambda: run_shares(plan, model, steps=args.steps, warmup=args.warmup, seed=args.seed, inject=inject))  # type: ignore[arg-type]
    if record is None:
        return EXIT_OK
    _write_record(args, record)
    text = record.to_json()
    print(text if args.json else f"run: median step {record.step_time.median_s:.4g} s, losses {[round(x, 4) for x in record.losses]}", end="" if args.json else "\n")
    return EXIT_OK
