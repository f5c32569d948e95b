"""The corpus of real-world model definitions (issue 12): what each entry is, how to build it small
(a real CPU run) and full size (traced on meta), what it must be recognised as, and its twin.

Shared by ``tests/planner/intake/trace/test_corpus.py`` and ``bench/trace_corpus.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import _disable_current_modes

from costmodel.flops import CAUSAL_ATTENTION_FRACTION

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Entry:
    """One corpus model."""

    name: str
    style: str
    """The library and file whose code it is (or imitates)."""
    kinds: dict[str, int]
    """Layer kinds the small model's spec must hold (``transformer``, ``embedding``, ``head``, ...)."""
    file: str = ""
    """Corpus file with ``<name>()`` (full size) and ``<name>_small()`` factories; empty for HF entries."""
    twin: Any = None
    """A preset name, or a Hugging Face config dict read as numbers (``--model config.json``)."""
    plan: dict = field(default_factory=lambda: dict(global_batch=64, seq_len=2048))
    """``planner.plan`` settings of the full-size model (16 A100s unless ``gpus`` is given)."""
    twin_seq_len: int = 2048
    reference_note: str = ""
    """Where FlopCounterMode's count is not the model's FLOPs, what the reference is instead."""

    @property
    def hf(self) -> bool:
        return not self.file


LM = {"embedding": 1, "norm": 1, "head": 1}
VISION = dict(global_batch=256, seq_len=1)
ENTRIES: tuple[Entry, ...] = (
    Entry("nanogpt", "karpathy/nanoGPT model.py", LM | {"transformer": 2}, "nanogpt.py",
          twin=None, plan=dict(global_batch=64, seq_len=1024), twin_seq_len=1024),
    Entry("litgpt_llama", "litgpt model.py (Llama-2-7b)", LM | {"transformer": 2}, "litgpt_models.py",
          twin="hf:hf_llama"),
    Entry("litgpt_mixtral", "litgpt model.py (Mixtral-8x7B, LLaMAMoE)", LM | {"transformer": 2}, "litgpt_models.py",
          twin="mixtral-8x7b"),
    Entry("titan_llama3", "torchtitan llama3 model.py (8B)", LM | {"transformer": 2}, "torchtitan_models.py",
          twin="llama3.1-8b"),
    Entry("titan_moe", "torchtitan moe.py (GroupedExperts, histc, shared expert)", LM | {"transformer": 2},
          "torchtitan_models.py"),
    Entry("timm_vit", "timm vision_transformer.py (ViT-L/16)", {"transformer": 2}, "timm_models.py", plan=VISION),
    Entry("timm_swin", "timm swin_transformer.py (Swin-T: shifted windows, relative position bias, patch merging)",
          {"generic": 10, "norm": 4}, "timm_swin.py", plan=VISION),
    Entry("timm_swin_base", "timm swin_transformer.py default path (Swin-B: attention scores as matmuls)",
          {"generic": 10, "norm": 4}, "timm_swin.py", plan=VISION),
    Entry("timm_convnext", "timm convnext.py (ConvNeXt-B)", {"generic": 1}, "timm_models.py", plan=VISION),
    Entry("resnet50", "torchvision resnet.py (ResNet-50 Bottleneck)", {"generic": 1}, "zoo_models.py", plan=VISION),
    Entry("dlrm", "torchrec DLRM (EmbeddingBag tables, interaction)", {"generic": 1}, "zoo_models.py",
          plan=dict(global_batch=1024, seq_len=1)),
    Entry("pyg_graphsage", "torch_geometric GraphSAGE (real package)", {"generic": 1}, "packages.py",
          plan=dict(global_batch=64, seq_len=1)),
    Entry("pyg_gat", "torch_geometric GAT (real package: boolean edge masks)", {"generic": 1}, "packages.py",
          plan=dict(global_batch=64, seq_len=1)),
    Entry("diffusers_unet", "diffusers UNet2DModel (real package)", {"generic": 1}, "packages.py",
          plan=dict(global_batch=64, seq_len=1)),
    Entry("hf_gpt2", "transformers GPT2LMHeadModel --trace", LM | {"transformer": 2}, twin="config",
          plan=dict(global_batch=64, seq_len=1024), twin_seq_len=1024),
    Entry("hf_llama", "transformers LlamaForCausalLM --trace", LM | {"transformer": 2}, twin="config"),
    Entry("hf_mistral", "transformers MistralForCausalLM --trace (sliding window)", LM | {"transformer": 2},
          twin="config", twin_seq_len=16384),
    Entry("hf_mixtral", "transformers MixtralForCausalLM --trace", LM | {"transformer": 2}, twin="config"),
    Entry("hf_qwen2_moe", "transformers Qwen2MoeForCausalLM --trace (gated shared expert)",
          LM | {"transformer": 2}, twin="config"),
    Entry("hf_qwen3_moe", "transformers Qwen3MoeForCausalLM --trace (q/k norms)", LM | {"transformer": 2},
          twin="config"),
    Entry("hf_deepseek_v3", "transformers DeepseekV3ForCausalLM --trace (MLA, shared experts)",
          LM | {"transformer": 3}, twin="config", plan=dict(gpus=1024, global_batch=1024, seq_len=4096)),
    Entry("hf_gemma3", "transformers Gemma3ForCausalLM --trace (gemma3_text: five sliding layers to one global)",
          LM | {"transformer": 2}, twin="config", twin_seq_len=8192),
    Entry("hf_llama4", "transformers Llama4ForCausalLM --trace (llama4_text: chunked attention, 16 experts)",
          LM | {"transformer": 2}, twin="config", plan=dict(gpus=128, global_batch=256, seq_len=8192),
          twin_seq_len=16384, reference_note="FlopCounterMode less the unselected experts transformers "
          "runs on zeros: (E - k) x 6·h·f per token per MoE layer"),
    Entry("hf_gpt_oss", "transformers GptOssForCausalLM --trace (sliding 128 / full alternating, sinks, eager)",
          LM | {"transformer": 2}, twin="config", twin_seq_len=8192),
    Entry("hf_whisper", "transformers WhisperForConditionalGeneration --trace (fixed 1,500-frame encoder)",
          {"transformer": 4, "embedding": 1}, plan=dict(global_batch=64, seq_len=448)),
    Entry("hf_mamba", "transformers MambaForCausalLM --trace (selective state space, no attention)",
          {"generic": 3, "norm": 1}),
    Entry("hf_t5", "transformers T5ForConditionalGeneration --trace", {"transformer": 4},
          plan=dict(global_batch=64, seq_len=512)),
    Entry("hf_bert", "transformers BertForMaskedLM --trace", {"transformer": 2, "embedding": 1},
          plan=dict(global_batch=64, seq_len=512)),
    Entry("hf_vit", "transformers ViTForImageClassification --trace", {"transformer": 2}, plan=VISION),
)
BY_NAME = {e.name: e for e in ENTRIES}


