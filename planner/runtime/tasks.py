"""What the native runtime trains a model on: next tokens, or seeded targets of a model without tokens.

A model whose first plan layer is an embedding table (:mod:`planner.runtime.layers`) reads token ids:
``meshplan run`` feeds it seeded tokens (batch, seq + 1) and the loss is the next-token
cross-entropy (:func:`planner.runtime.apply.next_token_loss`). Any other model (a CNN, a recommender
MLP, a model without a sequence dimension) is trained as a regression on synthetic data: its input
is what its factory's ``make_inputs(micro_batch, seq_len)`` builds, one floating-point tensor whose
first dimension is the batch, filled with seeded standard-normal values, and its target a seeded
standard-normal tensor of the model's output shape; the loss is the mean squared error over every
output element (:func:`regression_loss`). The mean over equal micro-batches and data-parallel shards
of per-shard means is the mean over the batch, so every split of a step computes the same loss as
one process. The batch a runtime step takes is then the pair ``(inputs, targets)`` instead of the
token tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import torch
import torch.nn.functional as F
from torch import nn

from planner.errors import InputError

Batch = Union[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]
"""Token ids (batch, seq + 1), or (inputs, targets) of a model without a token input."""


def next_token_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of ``logits`` (batch, seq, vocab) against ``labels`` (batch, seq), in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))


def regression_loss(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean squared error over every element of ``out`` against ``target``, in fp32 (the loss of a model
    without a token input; Gauss's least squares, ``torch.nn.functional.mse_loss`` with mean reduction)."""
    return F.mse_loss(out.float(), target.float())


