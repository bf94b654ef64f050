"""Ensemble layers: M independent networks evaluated with one batched matmul per layer.

An ensemble of M multilayer perceptrons with identical shapes is stored as one set of
stacked parameters: the weight of a layer has shape (M, in, out) and its bias (M, 1, out).
A batch for the whole ensemble has shape (M, B, in) -- row ``m`` of it is what member ``m``
sees -- and one ``torch.baddbmm`` computes every member's layer at once. There is no Python
loop over members, so the cost of a forward pass does not grow with the number of kernel
launches when M grows (which is what makes a 100-member ensemble cheap on a GPU).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn

from ..utils import check_positive_int
from .spec import ACTIVATION_NAMES

_ACTIVATION_MODULES: dict[str, type[nn.Module]] = {"silu": nn.SiLU, "relu": nn.ReLU, "tanh": nn.Tanh}
ACTIVATIONS: dict[str, type[nn.Module]] = {name: _ACTIVATION_MODULES[name] for name in ACTIVATION_NAMES}
"""Hidden activations by name (:data:`~opcc_edu.dynamics.spec.ACTIVATION_NAMES`)."""


class EnsembleLinear(nn.Module):
    """M affine maps ``y_m = x_m W_m + b_m`` computed by one batched matmul.

    Attributes:
        weight: parameter of shape (M, in, out).
        bias: parameter of shape (M, 1, out) (absent when ``bias=False``).
    """

    def __init__(
        self,
        ensemble_size: int,
        in_features: int,
        out_features: int,
        bias: bool = True,
        generator: torch.Generator | None = None,
        init: bool = True,
    ):
        """Create the layer with a per-member truncated-normal initialisation.

        Args:
            ensemble_size: number of members M.
            in_features: input size.
            out_features: output size.
            bias: add a learned bias per member.
            generator: torch generator for the initial weights (None: global RNG).
            init: draw initial weights; ``False`` leaves them uninitialised (for a layer
                whose weights are loaded right away).
        """
        super().__init__()
        self.ensemble_size = check_positive_int(ensemble_size, "ensemble_size")
        self.in_features = check_positive_int(in_features, "in_features")
        self.out_features = check_positive_int(out_features, "out_features")
        self.weight = nn.Parameter(torch.empty(self.ensemble_size, self.in_features, self.out_features))
        self.bias = nn.Parameter(torch.empty(self.ensemble_size, 1, self.out_features)) if bias else None
        if init:
            self.reset_parameters(generator)

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """Draw fresh weights: truncated normal with std 1/(2 sqrt(in)) (MBPO), zero bias.

        Each member gets its own draw, so members differ from the start; that independent
        initialisation is one of the two sources of ensemble diversity (the other is the
        bootstrap).
        """
        std = 1.0 / (2.0 * math.sqrt(self.in_features))
        with torch.no_grad():
            nn.init.trunc_normal_(self.weight, std=std, a=-2 * std, b=2 * std, generator=generator)
            if self.bias is not None:
                self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply every member to its own rows.

        Args:
            x: (M, B, in) float tensor; ``x[m]`` is the input of member ``m``.

        Returns:
            (M, B, out).
        """
        if x.dim() != 3 or x.shape[0] != self.ensemble_size or x.shape[-1] != self.in_features:
            raise ValueError(
                f"x must have shape (M={self.ensemble_size}, B, in={self.in_features}), got {tuple(x.shape)}"
            )
        if self.bias is None:
            return torch.bmm(x, self.weight)
        return torch.baddbmm(self.bias, x, self.weight)

    @classmethod
    def from_linears(cls, layers: Sequence[nn.Linear]) -> EnsembleLinear:
        """Stack M ``nn.Linear`` layers of one shape into an ensemble layer (exact copy).

        ``nn.Linear`` stores its weight as (out, in), so each is transposed.
        """
        if not layers:
            raise ValueError("layers must be a non-empty sequence of nn.Linear, got an empty one")
        first = layers[0]
        has_bias = first.bias is not None
        for i, layer in enumerate(layers):
            if not isinstance(layer, nn.Linear) or layer.weight.shape != first.weight.shape:
                raise ValueError(f"layers[{i}] must be an nn.Linear of shape {tuple(first.weight.shape)}")
            if (layer.bias is not None) != has_bias:
                raise ValueError(f"layers[{i}] must {'have' if has_bias else 'not have'} a bias like layers[0]")
        out = cls(len(layers), first.in_features, first.out_features, bias=has_bias)
        with torch.no_grad():
            out.weight.copy_(torch.stack([layer.weight.t() for layer in layers]))
            if has_bias:
                out.bias.copy_(torch.stack([layer.bias[None] for layer in layers]))
        return out

    def member(self, index: int) -> nn.Linear:
        """An ``nn.Linear`` equal to member ``index`` (a copy, for inspection and tests)."""
        if not 0 <= index < self.ensemble_size:
            raise ValueError(f"index must be in [0, {self.ensemble_size}), got {index}")
        layer = nn.Linear(self.in_features, self.out_features, bias=self.bias is not None)
        with torch.no_grad():
            layer.weight.copy_(self.weight[index].t())
            if self.bias is not None:
                layer.bias.copy_(self.bias[index, 0])
        return layer

    def extra_repr(self) -> str:
        return (
            f"ensemble_size={self.ensemble_size}, in_features={self.in_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class EnsembleMLP(nn.Module):
    """An ensemble of M multilayer perceptrons: EnsembleLinear layers with a hidden activation.

    The activation is applied in place on the hidden activations, which matters on a CPU:
    a (M, B, 200) tensor for M = 100 is hundreds of megabytes, and every extra copy of it
    costs as much memory traffic as a layer's matmul.
    """

    def __init__(
        self,
        ensemble_size: int,
        in_features: int,
        hidden_sizes: Sequence[int],
        out_features: int,
        activation: str = "silu",
        generator: torch.Generator | None = None,
        init: bool = True,
    ):
        """Args:
        ensemble_size: members M.
        in_features: input size.
        hidden_sizes: widths of the hidden layers (MBPO: four layers of 200).
        out_features: output size.
        activation: ``"silu"``, ``"relu"`` or ``"tanh"``.
        generator: torch generator for the initial weights.
        init: draw initial weights (see :class:`EnsembleLinear`).
        """
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; valid choices: {', '.join(ACTIVATIONS)}")
        hidden_sizes = tuple(check_positive_int(h, "hidden_sizes entry") for h in hidden_sizes)
        sizes = (in_features, *hidden_sizes, out_features)
        self.ensemble_size = ensemble_size
        self.hidden_sizes = hidden_sizes
        self.activation = activation
        self.layers = nn.ModuleList(
            EnsembleLinear(ensemble_size, a, b, generator=generator, init=init)
            for a, b in zip(sizes[:-1], sizes[1:], strict=True)
        )
        self._act = ACTIVATIONS[activation]()

    @property
    def in_features(self) -> int:
        return self.layers[0].in_features

    @property
    def out_features(self) -> int:
        return self.layers[-1].out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(M, B, in) -> (M, B, out)."""
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < last:
                x = _activate(self.activation, x, self._act)
        return x

    def flops_per_row(self) -> int:
        """Multiply-add FLOPs (2 per MAC) one member spends on one input row."""
        return sum(2 * layer.in_features * layer.out_features for layer in self.layers)


def _activate(name: str, x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    # In place only when no graph is recorded: autograd needs the pre-activation of SiLU.
    # ``x`` is always a fresh output of baddbmm here, so overwriting it is safe.
    if torch.is_grad_enabled() and x.requires_grad:
        return module(x)
    if name == "silu":
        return nn.functional.silu(x, inplace=True)
    if name == "relu":
        return x.relu_()
    return x.tanh_()
