"""The weights' and the masks' optimisers: SGD with momentum (Sutskever et al. 2013, eq. 1-2;
Nesterov as in torch), Adam ("Adam: A method for stochastic optimization", Algorithm 1) and
AdamW ("Decoupled weight decay regularization", Algorithm 2), stepped by torch's own
functional kernels (`torch.optim.sgd.sgd`, `torch.optim.adam.adam`; a fused Adam on one device
calls the fused kernel as that function would), with a LambdaLR schedule.

Why not torch.optim's classes: building one, zeroing it, saving or loading its state and
stepping it all pass through wrappers (`torch._disable_dynamo`, `_use_grad_for_differentiable`)
that import torch._dynamo, and sympy with it: about 80 MB more resident memory in every
process that trains, for a compiler the engine never uses. The functional kernels import
none of it. The state, the parameter groups and the state_dict format are torch's own
(`state` {index: {step, exp_avg, exp_avg_sq} or {momentum_buffer}}, `param_groups` with
torch's keys), so checkpoints written by either resume with the other, and the updates are
bit-identical: the same kernel gets the same arguments (`tests/core/test_optimizers.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from copy import deepcopy
from typing import Any, Literal

import torch
from torch import nn
from torch.optim.adam import adam
from torch.optim.sgd import sgd

Kind = Literal["sgd", "adam", "adamw"]
StepHook = Callable[[Any, Any, Any], None]
# torch's defaults, in torch's order: a group's keys and their order are part of the format.
SGD_DEFAULTS: dict[str, Any] = {
    "lr": 1e-3,
    "momentum": 0,
    "dampening": 0,
    "weight_decay": 0,
    "nesterov": False,
    "maximize": False,
    "foreach": None,
    "differentiable": False,
    "fused": None,
}
ADAM_DEFAULTS: dict[str, Any] = {
    "lr": 1e-3,
    "betas": (0.9, 0.999),
    "eps": 1e-8,
    "weight_decay": 0,
    "amsgrad": False,
    "maximize": False,
    "foreach": None,
    "capturable": False,
    "differentiable": False,
    "fused": None,
    "decoupled_weight_decay": False,
}


class FunctionalOptimizer:
    """One parameter group of SGD, Adam or AdamW, with torch.optim's state and format."""

    def __init__(self, kind: Kind, params: Iterable[nn.Parameter], **hyper: Any) -> None:
        defaults = SGD_DEFAULTS if kind == "sgd" else ADAM_DEFAULTS
        unknown = set(hyper) - set(defaults)
        assert not unknown, f"{kind} takes no {sorted(unknown)}"
        params = list(params)
        assert params, "an optimiser needs at least one parameter"
        self.kind = kind
        group = {"params": params, **defaults, **hyper}
        if kind == "adamw":
            group["decoupled_weight_decay"] = True
        self.param_groups: list[dict[str, Any]] = [group]
        self.state: defaultdict[torch.Tensor, dict[str, Any]] = defaultdict(dict)
        self._post_hooks: list[StepHook] = []

    def register_step_post_hook(self, hook: StepHook) -> None:
        """`hook(optimizer, (), {})` after every step, as torch.optim calls its post-hooks."""
        self._post_hooks.append(hook)

    @torch.no_grad()
    def step(self) -> None:
        for group in self.param_groups:
            if self.kind == "sgd":
                _sgd_step(self.state, group)
            else:
                _adam_step(self.state, group)
        for hook in self._post_hooks:
            hook(self, (), {})

    def zero_grad(self) -> None:
        clear_grads(self.params())

    def state_dict(self) -> dict[str, Any]:
        """torch.optim.Optimizer.state_dict's format: parameters by their index over groups."""
        index = {id(p): i for i, p in enumerate(self.params())}
        groups = [
            {
                **{k: v for k, v in g.items() if k != "params"},
                "params": [index[id(p)] for p in g["params"]],
            }
            for g in self.param_groups
        ]
        state = {index[id(p)]: values for p, values in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """What torch.optim.Optimizer.load_state_dict does: groups matched by position,
        state tensors moved to their parameter's device (and dtype, see `_cast`)."""
        saved_groups = deepcopy(state_dict["param_groups"])
        _check_groups_match(saved_groups, self.param_groups)
        by_id = dict(
            zip((i for g in saved_groups for i in g["params"]), self.params(), strict=True)
        )
        fused = {
            i: bool(g.get("fused") or g.get("capturable"))
            for g in saved_groups
            for i in g["params"]
        }
        self.state = defaultdict(dict)
        for i, values in state_dict["state"].items():
            param = by_id[i]
            self.state[param] = {k: _cast(param, v, k, fused[i]) for k, v in values.items()}
        for group, saved in zip(self.param_groups, saved_groups, strict=True):
            saved["params"] = group["params"]
        self.param_groups = saved_groups

    def params(self) -> list[torch.Tensor]:
        """Every parameter of every group, in the order of the state_dict's indices."""
        return [p for group in self.param_groups for p in group["params"]]


def clear_grads(params: Iterable[torch.Tensor]) -> None:
    """`zero_grad(set_to_none=True)` of `params`: a loop a caller can run over a list it
    made once (the training loop clears the same parameters on every step)."""
    for p in params:
        p.grad = None


def _check_groups_match(saved: list[dict[str, Any]], groups: list[dict[str, Any]]) -> None:
    # torch.optim's own errors, so a checkpoint of another model fails as it did before.
    if len(saved) != len(groups):
        raise ValueError("loaded state dict has a different number of parameter groups")
    if any(len(s["params"]) != len(g["params"]) for s, g in zip(saved, groups, strict=True)):
        raise ValueError(
            "loaded state dict contains a parameter group "
            "that doesn't match the size of optimizer's group"
        )


def _cast(param: torch.Tensor, value: Any, key: str, fused: bool) -> Any:
    """A saved state value as torch.optim loads it: `step` stays a CPU float unless the
    kernel is fused; other tensors take the parameter's device (and dtype, if a float)."""
    if not isinstance(value, torch.Tensor):
        return value
    if key == "step":
        return value.to(dtype=torch.float32, device=param.device) if fused else value
    if param.is_floating_point():
        return value.to(dtype=param.dtype, device=param.device)
    return value.to(device=param.device)


def _with_grads(group: dict[str, Any]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    params = [p for p in group["params"] if p.grad is not None]
    return params, [p.grad for p in params]


def _adam_state(p: torch.Tensor, group: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A parameter's first Adam state, as torch.optim.Adam creates it lazily."""
    on_device = group["capturable"] or group["fused"]
    scalar = torch.float32 if group["fused"] else _scalar_dtype()
    step = (
        torch.zeros((), dtype=scalar, device=p.device)
        if on_device
        else torch.tensor(0.0, dtype=scalar)
    )
    state = {"step": step}
    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    if group["amsgrad"]:
        state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    return state


def _scalar_dtype() -> torch.dtype:
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


def _adam_step(state: defaultdict[torch.Tensor, dict[str, Any]], group: dict[str, Any]) -> None:
    params, grads = _with_grads(group)
    for p in params:
        if not state[p]:
            state[p].update(_adam_state(p, group))
    per_param = [state[p] for p in params]
    exp_avgs, exp_avg_sqs = [s["exp_avg"] for s in per_param], [s["exp_avg_sq"] for s in per_param]
    max_exp_avg_sqs = [s["max_exp_avg_sq"] for s in per_param] if group["amsgrad"] else []
    steps = [s["step"] for s in per_param]
    # The tensor lists in the order torch's adam and its fused kernel both take them.
    tensors = (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps)
    if _one_fused_call(group, params):
        _fused_adam_step(group, tensors)
        return
    adam(
        *tensors,
        **_adam_hyper(group),
        has_complex=any(torch.is_complex(p) for p in params),
        foreach=group["foreach"],
        capturable=group["capturable"],
        differentiable=group["differentiable"],
        fused=group["fused"],
        decoupled_weight_decay=group["decoupled_weight_decay"],
    )


def _adam_hyper(group: dict[str, Any]) -> dict[str, Any]:
    """The hyper-parameters torch's Adam and its fused kernel both take, from a group."""
    beta1, beta2 = group["betas"]
    return {
        "amsgrad": group["amsgrad"],
        "lr": group["lr"],
        "beta1": beta1,
        "beta2": beta2,
        "weight_decay": group["weight_decay"],
        "eps": group["eps"],
        "maximize": group["maximize"],
    }


def _one_fused_call(group: dict[str, Any], params: list[torch.Tensor]) -> bool:
    """Whether torch's fused Adam would make exactly one kernel call for `params` (fused,
    one device and one real dtype, plain float hyper-parameters): `_fused_adam_step` then
    makes that call itself, without the ~10 us of torch's grouping and checks a step."""
    if not (params and group["fused"] is True) or group["differentiable"]:
        return False
    if not all(isinstance(group[k], float) for k in ("lr", "eps")):
        return False
    if not all(isinstance(beta, float) for beta in group["betas"]):
        return False
    first = params[0]
    same = all(p.device == first.device and p.dtype == first.dtype for p in params)
    return same and not first.is_complex()


def _fused_adam_step(
    group: dict[str, Any],
    tensors: tuple[list[torch.Tensor], ...],
) -> None:
    """What `torch.optim.adam._fused_adam` does for one device and dtype, call for call:
    the steps counted, then the same fused kernel with the same arguments (bit-identical).
    `tensors`: params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps."""
    torch._foreach_add_(tensors[-1], 1)  # the steps
    kernel = torch._fused_adamw_ if group["decoupled_weight_decay"] else torch._fused_adam_
    kernel(
        *tensors,
        **_adam_hyper(group),
        grad_scale=None,
        found_inf=None,
    )


def _sgd_step(state: defaultdict[torch.Tensor, dict[str, Any]], group: dict[str, Any]) -> None:
    params, grads = _with_grads(group)
    momentum = group["momentum"] != 0
    buffers = [state[p].get("momentum_buffer") for p in params] if momentum else []
    sgd(
        params,
        grads,
        buffers,
        weight_decay=group["weight_decay"],
        momentum=group["momentum"],
        lr=group["lr"],
        dampening=group["dampening"],
        nesterov=group["nesterov"],
        maximize=group["maximize"],
        has_sparse_grad=any(g.is_sparse for g in grads),
        foreach=group["foreach"],
        fused=group["fused"],
    )
    # The kernel creates the first momentum buffers in the list it was given.
    if momentum:
        for p, buffer in zip(params, buffers, strict=True):
            state[p]["momentum_buffer"] = buffer


class LambdaSchedule:
    """torch.optim.lr_scheduler.LambdaLR for a `FunctionalOptimizer`: the learning rate of
    every group is its initial one times `factor(step)`, with LambdaLR's state_dict."""

    def __init__(self, optimizer: FunctionalOptimizer, factor: Callable[[int], float]) -> None:
        self.optimizer, self.factor = optimizer, factor
        for group in optimizer.param_groups:
            group.setdefault("initial_lr", group["lr"])
        self.base_lrs: list[float] = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch, self.step_count = -1, 0
        self.step()  # as LambdaLR's constructor does: the rate of step 0 is set at once

    def step(self) -> None:
        self.step_count += 1
        self.last_epoch += 1
        for group, base_lr in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base_lr * self.factor(self.last_epoch)

    def state_dict(self) -> dict[str, Any]:
        return {
            "base_lrs": list(self.base_lrs),
            "last_epoch": self.last_epoch,
            "_step_count": self.step_count,
            "_is_initial": False,
            "_get_lr_called_within_step": False,
            "_last_lr": [group["lr"] for group in self.optimizer.param_groups],
            "lr_lambdas": [None],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        # As LambdaLR: the groups' current rates come with the optimiser's own state.
        self.base_lrs = list(state["base_lrs"])
        self.last_epoch, self.step_count = int(state["last_epoch"]), int(state["_step_count"])