@dataclass(frozen=True)
class Task:
    """The synthetic data of one model: token ids of ``vocab`` entries, or features (``vocab`` None)."""

    vocab: int | None
    sample: tuple[int, ...] = ()
    """Per-sample input shape of a model without tokens."""
    target: tuple[int, ...] = ()
    """Per-sample output shape of a model without tokens."""

    def batch(self, seed: int, step: int, rows: int, seq_len: int) -> Batch:
        """The global batch of training step ``step``, from ``seed`` only."""
        gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
        if self.vocab is not None:
            return torch.randint(0, self.vocab, (rows, seq_len + 1), generator=gen)
        inputs = torch.randn((rows, *self.sample), generator=gen)
        return inputs, torch.randn((rows, *self.target), generator=gen)

    def placeholder_input(self, rows: int, seq_len: int, device: torch.device | str) -> torch.Tensor:
        """A zero input of ``rows`` samples (for shapes and memory on ``meta`` or fake tensors)."""
        if self.vocab is not None:
            return torch.zeros((rows, seq_len), dtype=torch.long, device=device)
        return torch.zeros((rows, *self.sample), device=device)

    def placeholder_labels(self, out: torch.Tensor) -> torch.Tensor:
        """Zero labels for the model output ``out``: token ids (batch, seq), or a target shaped like it."""
        if self.vocab is not None:
            return torch.zeros(out.shape[:2], dtype=torch.long, device=out.device)
        return torch.zeros(out.shape, device=out.device)

    def loss(self, out: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The task's loss: next-token cross-entropy, or :func:`regression_loss`."""
        if self.vocab is not None:
            return next_token_loss(out, labels)
        return regression_loss(out, labels)


def reads_tokens(module: nn.Module, first_path: str) -> bool:
    """Whether the plan's first layer (the module at ``first_path``) is an embedding table read by token ids."""
    from planner.runtime.models import Embedding

    return isinstance(module.get_submodule(first_path), (nn.Embedding, Embedding))


def task_for(arg: Any, module: nn.Module, seq_len: int) -> Task:
    """The task of model ``arg`` (``module`` is it, built on any device): tokens of its vocabulary, or
    features of the shape its factory's ``make_inputs`` gives and targets of its output's shape."""
    from planner.intake.trace.units import find_units

    paths = [u.path for u in find_units(module).units.values() if not u.light]
    if reads_tokens(module, paths[0]):
        return Task(vocab=vocab_size(module))
    sample = feature_sample(arg, seq_len)
    x = torch.zeros((2, *sample), device=next(module.parameters()).device)  # 2 rows: BatchNorm needs more than one value
    try:
        with torch.no_grad():
            out = module(x)
    except Exception as err:
        raise InputError(f"model {arg} fails on its make_inputs shape {list(x.shape)}: {type(err).__name__}: {err}") from err
    if not isinstance(out, torch.Tensor):
        raise InputError(f"model {arg} returns {type(out).__name__}; the native runtime trains a model without tokens "
                         "on one output tensor")
    _check_chain(arg, module, paths, x, tuple(out.shape))
    return Task(vocab=None, sample=sample, target=tuple(out.shape[1:]))


def _check_chain(arg: Any, module: nn.Module, paths: list[str], x: torch.Tensor, want: tuple[int, ...]) -> None:
    """InputError unless calling the layer units one after the other gives the model's output shape: the
    runtime runs that chain (:mod:`planner.runtime.stage`), so code or parameter-free modules between
    units (a ResNet's pooling and flatten before its classifier) would be skipped."""
    h = x
    try:
        with torch.no_grad():
            for path in paths:
                h = module.get_submodule(path)(h)
                h = h[0] if isinstance(h, tuple) else h
    except Exception as err:
        raise InputError(f"model {arg}: calling its layers one after the other fails at {path} ({type(err).__name__}); "
                         "the native runtime runs a model without tokens as the chain of its layers: put the code "
                         "between them inside a layer") from err
    if tuple(h.shape) != want:
        raise InputError(f"model {arg}: the chain of its layers gives shape {list(h.shape)}, its forward {list(want)}; "
                         "the native runtime runs a model without tokens as that chain: put the code between layers inside one")


def feature_sample(arg: Any, seq_len: int) -> tuple[int, ...]:
    """Per-sample input shape of a factory model without tokens (its ``make_inputs(1, seq_len)``)."""
    from planner.intake.models import _FACTORY
    from planner.intake.trace.load import load_factory

    if not _FACTORY.match(str(arg)):
        raise InputError(f"model {arg} has no token embedding first: the native runtime trains such a model only from a "
                         "factory returning (module, make_inputs)")
    make_inputs = load_factory(str(arg))[1]
    if make_inputs is None:
        raise InputError(f"model {arg} has no token embedding first: its factory must return (module, make_inputs) "
                         "so that the native runtime knows its input shape")
    with torch.device("meta"):
        x = make_inputs(1, seq_len)
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point or x.dim() < 1 or x.shape[0] != 1:
        raise InputError(f"model {arg}: the native runtime feeds a model without tokens one floating-point tensor "
                         f"(batch first); make_inputs gives {type(x).__name__}")
    return tuple(int(d) for d in x.shape[1:])


def split_rows(batch: Batch, start: int, stop: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``[start, stop)`` of ``batch`` as (inputs, labels): shifted tokens, or features and targets."""
    if isinstance(batch, tuple):
        inputs, targets = batch
        return inputs[start:stop].to(device), targets[start:stop].to(device)
    local = batch[start:stop].to(device)
    return local[:, :-1], local[:, 1:]


def batch_rows(batch: Batch) -> int:
    """Samples in ``batch``."""
    return int((batch[0] if isinstance(batch, tuple) else batch).shape[0])


def vocab_size(module: nn.Module) -> int:
    """Rows of the model's first embedding table (the token vocabulary)."""
    for m in module.modules():
        if isinstance(m, nn.Embedding):
            return m.num_embeddings
        weight = getattr(m, "token_weight", None)
        if isinstance(weight, torch.Tensor):
            return int(weight.shape[0])
    raise ValueError("the model has no embedding table")
