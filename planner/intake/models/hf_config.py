"""Read a Hugging Face ``config.json`` (stdlib ``json`` only, no transformers) into a ModelSpec.

Supported ``model_type`` values are the keys of :data:`planner.intake.models.hf_families.FAMILIES`
(llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, llama4,
gemma3, gpt_oss, gpt2, gpt_neox, bloom); a language model nested under ``text_config`` is read from
there (Llama 4, Gemma 3), and a top-level ``<family>_text`` file as its family. The attention layout is
kept per layer: ``layer_types``, else the family's rule (``sliding_window_pattern``,
``max_window_layers``, ``attention_chunk_size`` with ``no_rope_layers``). Problems found in one file are collected and
raised together as one :class:`planner.errors.InputError` line naming the file and the fix.

Not represented (no spec field; a few thousand parameters at most): Qwen2-MoE's
``shared_expert_gate`` (``h`` per MoE block).
GPT-NeoX's ``use_parallel_residual`` and ``rotary_pct`` change neither parameters nor FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel.specs import FfnAct, ModelSpec, TransformerLayer
from planner.errors import InputError
from planner.intake.limits import MAX_LAYERS, MAX_SIZE
from planner.intake.models.builder import decoder_lm
from planner.intake.models.hf_families import FAMILIES, TEXT_SUFFIX, Family

__all__ = ["load_hf_config", "spec_from_hf_dict"]

_FIX = "use a preset instead (meshplan list models)"


class _Reader:
    """Typed look-ups into one config dict that collect problems instead of stopping at the first."""

    def __init__(self, raw: dict[str, Any], family: Family) -> None:
        self.raw = raw
        self.family = family
        self.problems: list[str] = []
        self.missing: list[str] = []
        """Required keys absent from the file (reported together in one clause)."""

    def _names(self, key: str) -> tuple[str, ...]:
        return (key, *self.family.aliases.get(key, ()))

    def _find(self, key: str) -> tuple[str, Any]:
        """The first of ``key`` and its aliases present with a non-null value, or ``(key, None)``."""
        for name in self._names(key):
            if self.raw.get(name) is not None:
                return name, self.raw[name]
        return key, None

    def count(self, key: str, default: int | None = None) -> int:
        """A positive integer; ``default`` when absent (a problem when there is no default)."""
        name, value = self._find(key)
        if value is None:
            if default is not None:
                return default
            aliases = self.family.aliases.get(key, ())
            alias = f" (or its alias {' / '.join(repr(a) for a in aliases)})" if aliases else ""
            self.missing.append(f"{key!r}{alias}")
            return 1
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.problems.append(f"has {name!r} = {value!r:.40}; it must be a positive integer")
            return 1
        most = MAX_LAYERS if key == "num_hidden_layers" else MAX_SIZE
        if value > most:  # a typo or a hostile file: building it would exhaust memory
            self.problems.append(f"has {name!r} of about 2^{value.bit_length() - 1}; it must be at most {most:,}")
            return 1
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A boolean; ``default`` when absent."""
        _, value = self._find(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.problems.append(f"has {key!r} = {value!r}; it must be true or false")
            return default
        return value

    def int_list(self, key: str) -> list[int]:
        """A list of integers (layer indices); empty when absent."""
        value = self.raw.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, int) for v in value):
            self.problems.append(f"has {key!r} = {value!r}; it must be a list of layer indices")
            return []
        return value


def _unwrap(raw: dict[str, Any]) -> dict[str, Any]:
    """The language-model part of a config: ``text_config`` when present (keeping outer tying), with
    a ``<family>_text`` model type read as its family's (a top-level ``llama4_text`` or
    ``gemma3_text`` file is the language model itself)."""
    inner = raw.get("text_config")
    if not isinstance(inner, dict):
        model_type = raw.get("model_type")
        if isinstance(model_type, str) and model_type.endswith(TEXT_SUFFIX) and model_type not in FAMILIES:
            return raw | {"model_type": model_type[: -len(TEXT_SUFFIX)]}
        return raw
    merged = {k: raw[k] for k in ("tie_word_embeddings", "model_type") if k in raw}
    merged.update(inner)
    model_type = merged.get("model_type")
    if isinstance(model_type, str) and model_type.endswith(TEXT_SUFFIX):
        merged["model_type"] = model_type[: -len(TEXT_SUFFIX)]
    return merged


