"""Corpus models from the real packages that install beside torch 2.13 (the ``test`` extra):
torch_geometric's GraphSAGE and GAT, and diffusers' UNet2DModel."""

from __future__ import annotations

import torch
from torch import nn


def _graph(nodes_per_sample: int, features: int, degree: int):
    def make_inputs(micro_batch: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = micro_batch * nodes_per_sample
        src = torch.arange(n).repeat_interleave(degree)
        dst = (src * 7 + torch.arange(degree).repeat(n) + 1) % n
        return torch.zeros(n, features), torch.stack([src, dst])
    return make_inputs


def pyg_graphsage():
    """torch_geometric.nn.GraphSAGE: 3 layers of SAGEConv (mean aggregation), 256 wide, 128 features."""
    from torch_geometric.nn import GraphSAGE

    return GraphSAGE(128, 256, num_layers=3, out_channels=64), _graph(1024, 128, 8)


def pyg_graphsage_small():
    from torch_geometric.nn import GraphSAGE

    return GraphSAGE(16, 32, num_layers=2, out_channels=8), _graph(32, 16, 4)


def pyg_gat():
    """torch_geometric.nn.GAT: 3 GATConv layers of 4 heads (self-loops removed and added again: a
    boolean mask over the edges), 256 wide, 128 features."""
    from torch_geometric.nn import GAT

    return GAT(128, 256, num_layers=3, out_channels=64, heads=4), _graph(1024, 128, 8)


def pyg_gat_small():
    from torch_geometric.nn import GAT

    return GAT(16, 32, num_layers=2, out_channels=8, heads=4), _graph(32, 16, 4)


def _unet_inputs(size: int):
    return lambda micro_batch, seq_len: (torch.zeros(micro_batch, 3, size, size), torch.zeros(micro_batch, dtype=torch.long))


def diffusers_unet():
    """diffusers.UNet2DModel with the DDPM 256x256 layout (google/ddpm-ema-church-256 config)."""
    from diffusers import UNet2DModel

    model = UNet2DModel(sample_size=256, block_out_channels=(128, 128, 256, 256, 512, 512),
                        down_block_types=("DownBlock2D",) * 4 + ("AttnDownBlock2D", "DownBlock2D"),
                        up_block_types=("UpBlock2D", "AttnUpBlock2D") + ("UpBlock2D",) * 4)
    return model, _unet_inputs(256)


def diffusers_unet_small():
    from diffusers import UNet2DModel

    model = UNet2DModel(sample_size=16, block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
                        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                        up_block_types=("AttnUpBlock2D", "UpBlock2D"), attention_head_dim=8)
    return model, _unet_inputs(16)
