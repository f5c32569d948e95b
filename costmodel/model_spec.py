"""The model spec: an ordered list of typed layers (embedding, transformer block, norm, head, generic)
and the facts every layer shares (:class:`ModelSpec`). Part of ``costmodel.specs``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from costmodel.spec_types import FROZEN as _FROZEN
from costmodel.spec_types import FfnAct, NormKind


# ----------------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------------
class EmbeddingLayer(BaseModel):
    """Token embedding (vocabulary-parallel under TP), with optional learned positions."""

    model_config = _FROZEN
    kind: Literal["embedding"] = "embedding"
    name: str = "embedding"
    vocab_size: int = Field(gt=0)
    """Rows of the token table (padded vocabulary where the source pads it)."""
    hidden_size: int = Field(gt=0)
    max_positions: int = Field(default=0, ge=0)
    """Rows of a learned absolute position table; 0 for rotary / ALiBi / no positions."""
    norm: NormKind | None = None
    """An embedding LayerNorm right after the lookup (BLOOM's ``word_embeddings_layernorm``)."""


class TransformerLayer(BaseModel):
    """One transformer block: self-attention (MHA / GQA / MQA) and a dense or mixture-of-experts MLP."""

    model_config = _FROZEN
    kind: Literal["transformer"] = "transformer"
    name: str = "block"
    hidden_size: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    """Key/value heads; equal to ``num_heads`` for MHA, fewer for GQA, 1 for MQA."""
    head_dim: int = Field(gt=0)
    """Per-head width; ``num_heads * head_dim`` need not equal ``hidden_size``."""
    ffn_hidden_size: int = Field(gt=0)
    """Intermediate width of the MLP (of each expert for MoE)."""
    ffn_act: FfnAct = "gelu"
    """``swiglu`` (gated: gate and up projections) or a plain two-matrix MLP."""
    num_experts: int = Field(default=0, ge=0)
    """Routed experts; 0 for a dense MLP."""
    moe_top_k: int = Field(default=0, ge=0)
    """Experts each token is routed to (0 for dense)."""
    shared_expert_ffn_hidden_size: int = Field(default=0, ge=0)
    """Intermediate width of an always-on shared expert (0 when absent)."""
    norm: NormKind = "layernorm"
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    causal: bool = True
    """Causal self-attention (decoders); encoders attend to the whole sequence."""
    cross_attention: bool = False
    """A second attention over encoder outputs (encoder-decoder decoders)."""
    dropout: bool = False
    """Attention and hidden dropout are on (their masks are stored for backward)."""
    sliding_window: int | None = Field(default=None, gt=0)
    """Attention window in tokens (Mistral); None for full attention. The attention layout is per
    layer: hybrid models set it on some blocks only (Gemma 3: five windowed blocks of 512-1,024 to
    one global; gpt-oss: windowed 128 and full alternating), so read it from each block of
    ``ModelSpec.layers``, never from the first. A KV cache of this block needs at most
    ``sliding_window`` positions per sequence."""
    attention_chunk: int | None = Field(default=None, gt=0)
    """Chunked (local) attention: a query attends only to keys of its own chunk of this many tokens
    (Llama 4's rotary layers, ``attention_chunk_size`` 8192, three blocks of four); None for
    attention over the sequence. Per layer, as ``sliding_window``; a KV cache of this block needs
    at most ``attention_chunk`` positions per sequence (the current chunk's)."""
    fixed_seq_len: int = Field(default=0, ge=0)
    """Positions per sample this block runs over whatever ``--seq-len`` (decoder tokens) says: a speech
    encoder's (Whisper: 1,500 audio frames); costs and KV cache are of this length. 0: the request's."""
    cross_seq_len: int = Field(default=0, ge=0)
    """Encoder positions a cross-attention block reads per sample (Whisper's decoder: 1,500); 0: as
    many as the request's sequence (T5, whose encoder and decoder share ``--seq-len``)."""
    qk_norm: bool = False
    """Per-head RMSNorms on queries and keys, one ``head_dim`` weight each (Qwen3 ``q_norm`` /
    ``k_norm``; Megatron ``--qk-layernorm``)."""
    kv_lora_rank: int = Field(default=0, ge=0)
    """Multi-head latent attention (MLA, DeepSeek-V2 arXiv:2405.04434 §2.1.2): width of the joint
    key/value latent ``c_KV``; 0 for plain MHA / GQA / MQA. With MLA, ``head_dim`` is the query/key
    head width ``qk_nope_head_dim + qk_rope_head_dim`` and ``num_kv_heads`` equals ``num_heads``."""
    q_lora_rank: int | None = Field(default=None, gt=0)
    """MLA: width of the query latent ``c_Q`` (§2.1.2 eq. 12); None for a plain query projection
    (DeepSeek-V2-Lite)."""
    qk_nope_head_dim: int = Field(default=0, ge=0)
    """MLA: per-head query/key width without rotary position (``d_h``)."""
    qk_rope_head_dim: int = Field(default=0, ge=0)
    """MLA: per-head query width with rotary position, and the one shared rotary key (``d_h^R``)."""
    v_head_dim: int = Field(default=0, ge=0)
    """MLA: per-head value width (0 elsewhere: values are ``head_dim`` wide)."""
    conv1d: bool = False
    """Projections are transformers' ``Conv1D`` (GPT-2), not ``nn.Linear`` (``EngineTerms.replicates_conv1d_blocks``)."""
    transformers_block: bool = False
    """The block runs as transformers' own module (a ``config.json`` built by transformers, as the native
    runtime does: ``planner.runtime.models.build_model``), not ``planner.runtime.models.Block``: its
    attention hands SDPA the grouped K/V with ``enable_gqa`` (transformers
    ``integrations/sdpa_attention.py`` ``use_gqa_in_sdpa``: no mask, causal), keeping no copy repeated
    to every head, and its RMSNorm (``LlamaRMSNorm`` and kin) keeps one fp32 copy of the input and the
    bf16 normalised one where ``torch.nn.RMSNorm`` keeps two fp32 tensors
    (``costmodel.memory.eager_block_extra_bytes``)."""

    @model_validator(mode="after")
    def _mla_shape(self) -> "TransformerLayer":
        """An MLA block states a consistent head layout (DeepSeek-V3 config.json: 128 + 64 = 192)."""
        if not self.kv_lora_rank:
            if self.q_lora_rank or self.qk_nope_head_dim or self.qk_rope_head_dim:
                raise ValueError("q_lora_rank / qk_*_head_dim are MLA fields: set kv_lora_rank too")
            return self
        if self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
            raise ValueError(f"MLA head_dim {self.head_dim} != qk_nope_head_dim {self.qk_nope_head_dim} + "
                             f"qk_rope_head_dim {self.qk_rope_head_dim}")
        if self.num_kv_heads != self.num_heads or not self.v_head_dim:
            raise ValueError("MLA needs num_kv_heads == num_heads and a v_head_dim")
        return self

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave out the chunk, fixed-length, q/k-norm and MLA fields where they hold their defaults, so a block without
        them dumps (and hashes: ``planner.plans.named_model.spec_digest``) as it did before they existed."""
        data = handler(self)
        for key in _OPTIONAL_BLOCK_FIELDS:
            if key in data and data[key] == type(self).model_fields[key].default:
                del data[key]
        return data

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def is_mla(self) -> bool:
        """Multi-head latent attention (DeepSeek-V2/V3) rather than MHA / GQA / MQA."""
        return self.kv_lora_rank > 0

    @property
    def q_width(self) -> int:
        """Query width per token after projection (``a·d_qk``)."""
        return self.num_heads * self.head_dim

    @property
    def k_width(self) -> int:
        """Key width per token as attention reads it (MLA: every head's up-projected key)."""
        return self.num_kv_heads * self.head_dim

    @property
    def v_width(self) -> int:
        """Value width per token as attention reads it (MLA: ``a·d_v``)."""
        return self.num_kv_heads * (self.v_head_dim or self.head_dim)

    @property
    def o_width(self) -> int:
        """Attention output width per token, the output projection's input (``a·d_v``)."""
        return self.num_heads * (self.v_head_dim or self.head_dim)


_OPTIONAL_BLOCK_FIELDS = ("attention_chunk", "fixed_seq_len", "cross_seq_len", "qk_norm", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "conv1d", "transformers_block")


class NormLayer(BaseModel):
    """A standalone normalisation (the final norm before the output head)."""

    model_config = _FROZEN
    kind: Literal["norm"] = "norm"
    name: str = "final_norm"
    hidden_size: int = Field(gt=0)
    norm: NormKind = "layernorm"


class HeadLayer(BaseModel):
    """Output projection to the vocabulary, and the cross-entropy loss."""

    model_config = _FROZEN
    kind: Literal["head"] = "head"
    name: str = "output"
    vocab_size: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    tied: bool = False
    """Shares its weight with the embedding (no parameters of its own)."""
    bias: bool = False


TpMode = Literal["none", "column", "row", "column_row", "vocab", "table"]


class GenericLayer(BaseModel):
    """Any other layer, described by measured totals per token (traced convolutions, tables, ...).

    Totals are for one token of one sequence (one image counts as ``tokens_per_sample`` tokens), in
    the forward pass, on one GPU without parallelism.
    """

    model_config = _FROZEN
    kind: Literal["generic"] = "generic"
    name: str
    params: int = Field(ge=0)
    fwd_flops_per_token: float = Field(ge=0)
    """Forward FLOPs per token that scale linearly with tokens (matmuls, convolutions)."""
    fwd_attn_flops_per_token_per_ctx: float = Field(default=0.0, ge=0)
    """Forward FLOPs per token per context token (attention-like terms, quadratic in length)."""
    fwd_mem_bytes_per_token: float = Field(default=0.0, ge=0)
    """Bytes read and written per token by memory-bound ops (norms, activations, lookups)."""
    activation_bytes_per_token: float = Field(default=0.0, ge=0)
    """Bytes saved for backward per token."""
    output_bytes_per_token: float = Field(default=0.0, ge=0)
    """Bytes of the layer output per token (what crosses a pipeline cut after it)."""
    tp_mode: TpMode = "none"
    """How tensor parallelism may split the layer; ``none`` means replicated / data parallel only."""
    sparse_lookup: bool = False
    """An embedding table read by index: its FLOPs are zero, its gradient is sparse."""
    fixed_seq_len: int = Field(default=0, ge=0)
    """As ``TransformerLayer.fixed_seq_len`` (a speech encoder's convolutions); the per-token figures
    are then per one of these positions. Left out of dumps (and digests) at 0."""
    selective_saved_bytes_per_token: float | None = Field(default=None, ge=0)
    """Bytes per token the runtime's op-level selective checkpoint keeps beside the layer's input:
    the outputs of its SDPA kernels and of every other ``mm`` / ``addmm`` (``planner.runtime.recompute``,
    torchtitan's policy), measured by the trace (``planner.intake.trace.selective``). None when not
    measured: selective recomputation then keeps :attr:`activation_bytes_per_token`. Left out of dumps
    (and digests) when None."""
    input_saved_bytes_per_token: float = Field(default=0.0, ge=0)
    """Of :attr:`activation_bytes_per_token`, the tensors the layer before saves too (its output, which
    this layer reads and saves again): autograd keeps them once, priced by that layer
    (``planner.intake.trace.shared``; ``costmodel.layer_other.generic_cost``). Left out of dumps (and
    digests) at 0."""
    saves_output: bool = False
    """The layer's saved tensors hold its whole output (a final ReLU's result): a pipeline stage ending
    with it sends a tensor it already prices (``costmodel.ranks.keeps_output``). Left out of dumps (and
    digests) when False."""

    @model_serializer(mode="wrap")
    def _omit_unused(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        unset = {"fixed_seq_len": 0, "selective_saved_bytes_per_token": None, "input_saved_bytes_per_token": 0.0, "saves_output": False}
        return {k: v for k, v in data.items() if k not in unset or v != unset[k]}


Layer = Annotated[
    Union[EmbeddingLayer, TransformerLayer, NormLayer, HeadLayer, GenericLayer],
    Field(discriminator="kind"),
]


class LayerEdge(BaseModel):
    """A data edge between two layers that are not neighbours in the layer order (skip, cross-attention)."""

    model_config = _FROZEN
    src: int = Field(ge=0)
    """Index of the producing layer in ``ModelSpec.layers``."""
    dst: int = Field(ge=0)
    """Index of the consuming layer (greater than ``src``)."""
    bytes_per_token: float = Field(ge=0)
    """Activation bytes per token carried by the edge (what a pipeline cut between them must send)."""


class ModelSpec(BaseModel):
    """A model as an ordered list of layers, with the facts every layer shares."""

    model_config = _FROZEN
    name: str
    layers: tuple[Layer, ...]
    """In execution order: embedding, blocks, final norm, head for a decoder-only LM."""
    tied_embeddings: bool = False
    """The output head reuses the embedding table (the head holds no parameters)."""
    max_seq_len: int = Field(default=0, ge=0)
    """Longest sequence the model supports (0 if unknown)."""
    tokens_per_sample: int = Field(default=0, ge=0)
    """For non-sequence models: tokens one sample counts as (image patches); 0 = the seq length."""
    extra_edges: tuple[LayerEdge, ...] = ()
    """Edges beyond the chain ``layers[i] -> layers[i+1]``; empty for a plain chain."""
    source: str = ""
    """Where the spec came from: a preset name, a config path, a traced factory."""
    notes: tuple[str, ...] = ()
    """What the estimate assumes about this model beyond its layers (a traced model names the layers
    it planned as generic, and why); echoed in every estimate's assumptions."""

    @property
    def has_sequence(self) -> bool:
        """Samples are sequences that sequence and context parallelism can split: false for a model
        traced from whole samples without attention (one token per sample: recommenders, CNNs, GNNs)."""
        return self.tokens_per_sample != 1
