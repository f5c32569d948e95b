"""Units: the module tree split into layer units, repeat groups, and the Linear / norm look-ups."""

from __future__ import annotations

import torch
from torch import nn

from planner.intake.trace.units import find_units, linear_dims, module_signature, norm_kind


def _meta(build):
    with torch.device("meta"):
        return build()


def test_gpt_blocks_are_one_repeat_group(zoo) -> None:
    units = find_units(_meta(zoo.gpt))
    kinds = {path: u.kind for path, u in units.units.items()}
    assert kinds == {"wte": "embedding", "wpe": "embedding", "blocks.0": "block", "blocks.1": "block",
                     "blocks.2": "block", "ln_f": "leaf", "head": "leaf"}
    assert list(units.groups().values()) == [["blocks.0", "blocks.1", "blocks.2"]]


def test_resolve_finds_the_innermost_unit_and_glue(zoo) -> None:
    units = find_units(_meta(zoo.gpt))
    assert units.resolve("blocks.1.mlp.0").path == "blocks.1"
    assert units.resolve("") is None
    assert units.resolve("blocks.0.mlp.1").path == "blocks.0"  # a GELU inside a block is the block's


def test_resnet_bottlenecks_group_by_shape_and_light_leaves(zoo) -> None:
    units = find_units(_meta(lambda: zoo.resnet50()[0]))
    groups = sorted(units.groups().values())
    assert ["layer1.1", "layer1.2"] in groups and ["layer3.1", "layer3.2", "layer3.3", "layer3.4", "layer3.5"] in groups
    assert units.units["layer1.0"].group == -1  # the downsampling block is unlike its siblings
    assert units.units["relu"].light and units.units["maxpool"].light and not units.units["bn1"].light


def test_dlrm_tables_are_one_unit_and_mlps_split_into_leaves(zoo) -> None:
    units = find_units(_meta(lambda: zoo.dlrm()[0]))
    assert units.units["embeddings"].kind == "tables"
    assert units.units["bottom_mlp.0"].kind == "leaf" and units.units["bottom_mlp.1"].light


def test_t5_style_decoder_blocks_hold_cross_attention(zoo) -> None:
    units = find_units(_meta(lambda: zoo.t5()[0]))
    assert units.units["decoder.0"].kind == "block" and units.units["encoder.1"].kind == "block"
    assert units.units["encoder.0"].group != units.units["decoder.0"].group


def test_a_list_of_sublayers_is_not_the_block_its_owner_is() -> None:
    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.o = nn.Linear(8, 8), nn.Linear(8, 8)

    class Sub(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.SelfAttention = Attention()

    class Block(nn.Module):  # T5's layout: block.layer = [attention sublayer, feed-forward]
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.ModuleList([Sub(), nn.Sequential(nn.Linear(8, 32), nn.Linear(32, 8))])

    root = nn.Module()
    root.blocks = nn.ModuleList([Block(), Block()])
    units = find_units(root)
    assert units.units["blocks.0"].kind == "block" and "blocks.0.layer" not in units.units


def test_linear_dims_reads_linears_conv1d_and_routers() -> None:
    class Conv1D(nn.Module):  # Hugging Face GPT-2 stores the weight as in x out
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(16, 48))

    class Router(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.empty(8, 16))

    assert linear_dims(nn.Linear(16, 32)) == (16, 32)
    assert linear_dims(Conv1D()) == (16, 48)
    assert linear_dims(Router()) == (16, 8)
    assert linear_dims(nn.Embedding(10, 4)) is None and linear_dims(nn.Conv2d(3, 4, 3)) is None


def test_norm_kind_by_type_and_by_bias() -> None:
    class T5LayerNorm(nn.Module):  # an RMS norm named LayerNorm
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(8))

    assert norm_kind(nn.LayerNorm(8)) == "layernorm"
    assert norm_kind(nn.RMSNorm(8)) == "rmsnorm"
    assert norm_kind(T5LayerNorm()) == "rmsnorm"
    assert norm_kind(nn.LayerNorm(8, bias=False)) == "rmsnorm"
    assert norm_kind(nn.BatchNorm2d(8)) is None and norm_kind(nn.Linear(8, 8)) is None


def test_module_signature_separates_shapes() -> None:
    assert module_signature(nn.Linear(4, 8)) == module_signature(nn.Linear(4, 8))
    assert module_signature(nn.Linear(4, 8)) != module_signature(nn.Linear(4, 9))
