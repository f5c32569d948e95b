"""The search's lower bounds against the exhaustive solver: for every base option of small spaces, the
bound never exceeds the fastest step of any configuration of that option's shape (every split and
recomputation, fitting or not; with the memory-pressure floor, of those that fit), and the tightened
bound is at least the plain S/p one."""

from __future__ import annotations

from collections import defaultdict

import pytest

from costmodel.specs import ClusterSpec, EfficiencySpec, EmbeddingLayer, GPUSpec, HeadLayer, ModelSpec, NormLayer, ParallelConfig, TransformerLayer
from costmodel.step import estimate_step, straggler_time
from costmodel.table import build_cost_table
from search.bounds import bottleneck_floor_s, bound_s, bubble_divisor, fastest_sum_s, makespan_floor_s, optimizer_floor_s, p2p_floor_s
from search.exhaustive import configurations
from search.types import SearchRequest

REL = 1e-9


def model(blocks: int, experts: int = 0, vocab: int = 4096) -> ModelSpec:
    dense = TransformerLayer(hidden_size=128, num_heads=4, num_kv_heads=2, head_dim=32, ffn_hidden_size=384, ffn_act="swiglu", norm="rmsnorm")
    moe = dense.model_copy(update={"num_experts": experts, "moe_top_k": 2}) if experts else dense
    body = tuple(moe if i % 2 else dense for i in range(blocks))
    return ModelSpec(name="m", layers=(EmbeddingLayer(vocab_size=vocab, hidden_size=128),) + body
                     + (NormLayer(hidden_size=128), HeadLayer(vocab_size=vocab, hidden_size=128)))


def cluster(gpus_per_node: int) -> ClusterSpec:
    gpu = GPUSpec(name="g", peak_bf16_tflops=100, hbm_gib=1.0, hbm_bandwidth_gbps=1000)
    eff = EfficiencySpec(gemm_max=0.7, gemm_half_gflop=0.5, attention=0.5, memory=0.7, intra_node=0.8, network=0.8)
    return ClusterSpec(name="c", gpu=gpu, gpus_per_node=gpus_per_node, intra_node_bandwidth_gbps=150, network_bandwidth_gbps=12.5,
                       intra_node_latency_us=2, network_latency_us=5, efficiency=eff)


CASES = [  # (blocks, experts, gpus, GPUs per node, global batch, seq len, target)
    (3, 0, 4, 2, 8, 256, "megatron"),
    (4, 0, 8, 2, 8, 128, "torchtitan"),
    (4, 4, 8, 4, 4, 128, "deepspeed"),
    (3, 0, 4, 4, 4, 512, "megatron"),
    (3, 0, 4, 2, 8, 256, "native"),  # the eager runtime's terms (issue 33): unfused accumulation, FSDP2 states, ZB-H1
    (4, 4, 4, 4, 4, 128, "native"),  # 4 GPUs: 207,108 configurations (8 GPUs: 635,160, ~100 s of CI for the same terms)
]


def _shape(cfg) -> tuple:
    return (cfg.tp, cfg.pp, cfg.dp, cfg.cp, cfg.ep, cfg.vpp, cfg.sp, cfg.zero, cfg.micro_batch, cfg.schedule, cfg.tp_comm_overlap)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}blocks-{c[1]}experts-{c[2]}gpus-{c[6]}" for c in CASES])
def test_bound_never_exceeds_the_fastest_configuration_of_its_shape(case: tuple) -> None:
    blocks, experts, gpus, per_node, batch, seq, target = case
    spec, hw = model(blocks, experts), cluster(per_node)
    req = SearchRequest(gpus=gpus, global_batch=batch, seq_len=seq, target=target, max_vpp=2)
    table = build_cost_table(spec, hw)
    fastest: dict[tuple, float] = defaultdict(lambda: float("inf"))
    fastest_fitting: dict[tuple, float] = defaultdict(lambda: float("inf"))
    base: dict[tuple, object] = {}
    for cfg in configurations(spec, hw, req):
        key, step = _shape(cfg), estimate_step(table, cfg)
        fastest[key] = min(fastest[key], step.step_time_s)
        if step.fits:
            fastest_fitting[key] = min(fastest_fitting[key], step.step_time_s)
        base.setdefault(key, cfg.model_copy(update={"stage_layers": None, "layer_recompute": None, "recompute": "none"}))
    assert len(base) > 20
    tighter = pressed = 0
    for key, cfg in base.items():
        bound = bound_s(table, cfg, {}, pressure=False)
        assert bound <= fastest[key] * (1 + REL), (key, bound, fastest[key])
        pressured = bound_s(table, cfg, {})  # the memory-pressure floor holds for what fits (inf: nothing does)
        assert bound <= pressured <= fastest_fitting[key] * (1 + REL), (key, pressured, fastest_fitting[key])
        pressed += pressured > bound * (1 + 1e-6)
        total, d = fastest_sum_s(table, cfg), bubble_divisor(cfg)
        plain = (cfg.num_microbatches - 1 / d) * total / cfg.pp + total / d + hw.efficiency.step_fixed_s + straggler_time(gpus, per_node)
        assert bound >= plain * (1 - REL)
        tighter += bound > plain * (1 + 1e-6)
    assert tighter > len(base) // 2  # the new terms bite on most shapes
    assert pressed > 0, "memory pressure binds on some shapes of every case"