def factory_arg(entry: Entry, small: bool) -> str:
    """``path/to/file.py:factory`` of a re-implemented entry."""
    return f"{HERE / entry.file}:{entry.name}{'_small' if small else ''}"


def hf_config_path(entry: Entry, small: bool, folder: Path) -> Path:
    """The entry's config.json written under ``folder`` (its ``--model`` argument with ``--trace``)."""
    from hf_configs import FULL, SMALL  # noqa: PLC0415 (the corpus folder is on sys.path)

    path = folder / f"{entry.name}{'_small' if small else ''}" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps((SMALL if small else FULL)[entry.name]))
    return path


def twin_arg(entry: Entry, folder: Path) -> str | None:
    """The twin's ``--model`` argument: a preset name, or the entry's own config.json read as numbers."""
    if entry.twin == "config":
        return str(hf_config_path(entry, False, folder))
    if isinstance(entry.twin, str) and entry.twin.startswith("hf:"):  # another entry's config.json
        return str(hf_config_path(BY_NAME[entry.twin[3:]], False, folder))
    if entry.name == "nanogpt":
        from nanogpt import TWIN  # noqa: PLC0415

        path = folder / "nanogpt_twin" / "config.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(TWIN))
        return str(path)
    return entry.twin


def model_arg(entry: Entry, folder: Path) -> tuple[str, bool]:
    """(``--model`` argument, ``--trace``) of the full-size entry."""
    if entry.hf:
        return str(hf_config_path(entry, False, folder)), True
    return factory_arg(entry, False), False


