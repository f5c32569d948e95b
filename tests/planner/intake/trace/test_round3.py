"""Issue 25: per-layer attention layouts, a fixed-length speech encoder, Mamba's pipeline link, and
``estimate --trace`` on the Whisper, Mamba, Gemma 3 and Llama 4 config.json files (small shapes)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import planner

sys.path.insert(0, str(Path(__file__).with_name("corpus")))
from hf_configs import SMALL  # noqa: E402

from costmodel.flops import model_flops_per_step  # noqa: E402
from costmodel.specs import GenericLayer, TransformerLayer  # noqa: E402
from planner.intake.trace import model_from_hf_config, trace_module  # noqa: E402
from planner.intake.trace.load import hf_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]


def _config(tmp_path: Path, name: str) -> str:
    path = tmp_path / name / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(SMALL[name]))
    return str(path)


def _blocks(spec) -> list[TransformerLayer]:
    return [x for x in spec.layers if isinstance(x, TransformerLayer)]


def test_gemma3_windows_stay_on_the_sliding_layers_only(tmp_path: Path) -> None:
    """Sliding layers and global layers are traced apart (their repeat signatures differ), so the
    spec holds the window on two layers of three (pattern 3 in the small config) and none on the rest."""
    spec = model_from_hf_config(_config(tmp_path, "hf_gemma3"), seq_len=32)
    assert [b.sliding_window for b in _blocks(spec)] == [8, 8, None, 8, 8, None]


def test_llama4_chunks_come_from_the_traced_layers(tmp_path: Path) -> None:
    spec = model_from_hf_config(_config(tmp_path, "hf_llama4"), seq_len=32)
    assert [b.attention_chunk for b in _blocks(spec)] == [8, 8, 8, None]


def test_whisper_encoder_keeps_its_length_whatever_the_decoder_tokens(tmp_path: Path) -> None:
    """The encoder's blocks and front-end run over max_source_positions (40 here) frames; --seq-len
    counts decoder tokens. A spec traced at 32 decoder tokens predicts the FLOPs of a trace at 64."""
    module, make_inputs, _ = hf_model(_config(tmp_path, "hf_whisper"))
    short = trace_module(module, make_inputs, micro_batch=1, seq_len=32)
    long = trace_module(module, make_inputs, micro_batch=1, seq_len=64)
    blocks = _blocks(short.spec)
    encoder = [b for b in blocks if b.fixed_seq_len]
    decoder = [b for b in blocks if b.cross_attention]
    assert len(encoder) == len(decoder) == 2
    assert all(b.fixed_seq_len == 40 and not b.causal for b in encoder)
    assert all(b.cross_seq_len == 40 and b.fixed_seq_len == 0 for b in decoder)
    front = [x for x in short.spec.layers if isinstance(x, GenericLayer) and "conv" in x.name]
    assert front and all(x.fixed_seq_len == 40 for x in front)
    predicted = model_flops_per_step(short.spec.layers, 1, 64) / 3
    assert predicted == pytest.approx(long.fwd_flops, rel=1e-6)


def test_mamba_sends_the_hidden_state_across_a_cut_not_the_logits(tmp_path: Path) -> None:
    spec = model_from_hf_config(_config(tmp_path, "hf_mamba"), seq_len=32)
    sent = [x.output_bytes_per_token for x in spec.layers if isinstance(x, GenericLayer)]
    hidden = SMALL["hf_mamba"]["hidden_size"] * 2
    assert sent[-1] == 0.0 and max(sent) == hidden  # the vocabulary projection's logits stay put


@pytest.mark.parametrize("name", ["hf_mamba", "hf_gemma3", "hf_llama4"])
def test_estimate_trace_runs_on_the_config(name: str, tmp_path: Path) -> None:
    run = dict(cluster="dgx-a100", gpus=8, global_batch=16, seq_len=64, tp=1, pp=2)
    assert planner.estimate(model=_config(tmp_path, name), trace=True, **run).step_time_s > 0


def test_cli_estimate_trace_runs_on_a_whisper_config(tmp_path: Path) -> None:
    """transformers builds Whisper without SDPA being forced on it, and is fed input_features (its
    fixed 80-mel, 3,000-frame shape scaled to the small config) and decoder_input_ids."""
    proc = subprocess.run([sys.executable, "cli.py", "estimate", "--model", _config(tmp_path, "hf_whisper"), "--trace",
                           "--cluster", "dgx-a100", "--gpus", "8", "--global-batch", "16", "--seq-len", "64",
                           "--tp", "1", "--pp", "2", "--json"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-400:]
    assert json.loads(proc.stdout)["step_time_s"] > 0


def test_swin_on_timms_matmul_path_is_costed_per_image_as_traced() -> None:
    """timm's Swin writes its window scores as matmuls (no SDPA call to read the key count from): its
    blocks must not become transformer layers over a one-token 'sequence' (issue 25: -97 % FLOPs).
    The spec's FLOPs per image are the traced ones."""
    import catalog

    from planner.intake.trace.load import load_factory

    module, make_inputs = load_factory(catalog.factory_arg(catalog.BY_NAME["timm_swin_base"], True))
    trace = trace_module(module, make_inputs, micro_batch=2, seq_len=1)
    assert not _blocks(trace.spec) and not trace.spec.has_sequence
    per_step = model_flops_per_step(trace.spec.layers, 2, trace.spec.tokens_per_sample)
    assert per_step / 3 == pytest.approx(trace.fwd_flops, rel=1e-9)