def test_each_term_is_a_floor_of_its_part_of_the_step() -> None:
    spec, hw = model(4), cluster(2)
    table = build_cost_table(spec, hw)
    req = SearchRequest(gpus=4, global_batch=8, seq_len=256, target="megatron", max_vpp=2)
    for n, cfg in enumerate(configurations(spec, hw, req)):
        if n % 11:
            continue  # a spread sample of the 2,000-odd configurations
        step = estimate_step(table, cfg)
        ranks = [t.time_s(hw.efficiency.overlap_slowdown) for t in step.ranks.types]
        assert bottleneck_floor_s(table, cfg) <= max(ranks) * (1 + REL)
        assert makespan_floor_s(table, cfg) <= max(ranks) * (1 + REL)
        assert optimizer_floor_s(table, cfg) <= step.time_breakdown_s["optimizer"] * (1 + REL)
        assert p2p_floor_s(table, cfg) <= step.step_time_s - step.pipeline_s


def test_the_bottleneck_floor_is_the_best_contiguous_cut() -> None:
    spec, hw = model(4), cluster(2)
    table = build_cost_table(spec, hw)
    cfg = next(c for c in configurations(spec, hw, SearchRequest(gpus=4, global_batch=4, seq_len=256, max_vpp=2))
               if c.pp == 4 and c.vpp == 1 and c.tp == 1)
    best = min(max(t.time_s(hw.efficiency.overlap_slowdown) for t in estimate_step(table, cfg.model_copy(update={
        "stage_layers": sizes, "layer_recompute": None, "recompute": "none"})).ranks.types)
        for sizes in _compositions(len(spec.layers), 4))
    floor = bottleneck_floor_s(table, cfg)
    assert best * (1 - 1e-4) <= floor <= best  # bisection brackets the optimum from below


def _compositions(n: int, parts: int) -> list[tuple[int, ...]]:
    if parts == 1:
        return [(n,)]
    return [(k,) + rest for k in range(1, n - parts + 2) for rest in _compositions(n - k, parts - 1)]


def test_the_makespan_floor_sees_the_head_on_an_interleaved_rank() -> None:
    spec, hw = model(8, vocab=32000), cluster(2)
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(pp=4, vpp=2, schedule="interleaved-1f1b", global_batch=8, seq_len=256)
    total = fastest_sum_s(table, cfg)
    floor = makespan_floor_s(table, cfg)
    best = min(max(t.time_s(hw.efficiency.overlap_slowdown) for t in estimate_step(table, cfg.model_copy(update={
        "stage_layers": sizes, "layer_recompute": None, "recompute": "none"})).ranks.types)
        for sizes in _compositions(len(spec.layers), 8))
    assert total / 4 < floor <= best * (1 + REL)  # above the plain S/p, never above the best split


def _best_fitting_rank_s(table: object, cfg: ParallelConfig, layers: int) -> float:
    """The slowest rank of the best two-stage split and per-block recomputation (four blocks) that fits."""
    import itertools

    best = float("inf")
    for sizes in _compositions(layers, 2):
        for modes in itertools.product(("none", "selective", "full"), repeat=4):
            step = estimate_step(table, cfg.model_copy(update={"stage_layers": sizes, "layer_recompute": ("none", *modes, "none", "none")}))
            if step.fits:
                best = min(best, max(step.rank_time_s))
    return best


@pytest.mark.parametrize("hbm", [1.11, 1.12])
def test_the_pressure_floor_sees_the_recomputation_memory_forces(hbm: float) -> None:
    """Memory tight enough that the first of two ranks cannot keep every activation: the best split
    and per-layer recomputation that fit have a slowest rank well above the time-only floors; the
    pressure floor lies between those floors and it."""
    from search.pressure import pressure_floor_s

    spec, hw = model(4), cluster(2)
    hw = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"hbm_gib": hbm}), "memory_headroom_gib": 0.0})
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(pp=2, dp=1, micro_batch=2, global_batch=16, seq_len=2048, engine="megatron")  # the memory hbm was tuned to
    best = _best_fitting_rank_s(table, cfg, len(spec.layers))
    time_only = max(bottleneck_floor_s(table, cfg), makespan_floor_s(table, cfg))
    floor = pressure_floor_s(table, cfg, {})
    assert time_only * 1.05 < floor <= best * (1 + REL) and floor > 0.9 * best


