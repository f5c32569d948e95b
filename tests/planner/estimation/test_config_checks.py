"""Each rule of ``planner.estimation.config_checks.parallel_problems``, on small hand-built models."""

from __future__ import annotations

from costmodel.specs import (
    EmbeddingLayer,
    GenericLayer,
    HeadLayer,
    ModelSpec,
    NormLayer,
    ParallelConfig,
    TransformerLayer,
)
from planner.estimation.config_checks import parallel_problems


def _model(layers: int = 8, heads: int = 16, kv_heads: int = 16, experts: int = 0) -> ModelSpec:
    """A decoder LM: embedding, ``layers`` blocks, final norm, head (``layers + 3`` model layers)."""
    block = TransformerLayer(
        hidden_size=1024,
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=64,
        ffn_hidden_size=4096,
        num_experts=experts,
        moe_top_k=2 if experts else 0,
    )
    return ModelSpec(
        name="toy",
        layers=(
            EmbeddingLayer(vocab_size=1000, hidden_size=1024),
            *[block] * layers,
            NormLayer(hidden_size=1024),
            HeadLayer(vocab_size=1000, hidden_size=1024),
        ),
    )


def _cfg(**overrides: object) -> ParallelConfig:
    fields: dict[str, object] = {"global_batch": 64, "seq_len": 2048}
    fields.update(overrides)
    return ParallelConfig(**fields)


def test_valid_config_has_no_problems() -> None:
    cfg = _cfg(tp=4, pp=2, cp=2, dp=2, vpp=2, sp=True, micro_batch=2, global_batch=32)
    assert parallel_problems(_model(), cfg, gpus=32) == []


def test_degrees_not_dividing_gpus_print_every_factor() -> None:
    problems = parallel_problems(_model(layers=8, heads=16), _cfg(tp=8, pp=4, cp=2), gpus=48)
    assert problems == [
        "tp 8 x pp 4 x cp 2 = 64 does not divide 48 GPUs (pick degrees whose product divides the GPU count)"
    ]


def test_dp_inconsistent_with_gpus_says_the_right_dp() -> None:
    problems = parallel_problems(_model(), _cfg(tp=2, dp=2, global_batch=64), gpus=16)
    assert problems == ["dp 2 x tp 2 x pp 1 x cp 1 = 4 != 16 GPUs (set dp = 16 / 2 = 8)"]


def test_heads_not_divisible_by_tp() -> None:
    problems = parallel_problems(_model(heads=12, kv_heads=12), _cfg(tp=8), gpus=8)
    assert problems == ["12 attention heads are not divisible by tp 8 (pick a tp that divides 12)"]


def test_kv_heads_not_divisible_by_tp() -> None:
    problems = parallel_problems(_model(heads=16, kv_heads=2), _cfg(tp=4), gpus=4)
    assert problems == ["2 KV heads are not divisible by tp 4 (pick a tp that divides 2)"]


def test_more_stages_than_transformer_layers() -> None:
    problems = parallel_problems(_model(layers=4), _cfg(pp=4, vpp=2, global_batch=8), gpus=4)
    assert problems == ["pp 4 x vpp 2 = 8 pipeline stages exceed 4 transformer layers (use at most 4 stages)"]


def test_stages_counted_against_all_layers_without_transformer_blocks() -> None:
    conv = GenericLayer(name="conv", params=10, fwd_flops_per_token=1.0)
    model = ModelSpec(name="convnet", layers=(conv, conv, conv))
    assert parallel_problems(model, _cfg(pp=3), gpus=3) == []
    assert parallel_problems(model, _cfg(pp=4), gpus=4) == [
        "pp 4 x vpp 1 = 4 pipeline stages exceed 3 layers (use at most 3 stages)"
    ]


def test_sequence_not_divisible_by_two_cp() -> None:
    problems = parallel_problems(_model(), _cfg(cp=4, dp=1, seq_len=2052, global_batch=8), gpus=4)
    assert problems == [
        "seq-len 2052 is not divisible by 2 x cp 4 = 8 (context parallelism gives each rank two equal chunks)"
    ]


def test_cp_one_accepts_odd_sequence() -> None:
    assert parallel_problems(_model(), _cfg(seq_len=2047), gpus=1) == []


def test_sequence_parallel_needs_tokens_divisible_by_tp() -> None:
    problems = parallel_problems(_model(), _cfg(tp=4, sp=True, seq_len=2050), gpus=4)
    assert problems == [
        "seq-len 2050 / cp 1 = 2050 tokens are not divisible by tp 4 under sequence parallelism "
        "(pick a seq-len that tp x cp divides)"
    ]