def _ffn_act(raw: dict[str, Any], family: Family) -> FfnAct:
    """``swiglu`` for gated families; otherwise ``relu``, ``gelu_tanh`` (transformers' op-by-op
    ``gelu_new``, GPT-2's) or ``gelu`` from the activation name."""
    if family.gated:
        return "swiglu"
    act = raw.get("hidden_act") or raw.get("activation_function") or family.act_default
    if act == "gelu_new":
        return "gelu_tanh"
    if act == "relu2":  # transformers' ReLUSquaredActivation (ACT2FN["relu2"])
        return "relu2"
    return "relu" if "relu" in str(act) else "gelu"


def _dropout(raw: dict[str, Any], family: Family) -> bool:
    """Dropout is on when any of the family's dropout probabilities is positive."""
    probs = [raw.get(key, family.dropout_default) for key in family.dropout_keys]
    return any(isinstance(p, (int, float)) and p > 0 for p in probs)


def _sliding_layers(cfg: _Reader, layers: int) -> tuple[int | None, list[bool]]:
    """The window and which layers use it (``layer_types`` when given, else the family's rule)."""
    family, raw = cfg.family, cfg.raw
    window = raw.get("sliding_window")
    enabled = family.sliding in ("all", "pattern") or (
        family.sliding == "qwen" and cfg.flag("use_sliding_window", False)
    )
    if window is None or not enabled:
        return None, [False] * layers
    window = cfg.count("sliding_window")
    layer_types = raw.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        return window, [t == "sliding_attention" for t in layer_types]
    if family.sliding == "pattern":  # Gemma3TextConfig.__init__ builds layer_types the same way
        every = cfg.count("sliding_window_pattern", default=6)
        return window, [(i + 1) % every != 0 for i in range(layers)]
    if family.sliding == "qwen":
        first = cfg.count("max_window_layers", default=layers)
        return window, [i >= first for i in range(layers)]
    return window, [True] * layers


@dataclass(frozen=True)
class _MoeLayout:
    experts: int
    top_k: int
    expert_ffn: int
    shared_ffn: int
    dense_ffn: int
    """Width of the dense MLP of the layers that are not MoE."""
    is_moe: list[bool]


def _chunked_layers(cfg: _Reader, layers: int) -> tuple[int | None, list[bool]]:
    """Llama 4's chunk and which layers use it (transformers ``Llama4TextConfig.__post_init__``:
    ``layer_types`` when given, else ``chunked_attention`` where ``no_rope_layers`` is 1, by default
    every layer but each ``no_rope_layer_interval``-th (4))."""
    chunk = cfg.raw.get("attention_chunk_size")
    if not cfg.family.chunked or chunk is None:
        return None, [False] * layers
    chunk = cfg.count("attention_chunk_size")
    layer_types, no_rope = cfg.raw.get("layer_types"), cfg.raw.get("no_rope_layers")
    if isinstance(layer_types, list) and len(layer_types) == layers:
        return chunk, [t == "chunked_attention" for t in layer_types]
    if isinstance(no_rope, list) and len(no_rope) == layers:
        return chunk, [bool(x) for x in no_rope]
    interval = cfg.count("no_rope_layer_interval", default=4)
    return chunk, [(i + 1) % interval != 0 for i in range(layers)]


