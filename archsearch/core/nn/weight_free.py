"""The weight-free layer as a scaled mask: b * (x @ m^T) instead of x @ (b m)^T.

"Disentangling Neural Architectures and Weights", section 5: a weight-free network's links
take values in {0, b}, one constant b per layer (`nn.masked_model.make_weight_free`), so a
layer is the {0, 1} mask m times b. Mixed into `nn.masked.MaskedMixin`: a layer that knows
its weight is that constant feeds the mask itself to the matrix product and scales the
(batch, out) output, and the shortcut ends as soon as the weight or bias is written.
"""

from __future__ import annotations

import torch
from torch import nn


class WeightFreeScale:
    """Whether a masked layer's weight is still the weight-free constant b, cheaply."""

    _parameters: dict[str, nn.Parameter | None]

    def _weight(self) -> torch.Tensor:
        return self._parameters["weight"]  # type: ignore[return-value]

    def mark_weight_free(self) -> None:
        """Record that every weight is one constant b and the bias zero (`make_weight_free`),
        both untrained: the layer then computes b * (x @ m^T), see `weight_free_scale`."""
        value = float(self._weight().flatten()[0])
        self._weight_free = (value, self._written(), self._holds_constant(value))

    def weight_free_scale(self) -> float | None:
        """b while the weight is the weight-free constant b, the bias zero and neither
        trained, else None.

        The weight-free network's layer is x @ (b m)^T = b * (x @ m^T): the mask itself goes
        into the matrix product and b scales the (batch, out) output, so no weight-sized
        product b * m is formed forward, nor g * b backward (autograd scales the output's
        gradient instead). The same function; the float rounding of the sums differs.
        Keyed by the tensors' version counters and storage: after any write (a checkpoint
        loaded, a move) the weight is checked again, so the shortcut never outlives it.
        """
        held: tuple[float, tuple[int, ...], bool] | None = self.__dict__.get("_weight_free")
        if held is None:
            return None
        value, written, constant = held
        now = self._written()
        if now != written:
            constant = self._holds_constant(value)
            self._weight_free = (value, now, constant)
        return value if constant else None

    def _written(self) -> tuple[int, ...]:
        """What any write to the weight or bias changes: version counters, storage, and
        whether they are trained."""
        weight, bias = self._weight(), self._parameters.get("bias")
        key = (weight._version, weight.data_ptr(), weight.requires_grad)
        return key if bias is None else (*key, bias._version, bias.data_ptr(), bias.requires_grad)

    def _holds_constant(self, value: float) -> bool:
        weight, bias = self._weight(), self._parameters.get("bias")
        if weight.requires_grad or not bool((weight == value).all()):
            return False
        return bias is None or not (bias.requires_grad or bool(bias.any()))
