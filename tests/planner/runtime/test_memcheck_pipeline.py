"""``check-memory`` of pipelined ranks as ``torch.distributed.pipelining`` runs them: one receive buffer
per micro-batch for each chunk's input and each chunk's output gradient, the last stage's logits kept
until its backward, and the cost model's prediction of those ranks within the band (+10 % / -3 %)."""

from __future__ import annotations

import pytest

import planner
from differential_draw import CLUSTER, write_models
from plan_helpers import BATCH, SEQ
from planner.runtime.memcheck.check import check_memory

GIB = float(1 << 30)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return write_models(tmp_path_factory.mktemp("memcheck-pipeline-models"))


def _ranks(model: str, gpus: int, **settings: object) -> list:
    plan = planner.config_plan(model=model, cluster=CLUSTER, gpus=gpus, global_batch=BATCH, seq_len=SEQ, **settings)
    return check_memory(plan, model=model, full_depth=True).ranks


def test_each_stage_holds_a_receive_buffer_per_micro_batch(models: dict[str, str]) -> None:
    """Llama (h 32) over pp 2, 1F1B, micro-batches of 2 x the sequence: the first stage holds one
    bf16 gradient buffer per micro-batch, the last one activation buffer per micro-batch, and the
    prediction prices exactly those (torch 2.13 pipelining/stage.py ``_setup_forward_recv_info``,
    ``_create_grad_recv_info``)."""
    micro_batches = BATCH // 2
    boundary = 2 * SEQ * 32 * 2  # micro-batch x sequence x hidden x bf16
    for rank in _ranks(models["llama"], 2, tp=1, pp=2, schedule="1f1b", micro_batch=2):
        assert rank.measured_gib["buffers"] == pytest.approx(micro_batches * boundary / GIB, rel=1e-9)
        assert rank.predicted_gib["buffers"] == pytest.approx(micro_batches * boundary / GIB, rel=1e-9)
        assert -0.03 <= rank.error <= 0.10, (rank.pp_rank, rank.error)


def test_last_stage_keeps_its_logits_to_the_loss_backward(models: dict[str, str]) -> None:
    """Llama's last stage (block, final RMSNorm, head) at pp 4, one micro-batch of the whole batch:
    the peak is the loss's backward, with the bf16 logits still referenced by the stage's
    ``fwd_cache`` (``costmodel.engines.EngineTerms.pp_keeps_logits``) and the final norm's eager
    saved tensors (``costmodel.layer_other.EAGER_RMSNORM_BYTES``): within the band (it was -9.6 %
    with the logits held and neither priced)."""
    last = _ranks(models["llama"], 4, tp=1, pp=4, schedule="1f1b", micro_batch=BATCH)[-1]
    assert last.pp_rank == 3
    assert -0.03 <= last.error <= 0.10, last.error


def test_interleaved_rank_peaks_before_every_chunk_has_gradients(models: dict[str, str]) -> None:
    """GPT-2 at pp 2, v 2, two micro-batches: every forward runs in the warm-up, and the chunk that
    runs the first backwards has freed its activations before the other chunk's gradients appear
    (``costmodel.rank_phases.backwards_to_all_grads``); it was priced +20 % with every gradient
    beside three of the four chunk-micro-batches."""
    for rank in _ranks(models["gpt2"], 4, tp=1, pp=2, vpp=2, schedule="interleaved-1f1b", micro_batch=2, zero=1):
        assert -0.03 <= rank.error <= 0.10, (rank.pp_rank, rank.error)