def _moe_layers(cfg: _Reader, layers: int, ffn: int) -> _MoeLayout:
    """Experts, their widths and which layers hold them, for the family's MoE layout.

    Mixtral: every layer is MoE with experts of width ``intermediate_size`` (``ffn``). Qwen2-MoE and
    Qwen3-MoE: layer ``i`` is MoE unless listed in ``mlp_only_layers`` or ``(i + 1)`` is not a
    multiple of ``decoder_sparse_step``; experts have width ``moe_intermediate_size``. DeepSeek:
    :func:`_deepseek_layers`; Llama 4: :func:`_llama4_layers`.
    """
    layout = cfg.family.moe
    if layout == "none":
        return _MoeLayout(0, 0, 0, 0, ffn, [False] * layers)
    if layout == "mixtral":
        experts, top_k = cfg.count("num_local_experts"), cfg.count("num_experts_per_tok")
        return _MoeLayout(experts, top_k, ffn, 0, ffn, [True] * layers)
    if layout == "deepseek":
        return _deepseek_layers(cfg, layers, ffn)
    if layout == "llama4":
        return _llama4_layers(cfg, layers, ffn)
    experts = cfg.count("num_experts")
    top_k = cfg.count("num_experts_per_tok")
    expert_ffn = cfg.count("moe_intermediate_size")
    shared = cfg.count("shared_expert_intermediate_size") if layout == "qwen2_moe" else 0
    step = cfg.count("decoder_sparse_step", default=1)
    dense = set(cfg.int_list("mlp_only_layers"))
    is_moe = [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    return _MoeLayout(experts, top_k, expert_ffn, shared, ffn, is_moe)


def _deepseek_layers(cfg: _Reader, layers: int, ffn: int) -> _MoeLayout:
    """DeepSeek-V2/V3 (``modeling_deepseek.py`` of deepseek-ai/DeepSeek-V3, and transformers'
    ``DeepseekV3DecoderLayer``): layer ``i`` is MoE when ``n_routed_experts`` is set, ``i >=
    first_k_dense_replace`` and ``i % moe_layer_freq == 0``; ``n_shared_experts`` always-on experts
    form one shared MLP of ``n_shared_experts * moe_intermediate_size``
    (``DeepseekV3MoE.shared_experts``)."""
    if cfg._find("n_routed_experts")[1] is None:  # a dense model
        return _MoeLayout(0, 0, 0, 0, ffn, [False] * layers)
    experts, top_k = cfg.count("n_routed_experts"), cfg.count("num_experts_per_tok")
    expert_ffn = cfg.count("moe_intermediate_size")
    shared = cfg.raw.get("n_shared_experts") or 0
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
        cfg.problems.append(f"has 'n_shared_experts' = {shared!r:.40}; it must be a whole number")
        shared = 0
    first = cfg.raw.get("first_k_dense_replace") or 0
    if isinstance(first, bool) or not isinstance(first, int) or first < 0:
        cfg.problems.append(f"has 'first_k_dense_replace' = {first!r:.40}; it must be a whole number")
        first = 0
    freq = cfg.count("moe_layer_freq", default=1)
    is_moe = [i >= first and i % freq == 0 for i in range(layers)]
    return _MoeLayout(experts, top_k, expert_ffn, shared * expert_ffn, ffn, is_moe)


def _llama4_layers(cfg: _Reader, layers: int, ffn: int) -> _MoeLayout:
    """Llama 4 (transformers ``configuration_llama4.py`` / ``modeling_llama4.py``): the layers in
    ``moe_layers``, else every ``interleave_moe_layer_step``-th from ``step - 1``, hold
    ``num_local_experts`` experts of ``intermediate_size`` with top-``num_experts_per_tok`` (class
    default 1) routing plus one shared expert of the same width (``Llama4TextMoe.shared_expert``);
    the other layers a dense MLP of ``intermediate_size_mlp``."""
    experts, top_k = cfg.count("num_local_experts"), cfg.count("num_experts_per_tok", default=1)
    dense_ffn = cfg.count("intermediate_size_mlp", default=ffn)
    step = cfg.count("interleave_moe_layer_step", default=1)
    listed = cfg.int_list("moe_layers") if cfg.raw.get("moe_layers") is not None else None
    moe = set(listed) if listed is not None else set(range(step - 1, layers, step))
    return _MoeLayout(experts, top_k, ffn, ffn, dense_ffn, [i in moe for i in range(layers)])


def _mla_fields(cfg: _Reader) -> dict[str, Any]:
    """The MLA shape of a DeepSeek-V2/V3 config (``DeepseekV3Attention``): ``head_dim`` is the
    query/key head width ``qk_nope_head_dim + qk_rope_head_dim``; every head has its own key and
    value; ``q_lora_rank`` null means a plain query projection (DeepSeek-V2-Lite)."""
    if not cfg.family.mla:
        return {}
    nope, rope = cfg.count("qk_nope_head_dim"), cfg.count("qk_rope_head_dim")
    q_rank = cfg.count("q_lora_rank") if cfg.raw.get("q_lora_rank") is not None else None
    return dict(kv_lora_rank=cfg.count("kv_lora_rank"), q_lora_rank=q_rank, qk_nope_head_dim=nope,
                qk_rope_head_dim=rope, v_head_dim=cfg.count("v_head_dim"), head_dim=nope + rope)


def _check_shapes(
    cfg: _Reader, hidden: int, heads: int, kv_heads: int, experts: int, top_k: int
) -> None:
    """Cross-field checks: head counts divide, top-k within the expert count."""
    if heads % kv_heads:
        cfg.problems.append(
            f"has {kv_heads} key/value heads, which does not divide {heads} attention heads; "
            "fix 'num_key_value_heads'"
        )
    if cfg.raw.get("head_dim") is None and hidden % heads and not cfg.family.mla:
        cfg.problems.append(
            f"has hidden size {hidden} not divisible by {heads} heads and no 'head_dim'; "
            "add 'head_dim'"
        )
    if experts and top_k > experts:
        cfg.problems.append(
            f"routes each token to {top_k} of only {experts} experts; fix 'num_experts_per_tok'"
        )


def spec_from_hf_dict(raw: dict[str, Any], *, name: str, source: str) -> ModelSpec:
    """Build a spec from a parsed ``config.json`` dict; ``source`` names the file in messages."""
    raw = _unwrap(raw)
    where = f"config.json at {source}"
    model_type = raw.get("model_type")
    family = FAMILIES.get(model_type) if isinstance(model_type, str) else None
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        what = f"has model_type {model_type!r}" if model_type is not None else "lacks 'model_type'"
        raise InputError(
            f"{where} {what}, which meshplan cannot read (known: {known}); "
            f"{_FIX}, add --trace to build it with transformers (Whisper, Mamba, T5, ...), "
            "or a factory (path/to/file.py:factory)"
        )
    cfg = _Reader(raw, family)
    hidden = cfg.count("hidden_size")
    layers = cfg.count("num_hidden_layers")
    heads = cfg.count("num_attention_heads")
    vocab = cfg.count("vocab_size")
    kv_heads = cfg.count("num_key_value_heads", default=heads)
    head_dim = cfg.count("head_dim", default=max(hidden // heads, 1))
    ffn = cfg.count("intermediate_size", default=4 * hidden if family.ffn_default_4h else None)
    max_pos = cfg.count("max_position_embeddings", default=None if family.learned_positions else 0)
    attn_bias = cfg.flag("attention_bias", family.qkv_bias) if family.attention_bias_key else None
    mlp_bias = cfg.flag("mlp_bias", family.mlp_bias) if family.mlp_bias_key else family.mlp_bias
    tied = cfg.flag("tie_word_embeddings", family.tied_default)
    window, sliding = _sliding_layers(cfg, layers)
    chunk, chunked = _chunked_layers(cfg, layers)
    moe = _moe_layers(cfg, layers, ffn)
    mla = _mla_fields(cfg)
    if mla:
        kv_heads, head_dim = heads, mla["head_dim"]
    _check_shapes(cfg, hidden, heads, kv_heads, moe.experts, moe.top_k)
    if cfg.missing:
        them = "it" if len(cfg.missing) == 1 else "them"
        cfg.problems.insert(0, f"lacks {', '.join(cfg.missing)}; add {them} or {_FIX}")
    if cfg.problems:
        raise InputError(f"{where} " + "; ".join(dict.fromkeys(cfg.problems)))

    def block(sparse: bool, windowed: bool, local: bool) -> TransformerLayer:
        return TransformerLayer(
            hidden_size=hidden,
            num_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            ffn_hidden_size=moe.expert_ffn if sparse else moe.dense_ffn,
            ffn_act=_ffn_act(raw, family),
            num_experts=moe.experts if sparse else 0,
            moe_top_k=moe.top_k if sparse else 0,
            shared_expert_ffn_hidden_size=moe.shared_ffn if sparse else 0,
            norm=family.norm,
            qkv_bias=family.qkv_bias if attn_bias is None else attn_bias,
            out_bias=family.out_bias if attn_bias is None else attn_bias,
            mlp_bias=mlp_bias,
            dropout=_dropout(raw, family),
            sliding_window=window if windowed else None,
            attention_chunk=chunk if local else None,
            qk_norm=family.qk_norm,
            conv1d=family.conv1d,
            transformers_block=True,
            **{k: v for k, v in mla.items() if k != "head_dim"},
        )

    layout = list(zip(moe.is_moe, sliding, chunked))
    kinds = {key: block(*key) for key in set(layout)}
    return decoder_lm(
        name,
        blocks=[kinds[key] for key in layout],
        vocab_size=vocab,
        tied_embeddings=tied,
        max_seq_len=max_pos,
        source=source,
        learned_positions=max_pos if family.learned_positions else 0,
        embedding_norm=family.norm if family.embedding_norm else None,
    )


def _model_name(path: Path) -> str:
    """The checkpoint folder's name for ``.../<name>/config.json``, else the file's stem."""
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem


def load_hf_config(path: str | Path) -> ModelSpec:
    """Read a Hugging Face ``config.json`` (or a folder holding one) into a :class:`ModelSpec`."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    from planner.intake.jsonio import read_json  # refuses non-regular, huge, non-UTF-8, deep and NaN files

    raw = read_json(path, f"model config {path}", f"fix the file or {_FIX}")
    if not isinstance(raw, dict):
        kind = type(raw).__name__
        raise InputError(f"config.json at {path} holds a JSON {kind}, not an object; {_FIX}")
    return spec_from_hf_dict(raw, name=_model_name(path), source=str(path))
