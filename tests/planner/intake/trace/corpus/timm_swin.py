"""Re-implements timm's Swin Transformer: written in our own words from the published description (paper, docs,
module names), no code copied.

huggingface/pytorch-image-models (timm) ``swin_transformer.py``, re-implemented with its module
names and channels-last (NHWC) layout (timm needs torchvision, whose PyPI build does not run beside
torch 2.13): ``PatchEmbed`` (Conv2d ``proj`` and LayerNorm ``norm``), stages of
``SwinTransformerBlock`` (norm1, ``WindowAttention`` with fused ``qkv``, a
``relative_position_bias_table`` of (2w-1)² x heads read through the ``relative_position_index``
buffer and added as SDPA's float mask, ``proj``; norm2, ``Mlp`` fc1/fc2), every second block on
windows shifted by w/2 with a ``torch.roll`` and the -100 ``attn_mask`` buffer between regions,
``PatchMerging`` (2x2 neighbours concatenated, LayerNorm over 4C, bias-free ``reduction`` to 2C) at
the start of stages 2-4, a final LayerNorm, average pooling and the ``head.fc`` classifier.

Swin-T (``swin_tiny_patch4_window7_224``): 28,288,354 parameters, as timm's model card states.
``timm_swin_base`` is Swin-B on timm's default path for Swin, attention scores written out as matmuls
(fused attention is "experimental" for it in timm).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from timm_models import Mlp, _images


def window_partition(x: torch.Tensor, w: int) -> torch.Tensor:
    """(B, H, W, C) -> (B·H/w·W/w, w, w, C)."""
    B, H, W, C = x.shape
    x = x.view(B, H // w, w, W // w, w, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, w, w, C)


def window_reverse(windows: torch.Tensor, w: int, H: int, W: int) -> torch.Tensor:
    C = windows.shape[-1]
    x = windows.view(-1, H // w, W // w, w, w, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)


def relative_position_index(w: int) -> torch.Tensor:
    coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
    return rel[:, :, 0] * (2 * w - 1) + rel[:, :, 1]


class WindowAttention(nn.Module):
    def __init__(self, dim: int, num_heads: int, window: int, fused: bool = True) -> None:
        super().__init__()
        self.num_heads, self.window_area = num_heads, window * window
        self.fused_attn = fused  # timm: use_fused_attn(experimental=True), False unless TIMM_FUSED_ATTN says so
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, num_heads))
        self.register_buffer("relative_position_index", relative_position_index(window).view(-1), persistent=False)
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def _get_rel_pos_bias(self) -> torch.Tensor:
        bias = self.relative_position_bias_table[self.relative_position_index].view(self.window_area, self.window_area, -1)
        return bias.permute(2, 0, 1).contiguous().unsqueeze(0)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        B_, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B_, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        attn_mask = self._get_rel_pos_bias()
        if mask is not None:
            num_win = mask.shape[0]
            mask = mask.view(1, num_win, 1, N, N).expand(B_ // num_win, -1, self.num_heads, -1, -1)
            attn_mask = attn_mask + mask.reshape(-1, self.num_heads, N, N)
        if self.fused_attn:
            x = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        else:  # timm's default path: the scores written out with matmuls and a softmax
            scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-2, -1)
            x = (scores + attn_mask).softmax(dim=-1) @ v
        return self.proj(x.transpose(1, 2).reshape(B_, N, -1))


def shifted_window_mask(resolution: int, window: int, shift: int) -> torch.Tensor:
    """timm ``SwinTransformerBlock.get_attn_mask``: -100 between tokens of different shifted regions."""
    img = torch.zeros(1, resolution, resolution, 1)
    cnt = 0
    for h in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
        for w in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
            img[:, h, w, :] = cnt
            cnt += 1
    windows = window_partition(img, window).view(-1, window * window)
    mask = windows.unsqueeze(1) - windows.unsqueeze(2)
    return mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim: int, resolution: int, num_heads: int, window: int, shift: int, fused: bool) -> None:
        super().__init__()
        self.window = min(window, resolution)
        self.shift = 0 if resolution <= window else shift
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, num_heads, self.window, fused)
        self.norm2, self.mlp = nn.LayerNorm(dim), Mlp(dim, 4 * dim)
        mask = shifted_window_mask(resolution, self.window, self.shift) if self.shift else None
        self.register_buffer("attn_mask", mask, persistent=False)

    def _attn(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        shifted = torch.roll(x, shifts=(-self.shift, -self.shift), dims=(1, 2)) if self.shift else x
        windows = window_partition(shifted, self.window).view(-1, self.window * self.window, C)
        windows = self.attn(windows, mask=self.attn_mask).view(-1, self.window, self.window, C)
        shifted = window_reverse(windows, self.window, H, W)
        return torch.roll(shifted, shifts=(self.shift, self.shift), dims=(1, 2)) if self.shift else shifted

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        x = x + self._attn(self.norm1(x))
        x = x.reshape(B, -1, C)
        x = x + self.mlp(self.norm2(x))
        return x.reshape(B, H, W, C)


class PatchMerging(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, H, W, C = x.shape
        x = x.reshape(B, H // 2, 2, W // 2, 2, C).permute(0, 1, 3, 4, 2, 5).flatten(3)
        return self.reduction(self.norm(x))


class PatchEmbed(nn.Module):
    def __init__(self, patch: int, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(x).permute(0, 2, 3, 1))  # NHWC


class SwinTransformerStage(nn.Module):
    def __init__(self, dim: int, out_dim: int, resolution: int, depth: int, heads: int, window: int, merge: bool,
                 fused: bool) -> None:
        super().__init__()
        self.downsample = PatchMerging(dim) if merge else nn.Identity()
        self.blocks = nn.Sequential(*[
            SwinTransformerBlock(out_dim, resolution, heads, window, 0 if i % 2 == 0 else window // 2, fused)
            for i in range(depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.downsample(x))


class ClassifierHead(nn.Module):
    def __init__(self, dim: int, classes: int) -> None:
        super().__init__()
        self.fc = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean((1, 2)))


class SwinTransformer(nn.Module):
    def __init__(self, img: int, patch: int, dim: int, depths: tuple[int, ...], heads: tuple[int, ...],
                 window: int, classes: int, fused: bool = True) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(patch, dim)
        stages, res = [], img // patch
        for i, (depth, h) in enumerate(zip(depths, heads)):
            in_dim, out_dim = dim * 2 ** max(i - 1, 0), dim * 2 ** i
            res = res // 2 if i else res
            stages.append(SwinTransformerStage(in_dim, out_dim, res, depth, h, window, i > 0, fused))
        self.layers = nn.Sequential(*stages)
        self.norm = nn.LayerNorm(dim * 2 ** (len(depths) - 1))
        self.head = ClassifierHead(dim * 2 ** (len(depths) - 1), classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.layers(self.patch_embed(x))))


def timm_swin():
    """``swin_tiny_patch4_window7_224``: width 96, depths (2, 2, 6, 2), heads (3, 6, 12, 24), window 7."""
    return SwinTransformer(224, 4, 96, (2, 2, 6, 2), (3, 6, 12, 24), 7, 1000), _images(224)


def timm_swin_small():
    return SwinTransformer(32, 2, 16, (2, 2, 2), (2, 4, 8), 4, 10), _images(32)


def timm_swin_base():
    """``swin_base_patch4_window7_224`` as timm runs it by default (fused attention is experimental for
    Swin, so the scores are explicit matmuls): width 128, depths (2, 2, 18, 2), heads (4, 8, 16, 32)."""
    return SwinTransformer(224, 4, 128, (2, 2, 18, 2), (4, 8, 16, 32), 7, 1000, fused=False), _images(224)


def timm_swin_base_small():
    return SwinTransformer(32, 2, 16, (2, 2, 2), (2, 4, 8), 4, 10, fused=False), _images(32)
