"""The AdamW update as a memory phase (``costmodel.optimizer_step``): 16 bytes per local parameter
during PyTorch's fused AdamW (the runtime's on CUDA, and check-memory's), measured with torch's
memory tracker; sharded as FSDP2 shards."""

from __future__ import annotations

import pytest

from costmodel.engines import engine_terms
from costmodel.optimizer_step import ADAMW_STEP_BYTES, optimizer_step_bytes
from costmodel.ranks import RankSums
from costmodel.specs import ParallelConfig


def _sums(params: float, expert: float = 0.0) -> RankSums:
    return RankSums(fwd_s=0.0, bwd_s=0.0, recompute_s=0.0, exposed_s=0.0, hidden_s=0.0, act_bytes=0.0, params=params,
                    expert_params=expert, links={}, work_bytes=0.0, largest_layer_params=params, boundary_bytes=0.0)


@pytest.mark.parametrize(("how", "temporary"), [("fused", 0), ("foreach", 4)])
def test_adamw_holds_the_priced_bytes_per_parameter_at_its_peak(how: str, temporary: int) -> None:
    """fp32 parameters and gradients, m and v: torch's tracker over one ``AdamW(fused=True).step()``
    (the runtime's optimizer on CUDA); the foreach path, which the model does not price, adds
    ``_foreach_sqrt``'s 4-byte temporary."""
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.distributed._tools.mem_tracker import MemTracker

    model = nn.Sequential(nn.Linear(64, 128), nn.Linear(128, 64))
    n = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **{how: True})
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()  # creates the states
    tracker = MemTracker()
    tracker.track_external(model, opt)
    with tracker:
        opt.step()
    peak = next(iter(tracker.get_tracker_snapshot("peak").values()))["Total"]
    steps = 4 * len(list(model.parameters()))  # one fp32 step counter per parameter tensor
    assert peak - steps == n * (sum(ADAMW_STEP_BYTES) + temporary)


@pytest.mark.parametrize(("zero", "shard"), [(0, 1), (1, 4), (2, 4), (3, 4)])
def test_the_phase_is_sharded_from_zero_1(zero: int, shard: int) -> None:
    cfg = ParallelConfig(dp=4, zero=zero, micro_batch=1, global_batch=4, seq_len=16, engine="native")
    parts = optimizer_step_bytes(cfg, _sums(1000.0), engine_terms(cfg))
    assert parts is not None
    got = (parts["params"], parts["grads"], parts["optimizer_states"], parts["buffers"])
    assert got == tuple(1000.0 * b / shard for b in ADAMW_STEP_BYTES)
    assert parts["activations"] == 0.0


def test_experts_shard_over_their_own_group_and_other_engines_have_no_such_phase() -> None:
    cfg = ParallelConfig(dp=4, ep=2, zero=3, micro_batch=1, global_batch=4, seq_len=16, engine="native")
    parts = optimizer_step_bytes(cfg, _sums(1000.0, expert=600.0), engine_terms(cfg))
    assert parts is not None and parts["params"] == 4 * (400.0 / 4 + 600.0 / 2)
    other = ParallelConfig(dp=4, zero=3, micro_batch=1, global_batch=4, seq_len=16, engine="megatron")
    assert optimizer_step_bytes(other, _sums(1000.0), engine_terms(other)) is None


def test_the_update_never_exceeds_the_priced_peak() -> None:
    """Why ``costmodel.rank_memory`` prices no update phase: over 600 seeded configurations, no rank's
    AdamW update holds more than its priced forward / backward peak."""
    import random

    from costmodel.rank_memory import engine_terms_memo, rank_parts
    from costmodel.step import estimate_step
    from tests.costmodel.test_memory_invariants import TABLES, _draw, _valid

    rng, checked = random.Random(41), 0
    while checked < 600:
        name, fields = _draw(rng)
        cfg = _valid(name, fields)
        if cfg is None:
            continue
        checked += 1
        table, step = TABLES[name], estimate_step(TABLES[name], cfg)
        for r in range(cfg.pp):
            update = optimizer_step_bytes(cfg, step.ranks.rank(r), engine_terms_memo(table, cfg))
            assert update is not None and sum(update.values()) <= sum(rank_parts(table, cfg, step.ranks.rank(r), r)[0].values())
