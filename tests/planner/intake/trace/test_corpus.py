"""Issue 12: the corpus of real-world model definitions (``corpus/catalog.py``) traces exactly.

Small configurations, so each check runs in well under a second or two: parameters equal
``sum(p.numel())`` (tied weights once), forward FLOPs within 2 % of torch's FlopCounterMode on a real
CPU run of the same model and inputs, and the layer kinds each code style must be recognised as.
Full-size twins and plans: ``test_corpus_twins.py`` and ``bench/trace_corpus.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).with_name("corpus")))
import catalog  # noqa: E402

import planner  # noqa: E402
from planner.intake.trace import trace_module  # noqa: E402
from planner.intake.trace.load import hf_model, load_factory  # noqa: E402

MICRO_BATCH, SEQ = 2, 32


def small_trace(entry: catalog.Entry, folder: Path):
    if entry.hf:
        module, make_inputs, _ = hf_model(str(catalog.hf_config_path(entry, True, folder)))
    else:
        module, make_inputs = load_factory(catalog.factory_arg(entry, True))
    return trace_module(module, make_inputs, name=entry.name, micro_batch=MICRO_BATCH, seq_len=SEQ)


def test_the_corpus_has_twenty_nine_models_of_every_style() -> None:
    assert len(catalog.ENTRIES) >= 29
    styles = " ".join(e.style for e in catalog.ENTRIES)
    for word in ("nanoGPT", "litgpt", "torchtitan", "timm", "swin_transformer", "torchvision", "torchrec", "torch_geometric",
                 "diffusers", "GPT2", "Llama", "Mistral", "Mixtral", "Qwen2Moe", "Qwen3Moe", "DeepseekV3", "T5",
                 "Bert", "ViT", "Swin-B", "GAT", "Gemma3", "Llama4", "GptOss", "Whisper", "Mamba"):
        assert word in styles, word


@pytest.mark.parametrize("name", [e.name for e in catalog.ENTRIES])
def test_corpus_model_traces_exactly(name: str, tmp_path: Path) -> None:
    entry = catalog.BY_NAME[name]
    trace = small_trace(entry, tmp_path)
    module, make_inputs = catalog.small_real(entry, tmp_path)
    assert trace.params == sum(p.numel() for p in module.parameters()), "tied weights counted once"
    reference = catalog.reference_for(entry, module, make_inputs, MICRO_BATCH, SEQ)
    assert trace.fwd_flops == pytest.approx(reference, rel=0.02)
    kinds = [layer.kind for layer in trace.spec.layers]
    for kind, count in entry.kinds.items():
        assert kinds.count(kind) >= count, (kind, kinds)
    generic = [layer.name for layer in trace.spec.layers if layer.kind == "generic" and layer.params
               and not layer.name.endswith(".extra_params")]  # a recognised block's surplus (q/k norms)
    if generic:
        assert any(n in note for note in trace.spec.notes for n in generic), "generic layers are named"


def test_swin_plans_without_sequence_or_context_parallelism(tmp_path: Path) -> None:
    """Swin-T (timm): windowed attention and patch merging leave no sequence to split; every Swin block is
    its own layer, planned generic with the reason named; the plan is valid and uses neither SP nor CP."""
    from planner.plans.plan_checks import plan_problems

    entry = catalog.BY_NAME["timm_swin"]
    module, make_inputs = load_factory(catalog.factory_arg(entry, False))
    spec = trace_module(module, make_inputs, name="swin", micro_batch=1, seq_len=1).spec
    assert not spec.has_sequence and sum(1 for x in spec.layers if x.name.startswith("layers.")) >= 12
    assert any("windows" in note for note in spec.notes)
    plan = planner.plan(model=spec, cluster="dgx-a100", gpus=16, global_batch=256, seq_len=1, top_k=1)
    assert (plan.mesh.sp, plan.mesh.cp) == (False, 1) and not plan_problems(plan)
    assert not planner.estimate(model=spec, cluster="dgx-a100", gpus=16, global_batch=256, seq_len=1, tp=2, pp=1).config["sp"]