@pytest.mark.parametrize(("network_gbps", "microbatches"), [(0.5, 4), (0.5, 8), (2.0, 4)])
def test_the_data_parallel_floor_at_the_slowest_rank_floor_holds(network_gbps: float, microbatches: int) -> None:
    """Gradient reduction over a slow network, four pipeline ranks: the slack of the later ranks is
    capped by the slowest rank's time (term 5 taken at term 1's floor), which raises the floor above
    the plain (p − 1)/v one, and the first rank, which has no slack, raises it again; the bound stays
    under every split and recomputation."""
    from search.bounds import _dp_floor, view_sums
    from costmodel.step import local_config

    spec, hw = model(8), cluster(1)
    hw = hw.model_copy(update={"network_bandwidth_gbps": network_gbps, "gpu": hw.gpu.model_copy(update={"hbm_gib": 40.0})})
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(pp=4, dp=2, micro_batch=1, global_batch=2 * microbatches, seq_len=512, engine="megatron")  # fused kernels: short ranks, so the reduction outlasts the slack
    best = min(estimate_step(table, cfg.model_copy(update={"stage_layers": sizes, "recompute": mode})).step_time_s
               for sizes in _compositions(len(spec.layers), 4) for mode in ("none", "selective", "full"))
    v = view_sums(table, local_config(table, cfg, "none"))
    slowest = max(bottleneck_floor_s(table, cfg), makespan_floor_s(table, cfg))
    assert _dp_floor(table, cfg, v, slowest) > _dp_floor(table, cfg, v)
    # the first rank's exposure (search.exposure) raises the bound further; it stays under every step
    assert bound_s(table, cfg, {}, pressure=False) < bound_s(table, cfg, {}) <= best * (1 + REL)


@pytest.mark.parametrize(("blocks", "network_gbps", "microbatches", "zero"), [(8, 0.5, 8, 0), (8, 1.0, 4, 0), (8, 1.0, 8, 1), (12, 0.5, 4, 1)])
def test_the_later_ranks_exposure_floor_holds(blocks: int, network_gbps: float, microbatches: int, zero: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Gradient reduction over a slow network, four pipeline ranks: every rank after the first has
    at most r·M of slack, so placing the blocks exposes some rank's reduction (search.rank_exposure);
    that raises the bound, which stays under every split and recomputation. (8, 1.0, 4, 0) caught a
    version that took the floor at the breakpoints only, where the other layers' room grows inside an
    interval."""
    import search.bounds

    spec, hw = model(blocks), cluster(1)
    hw = hw.model_copy(update={"network_bandwidth_gbps": network_gbps, "gpu": hw.gpu.model_copy(update={"hbm_gib": 40.0})})
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(pp=4, dp=2, micro_batch=1, global_batch=2 * microbatches, seq_len=512, engine="megatron", zero=zero)
    best = min(estimate_step(table, cfg.model_copy(update={"stage_layers": sizes, "recompute": mode})).step_time_s
               for sizes in _compositions(len(spec.layers), 4) for mode in ("none", "selective", "full"))
    raised = bound_s(table, cfg, {})
    monkeypatch.setattr(search.bounds, "later_ranks_floor_s", lambda *args: 0.0)
    assert bound_s(table, cfg, {}) < raised <= best * (1 + REL)


@pytest.mark.parametrize("hbm, tight", [(1.325, True), (1.365, False)])
def test_the_pressure_floor_sees_the_transient_of_the_modes_it_uses(hbm: float, tight: bool) -> None:
    """Native MoE blocks: selective recomputation saves most of a block's activations but makes its
    transient the whole recomputed block, where without recomputation it is the combine's backward
    alone (``costmodel.activations``). The floor prices each mix of modes with the largest transient
    among them (``search.pressure._tiered_blocks``): never above the best split and per-layer
    recomputation that fit, and at 1.325 GiB within 1 % of it (the least transient of any mode put it
    5 % under)."""
    from search.pressure import pressure_floor_s

    base = model(4, experts=4)
    spec = base.model_copy(update={"layers": (base.layers[0],) + (base.layers[2],) * 4 + base.layers[-2:]})
    hw = cluster(2)
    hw = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"hbm_gib": hbm}), "memory_headroom_gib": 0.0})
    table = build_cost_table(spec, hw)
    cfg = ParallelConfig(pp=2, dp=1, micro_batch=2, global_batch=16, seq_len=2048, engine="native")
    best = _best_fitting_rank_s(table, cfg, len(spec.layers))
    floor = pressure_floor_s(table, cfg, {})
    assert floor <= best * (1 + REL)
    assert floor > 0.99 * best or not tight