def test_global_batch_not_divisible_by_micro_batch_times_dp() -> None:
    problems = parallel_problems(_model(), _cfg(dp=8, micro_batch=3, global_batch=64), gpus=8)
    assert problems == [
        "global batch 64 is not divisible by micro-batch 3 x dp 8 = 24 (pick a global batch that is a multiple of 24)"
    ]


def test_vpp_without_pipeline() -> None:
    problems = parallel_problems(_model(), _cfg(vpp=2), gpus=1)
    assert problems == ["vpp 2 needs pp > 1 (interleaving splits pipeline ranks; set vpp 1 or raise pp)"]


def test_interleaving_needs_microbatches_multiple_of_pp() -> None:
    problems = parallel_problems(_model(), _cfg(pp=4, vpp=2, dp=1, global_batch=6), gpus=4)
    assert problems == [
        "global batch 6 / (micro-batch 1 x dp 1) = 6 micro-batches is not a multiple of pp 4 under the "
        "interleaved schedule (change the global batch or micro-batch, or set vpp 1)"
    ]
    assert parallel_problems(_model(), _cfg(pp=4, vpp=1, dp=1, global_batch=6), gpus=4) == []


def test_sequence_parallel_without_tensor_parallel() -> None:
    problems = parallel_problems(_model(), _cfg(sp=True), gpus=1)
    assert problems == ["sp needs tp > 1 (sequence parallelism splits over the TP group; turn sp off or raise tp)"]


def test_expert_parallel_rules() -> None:
    moe = _model(experts=6)
    assert parallel_problems(moe, _cfg(dp=4, ep=4, global_batch=64), gpus=4) == [
        "6 experts are not divisible by ep 4 (pick an ep that divides 6)"
    ]
    assert parallel_problems(moe, _cfg(dp=4, ep=3, global_batch=64), gpus=4) == [
        "ep 3 does not divide dp 4 x cp 1 = 4 (expert parallelism is carved out of dp x cp)"
    ]
    assert parallel_problems(moe, _cfg(dp=2, cp=3, ep=6, seq_len=2052, global_batch=64), gpus=6) == []


def test_expert_parallel_on_dense_model() -> None:
    problems = parallel_problems(_model(), _cfg(dp=2, ep=2), gpus=2)
    assert problems == ["ep 2 needs a mixture-of-experts model (toy has no experts; set ep 1)"]


def test_stage_layers_count_and_sum() -> None:
    model = _model(layers=8)  # 11 model layers
    assert parallel_problems(model, _cfg(pp=2, stage_layers=(5, 6)), gpus=2) == []
    assert parallel_problems(model, _cfg(pp=2, stage_layers=(5, 5)), gpus=2) == [
        "stage_layers sum to 10, but toy has 11 layers (make them sum to 11)"
    ]
    assert parallel_problems(model, _cfg(pp=2, stage_layers=(3, 4, 4)), gpus=2) == [
        "stage_layers has 3 entries, expected pp 2 x vpp 1 = 2"
    ]
    assert parallel_problems(model, _cfg(pp=2, stage_layers=(-1, 12)), gpus=2) == [
        "stage_layers [-1, 12] has negative counts (use 0 or more)"
    ]


def test_layer_recompute_length() -> None:
    problems = parallel_problems(_model(layers=8), _cfg(layer_recompute=("full",) * 8), gpus=1)
    assert problems == ["layer_recompute has 8 entries, but toy has 11 layers (give one entry per layer)"]


def test_non_positive_numbers_reported_alone() -> None:
    cfg = ParallelConfig.model_construct(**{**_cfg().model_dump(), "tp": 0, "micro_batch": -2})
    assert parallel_problems(_model(), cfg, gpus=0) == [
        "gpus is 0 (must be a positive integer)",
        "tp is 0 (must be a positive integer)",
        "micro-batch is -2 (must be a positive integer)",
    ]


def test_every_problem_is_returned_at_once() -> None:
    cfg = _cfg(tp=8, pp=16, cp=2, vpp=2, sp=True, seq_len=2050, global_batch=10)
    problems = parallel_problems(_model(layers=8, heads=12, kv_heads=12), cfg, gpus=48)
    assert [problem.rsplit(" (", 1)[0] for problem in problems] == [
        "tp 8 x pp 16 x cp 2 = 256 does not divide 48 GPUs",
        "12 attention heads are not divisible by tp 8",
        "pp 16 x vpp 2 = 32 pipeline stages exceed 8 transformer layers",
        "seq-len 2050 is not divisible by 2 x cp 2 = 4",
        "seq-len 2050 / cp 2 = 1025 tokens are not divisible by tp 8 under sequence parallelism",
        "global batch 10 / (micro-batch 1 x dp 1) = 10 micro-batches is not a multiple of pp 16 under the "
        "interleaved schedule",
    ]
