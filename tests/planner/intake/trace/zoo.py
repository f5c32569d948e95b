"""Small models written in plain torch.nn for the trace tests (ResNet-50 and DLRM re-implemented from their papers) (loaded as factories: path.py:name)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

GPT = dict(vocab=1000, positions=256, hidden=64, heads=4, layers=3)


class GPTBlock(nn.Module):
    """Pre-norm block: causal MHA through SDPA, GELU MLP of 4h, biases everywhere (GPT-2)."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = nn.ModuleDict({"qkv": nn.Linear(hidden, 3 * hidden), "proj": nn.Linear(hidden, hidden)})
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.attn["qkv"](self.ln_1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, h // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, h)
        x = x + self.attn["proj"](y)
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """Token and learned position embeddings, blocks, final LayerNorm, head tied to the embedding."""

    def __init__(self, vocab: int, positions: int, hidden: int, heads: int, layers: int) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.blocks = nn.ModuleList(GPTBlock(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def gpt() -> nn.Module:
    return GPT2(**GPT)


# -- ViT (torchvision's layout: nn.MultiheadAttention, GELU MLP, class token, learned positions) ----
class ViTBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, mlp: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.self_attention = nn.MultiheadAttention(hidden, heads, dropout=0.0, batch_first=True)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(), nn.Dropout(0.1), nn.Linear(mlp, hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = x + y
        return x + self.mlp(self.ln_2(x))


class ViT(nn.Module):
    def __init__(self, image: int = 64, patch: int = 16, hidden: int = 96, heads: int = 4, layers: int = 4,
                 classes: int = 10) -> None:
        super().__init__()
        self.conv_proj = nn.Conv2d(3, hidden, kernel_size=patch, stride=patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, hidden))
        self.pos_embedding = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, hidden))
        self.layers = nn.Sequential(*(ViTBlock(hidden, heads, 4 * hidden) for _ in range(layers)))
        self.ln = nn.LayerNorm(hidden)
        self.heads = nn.Linear(hidden, classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = self.conv_proj(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embedding
        x = self.ln(self.layers(x))
        return self.heads(x[:, 0])


def vit() -> tuple[nn.Module, object]:
    return ViT(), lambda micro_batch, seq_len: torch.randn(micro_batch, 3, 64, 64)


# -- ResNet-50 (He et al. 2016, Table 1: bottlenecks [3, 4, 6, 3], widths 64..512, expansion 4) ------
class Bottleneck(nn.Module):
    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        out = planes * 4
        self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
        self.conv3, self.bn3 = nn.Conv2d(planes, out, 1, bias=False), nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inplanes != out:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (self.downsample(x) if self.downsample is not None else x))


class ResNet50(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages, inplanes = [], 64
        for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            layers = []
            for i in range(blocks):
                layers.append(Bottleneck(inplanes, planes, stride if i == 0 else 1))
                inplanes = planes * 4
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50() -> tuple[nn.Module, object]:
    return ResNet50(), lambda micro_batch, seq_len: torch.randn(micro_batch, 3, 224, 224)


# -- T5-style encoder-decoder: RMSNorm, no biases, ReLU MLP, shared embedding, cross-attention -------
class T5Attention(nn.Module):
    def __init__(self, hidden: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q, self.k, self.v, self.o = (nn.Linear(hidden, hidden, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        b, s, h = x.shape
        src = x if memory is None else memory

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, -1, self.heads, h // self.heads).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(src)), heads(self.v(src)),
                                           is_causal=self.causal and memory is None)
        return self.o(y.transpose(1, 2).reshape(b, s, h))


class T5Block(nn.Module):
    def __init__(self, hidden: int, heads: int, ffn: int, decoder: bool) -> None:
        super().__init__()
        self.norm_self = nn.RMSNorm(hidden)
        self.self_attn = T5Attention(hidden, heads, causal=decoder)
        self.norm_cross = nn.RMSNorm(hidden) if decoder else None
        self.cross_attn = T5Attention(hidden, heads, causal=False) if decoder else None
        self.norm_ff = nn.RMSNorm(hidden)
        self.wi, self.wo = nn.Linear(hidden, ffn, bias=False), nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.self_attn(self.norm_self(x))
        if self.cross_attn is not None:
            x = x + self.cross_attn(self.norm_cross(x), memory)
        return x + self.wo(F.relu(self.wi(self.norm_ff(x))))


class T5(nn.Module):
    def __init__(self, vocab: int = 512, hidden: int = 64, heads: int = 4, ffn: int = 256, layers: int = 2) -> None:
        super().__init__()
        self.shared = nn.Embedding(vocab, hidden)
        self.encoder = nn.ModuleList(T5Block(hidden, heads, ffn, decoder=False) for _ in range(layers))
        self.encoder_norm = nn.RMSNorm(hidden)
        self.decoder = nn.ModuleList(T5Block(hidden, heads, ffn, decoder=True) for _ in range(layers))
        self.decoder_norm = nn.RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        x = self.shared(input_ids)
        for block in self.encoder:
            x = block(x)
        memory = self.encoder_norm(x)
        y = self.shared(decoder_input_ids)
        for block in self.decoder:
            y = block(y, memory)
        return self.lm_head(self.decoder_norm(y))


def t5() -> tuple[nn.Module, object]:
    def make_inputs(micro_batch: int, seq_len: int) -> dict[str, torch.Tensor]:
        ids = torch.zeros(micro_batch, seq_len, dtype=torch.long)
        return {"input_ids": ids, "decoder_input_ids": ids.clone()}

    return T5(), make_inputs


# -- DLRM (Naumov et al. 2019): bottom MLP, embedding bags, pairwise dot interaction, top MLP -------
DLRM_TABLES = (200_000_000, 150_000_000, 100_000, 5_000)
"""Rows per table: 44.8 billion parameters of 128 wide rows, 90 GB in bf16: more than one GPU holds."""
DLRM_DIM = 128


class DLRM(nn.Module):
    def __init__(self, dense: int = 13, tables: tuple[int, ...] = DLRM_TABLES, dim: int = DLRM_DIM) -> None:
        super().__init__()
        d = dim
        self.bottom_mlp = nn.Sequential(nn.Linear(dense, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                        nn.Linear(256, d), nn.ReLU())
        self.embeddings = nn.ModuleList(nn.EmbeddingBag(rows, d, mode="sum") for rows in tables)
        pairs = (len(tables) + 1) * len(tables) // 2
        self.top_mlp = nn.Sequential(nn.Linear(d + pairs, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                     nn.Linear(256, 1))

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        x = self.bottom_mlp(dense)
        features = [x] + [bag(sparse[:, i]) for i, bag in enumerate(self.embeddings)]
        t = torch.stack(features, dim=1)
        z = torch.bmm(t, t.transpose(1, 2))
        rows, cols = torch.tril_indices(t.shape[1], t.shape[1], offset=-1)
        return self.top_mlp(torch.cat([x, z[:, rows, cols]], dim=1))


def dlrm() -> tuple[nn.Module, object]:
    def make_inputs(micro_batch: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        sparse = torch.zeros(micro_batch, len(DLRM_TABLES), 1, dtype=torch.long)
        return torch.randn(micro_batch, 13), sparse

    return DLRM(), make_inputs


# -- Mixtral-style MoE decoder: GQA, RMSNorm, 8 SwiGLU experts, top-2 routing by torch.where ----------
class Expert(nn.Module):
    def __init__(self, hidden: int, ffn: int) -> None:
        super().__init__()
        self.w1, self.w2, self.w3 = nn.Linear(hidden, ffn, bias=False), nn.Linear(ffn, hidden, bias=False), \
            nn.Linear(hidden, ffn, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoe(nn.Module):
    def __init__(self, hidden: int, ffn: int, experts: int, top_k: int) -> None:
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(hidden, experts, bias=False)
        self.experts = nn.ModuleList(Expert(hidden, ffn) for _ in range(experts))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        flat = x.view(-1, h)
        weights, chosen = torch.topk(F.softmax(self.gate(flat), dim=-1), self.top_k)
        out = torch.zeros_like(flat)
        for i, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == i)
            if token.numel() == 0:
                continue
            out.index_add_(0, token, expert(flat[token]) * weights[token, slot, None])
        return out.view(b, s, h)


class MoeBlock(nn.Module):
    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int, experts: int, top_k: int) -> None:
        super().__init__()
        d = hidden // heads
        self.heads, self.kv_heads = heads, kv_heads
        self.input_layernorm = nn.RMSNorm(hidden)
        self.self_attn = nn.ModuleDict({
            "q_proj": nn.Linear(hidden, heads * d, bias=False), "k_proj": nn.Linear(hidden, kv_heads * d, bias=False),
            "v_proj": nn.Linear(hidden, kv_heads * d, bias=False), "o_proj": nn.Linear(heads * d, hidden, bias=False),
        })
        self.post_attention_layernorm = nn.RMSNorm(hidden)
        self.block_sparse_moe = SparseMoe(hidden, ffn, experts, top_k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        y = self.input_layernorm(x)
        a = self.self_attn
        q = a["q_proj"](y).view(b, s, self.heads, -1).transpose(1, 2)
        k = a["k_proj"](y).view(b, s, self.kv_heads, -1).transpose(1, 2)
        v = a["v_proj"](y).view(b, s, self.kv_heads, -1).transpose(1, 2)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + a["o_proj"](o.transpose(1, 2).reshape(b, s, h))
        return x + self.block_sparse_moe(self.post_attention_layernorm(x))


MIXTRAL = dict(vocab=1000, hidden=64, heads=8, kv_heads=2, ffn=224, experts=8, top_k=2, layers=2)


class Mixtral(nn.Module):
    def __init__(self, vocab: int, hidden: int, heads: int, kv_heads: int, ffn: int, experts: int, top_k: int,
                 layers: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(MoeBlock(hidden, heads, kv_heads, ffn, experts, top_k) for _ in range(layers))
        self.norm = nn.RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def mixtral() -> nn.Module:
    return Mixtral(**MIXTRAL)


# -- A hand-written GPT: attention in a helper method of the block (no attention submodule), heads
#    read from a reshape, biases everywhere, untied head ----------------------------------------------
class HelperBlock(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.n_head = heads
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.c_attn, self.c_proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc, self.proj = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

    def _mix(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).reshape(b, t, 3, self.n_head, c // self.n_head).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._mix(self.ln1(x))
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))


class HelperGPT(nn.Module):
    def __init__(self, vocab: int, positions: int, hidden: int, heads: int, layers: int) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(positions, hidden)
        self.h = nn.ModuleList(HelperBlock(hidden, heads) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))
        for block in self.h:
            x = block(x)
        return self.head(self.ln_f(x))


def helper_gpt() -> nn.Module:
    return HelperGPT(**GPT)


class OddMlpBlock(GPTBlock):
    """A GPT block whose MLP has three projections in a row: no transformer layout fits it."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__(hidden, heads)
        self.mlp = nn.Sequential(nn.Linear(hidden, 4 * hidden), nn.GELU(), nn.Linear(4 * hidden, hidden),
                                 nn.Linear(hidden, hidden))


def odd_gpt() -> nn.Module:
    model = GPT2(**GPT)
    model.blocks = nn.ModuleList(OddMlpBlock(GPT["hidden"], GPT["heads"]) for _ in range(GPT["layers"]))
    return model