def small_real(entry: Entry, folder: Path) -> tuple[nn.Module, Any]:
    """The small model on CPU with real (random) weights, and its make_inputs."""
    torch.manual_seed(0)
    if entry.hf:
        import transformers  # noqa: PLC0415

        from planner.intake.trace.load import _build_hf, hf_model  # noqa: PLC0415

        path = hf_config_path(entry, True, folder)
        _, make_inputs, _ = hf_model(str(path))
        raw = json.loads(path.read_text())
        config = transformers.AutoConfig.for_model(**raw)
        config.use_cache = False
        module = _build_hf(getattr(transformers, raw["architectures"][0]), config)
        return module, make_inputs
    from planner.intake.trace.load import _import_target, unpack_factory_result  # noqa: PLC0415

    target, _, attr = factory_arg(entry, True).rpartition(":")
    result = getattr(_import_target(target, attr), attr)()
    module, make_inputs = result if isinstance(result, tuple) else (result, None)
    return module, make_inputs


def real_inputs(make_inputs: Any, micro_batch: int, seq_len: int) -> tuple[tuple, dict]:
    """The example inputs on CPU (real tensors, zeros)."""
    from planner.intake.trace.load import split_inputs, token_ids  # noqa: PLC0415

    if make_inputs is None:
        return (torch.zeros_like(token_ids(micro_batch, seq_len), device="cpu"),), {}
    args, kwargs = split_inputs(make_inputs(micro_batch, seq_len))
    to_cpu = lambda t: torch.zeros(t.shape, dtype=t.dtype) if t.device.type == "meta" else t  # noqa: E731
    from torch.utils import _pytree as pytree  # noqa: PLC0415

    return pytree.tree_map_only(torch.Tensor, to_cpu, (args, kwargs))


class _SdpaReference(TorchFunctionMode):
    """Counts SDPA as torch's own ``sdpa_flop_count`` times the share of key positions the real mask
    allows (1/2 for ``is_causal``: meshplan's convention), and runs it uncounted."""

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0.0

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if func is not torch.nn.functional.scaled_dot_product_attention:
            return func(*args, **kwargs)
        q, k, v = args[:3]
        mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
        causal = kwargs.get("is_causal", args[5] if len(args) > 5 else False)
        share = CAUSAL_ATTENTION_FRACTION if causal else 1.0
        if mask is not None:
            allowed = mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2
            share = float(allowed.expand(*q.shape[:-1], k.shape[-2]).float().mean())
        batch = q.shape[:-2].numel()
        self.flops += share * sdpa_flop_count((batch, 1, *q.shape[-2:]), (batch, 1, *k.shape[-2:]),
                                              (batch, 1, *v.shape[-2:]))
        with _disable_current_modes():
            return func(*args, **kwargs)


def reference_flops(module: nn.Module, make_inputs: Any, micro_batch: int, seq_len: int) -> float:
    """Forward FLOPs of one real CPU run, by torch's FlopCounterMode (SDPA per :class:`_SdpaReference`)."""
    args, kwargs = real_inputs(make_inputs, micro_batch, seq_len)
    module.train()
    sdpa = _SdpaReference()
    with FlopCounterMode(display=False) as counter, sdpa:
        module(*args, **kwargs)
    return counter.get_total_flops() + sdpa.flops


def unselected_expert_flops(entry: Entry, tokens: int) -> float:
    """Forward FLOPs a real run spends on experts the router did not pick (0 for most entries).

    transformers' ``Llama4TextMoe.forward`` runs every expert on every token, scaling the input by
    the router score, which is zero for the experts not in the top-k: FlopCounterMode counts
    ``E`` experts per token where the model's work is ``k``. Each expert is a gated MLP of three
    ``h x f`` GEMMs, 6·h·f FLOPs per token (2mkn per GEMM); every ``interleave_moe_layer_step``-th
    layer holds experts (``Llama4TextConfig``)."""
    if entry.name != "hf_llama4":
        return 0.0
    from hf_configs import SMALL  # noqa: PLC0415

    cfg = SMALL[entry.name]
    experts, top_k = cfg["num_local_experts"], cfg["num_experts_per_tok"]
    moe_layers = cfg["num_hidden_layers"] // cfg["interleave_moe_layer_step"]
    return (experts - top_k) * 6.0 * cfg["hidden_size"] * cfg["intermediate_size"] * tokens * moe_layers


def reference_for(entry: Entry, module: nn.Module, make_inputs: Any, micro_batch: int, seq_len: int) -> float:
    """The entry's reference forward FLOPs: :func:`reference_flops`, less the work of
    :func:`unselected_expert_flops` where the library computes experts densely."""
    return reference_flops(module, make_inputs, micro_batch, seq_len) - \
        unselected_expert_flops(entry, micro_batch * seq_len)
