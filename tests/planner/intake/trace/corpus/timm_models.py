"""Re-implements timm's ViT and ConvNeXt: written in our own words from the published description (paper, docs,
module names), no code copied.

huggingface/pytorch-image-models (timm) ``vision_transformer.py`` and ``convnext.py``, re-implemented
with their module names (timm needs torchvision, whose PyPI build does not run beside torch 2.13):
ViT with ``PatchEmbed`` (Conv2d ``proj``), ``cls_token`` and ``pos_embed`` parameters, ``Block``
(norm1, attn with fused ``qkv`` and ``proj``, norm2, ``Mlp`` fc1/fc2), ``norm``, ``head``; ConvNeXt
with a stem, stages of ``ConvNeXtBlock`` (depth-wise ``conv_dw``, LayerNorm, ``mlp`` fc1/fc2 as
Linear, layer-scale ``gamma``) and strided downsampling convolutions."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(B, N, C))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim, eps=1e-6), Attention(dim, num_heads)
        self.norm2, self.mlp = nn.LayerNorm(dim, eps=1e-6), Mlp(dim, 4 * dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, patch: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, img: int, patch: int, dim: int, depth: int, heads: int, classes: int) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(patch, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, (img // patch) ** 2 + 1, dim))
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def _images(size: int):
    return lambda micro_batch, seq_len: torch.zeros(micro_batch, 3, size, size)


def timm_vit():
    """``vit_large_patch16_224``: 24 blocks, width 1024, 16 heads."""
    return VisionTransformer(224, 16, 1024, 24, 16, 1000), _images(224)


def timm_vit_small():
    return VisionTransformer(32, 8, 64, 2, 4, 10), _images(32)


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv_dw = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shortcut = x
        x = self.conv_dw(x).permute(0, 2, 3, 1)
        x = self.mlp(self.norm(x)) * self.gamma
        return shortcut + x.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    def __init__(self, depths: tuple[int, ...], dims: tuple[int, ...], classes: int) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, dims[0], kernel_size=4, stride=4), nn.GroupNorm(1, dims[0]))
        stages = []
        for i, (depth, dim) in enumerate(zip(depths, dims)):
            down = [] if i == 0 else [nn.GroupNorm(1, dims[i - 1]), nn.Conv2d(dims[i - 1], dim, 2, stride=2)]
            stages.append(nn.Sequential(*down, *[ConvNeXtBlock(dim) for _ in range(depth)]))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(nn.LayerNorm(dims[-1], eps=1e-6), nn.Linear(dims[-1], classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.stages(self.stem(x)).mean((2, 3)))


def timm_convnext():
    """``convnext_base``: depths (3, 3, 27, 3), widths (128, 256, 512, 1024)."""
    return ConvNeXt((3, 3, 27, 3), (128, 256, 512, 1024), 1000), _images(224)


def timm_convnext_small():
    return ConvNeXt((1, 1, 2, 1), (16, 32, 64, 128), 10), _images(32)
