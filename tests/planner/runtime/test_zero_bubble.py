"""Zero-bubble pipelines (``zb-h1``, torch's ``ScheduleInterleavedZeroBubble``) in the native runtime.

With tensor parallelism and the vocab-parallel loss a zb-h1 plan trains like one process (the
tolerances of ``equality.py``, 4 CPU gloo processes). Selective recomputation stays a native rule
(``native-zb-h1-selective``) because torch refuses it: the schedule's split backward (input gradients
with the graph retained, then weight gradients) runs twice through each layer, and torch 2.13.0's
selective activation checkpointing serves each cached tensor once; the last test shows that
limitation on one layer, outside the runtime.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from equality import Job, compare, reference, results, run_world
from plan_helpers import make_plan, write_llama_config

SHAPES = {
    "zb_tp_sp": {"pp": 2, "tp": 2, "sp": True, "schedule": "zb-h1"},
    "zb_tp": {"pp": 2, "tp": 2, "sp": False, "schedule": "zb-h1"},
}


def test_zero_bubble_with_tp_equals_one_process(tmp_path: Path) -> None:
    llama = write_llama_config(tmp_path)
    jobs = [Job(f"llama-{name}", llama, make_plan(llama, cfg).to_json()) for name, cfg in SHAPES.items()]
    run_world(4, jobs, tmp_path)
    ref = reference(llama)
    for job in jobs:
        compare(ref, results(tmp_path, job.name))


def _save_matmuls(ctx: object, op: object, *args: object, **kwargs: object) -> CheckpointPolicy:
    packet = getattr(op, "overloadpacket", op)
    return CheckpointPolicy.MUST_SAVE if packet is torch.ops.aten.mm else CheckpointPolicy.PREFER_RECOMPUTE


def test_selective_checkpointing_refuses_a_second_backward() -> None:
    """What ``stage_backward_input`` then ``stage_backward_weight`` (torch/distributed/pipelining/
    _backward.py) do to one selectively checkpointed layer: input gradients with the graph retained,
    then weight gradients. torch raises on the second pass; full checkpointing runs both."""
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(8, 8, bias=False), nn.Tanh(), nn.Linear(8, 8, bias=False))
    x = torch.randn(4, 8, requires_grad=True)
    weights = list(layer.parameters())

    def two_backwards(context_fn: object) -> None:
        kwargs = {"context_fn": context_fn} if context_fn else {}
        out = checkpoint(layer, x, use_reentrant=False, **kwargs).sum()
        torch.autograd.grad(out, [x], retain_graph=True)
        torch.autograd.grad(out, weights)

    two_backwards(None)  # full recomputation: both passes run
    with pytest.raises(RuntimeError, match="backward an extra time"):
        two_backwards(partial(create_selective_checkpoint_contexts, _save_matmuls))


WEIGHT_PASS = """
import sys
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)


def weight_gradients(fsdp: bool) -> int:
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 8))
    if fsdp:
        fully_shard(layer, reshard_after_forward=True)
    x = torch.randn(4, 8, requires_grad=True)
    out = layer(x).sum()
    torch.autograd.grad(out, [x], retain_graph=True)
    return sum(g is not None for g in torch.autograd.grad(out, list(layer.parameters()), allow_unused=True))


print(weight_gradients(False), weight_gradients(True))
dist.destroy_process_group()
"""


def test_fsdp2_zero3_leaves_the_weight_pass_no_gradient(tmp_path: Path) -> None:
    """Rule ``native-zb-h1-zero3``: what ``stage_backward_input`` then ``stage_backward_weight`` do to
    a unit. A plain module's weight pass finds all four parameters; an FSDP2 unit resharded after the
    forward (ZeRO 3) exposes its sharded parameters, which the graph never used, so the pass finds
    none and the stage would step on no gradient (a pp 2 GPT-2 zb-h1 ZeRO 3 plan's last stage did,
    before the rule; ``Runtime._check_gradients`` now fails such a step loudly)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", WEIGHT_PASS, str(tmp_path / "store")], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["4", "0"]
