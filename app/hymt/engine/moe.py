"""The Mixture-of-Experts block of hy_v3 (Hy-MT2-30B-A3B), over the loaded transformers modules: the router, the
routed experts and the shared expert beside them.

- Routing, as transformers' HYV3TopKRouter computes it: logits in float32, sigmoid scores; the expert-bias
  correction added for the choice alone (the top-k of score + bias), the chosen experts weighed by their unbiased
  scores, normalised to sum one and scaled by `router_scaling_factor`; on a GPU with Triton the router's matvec
  and all after it one kernel for a decoding step (kernels/moe.route_experts).
- The routed experts: on the CPU (and on a GPU without Triton) the loaded experts module itself, whose arithmetic is
  transformers' own, so greedy output is `generate`'s; on a GPU with Triton a matvec a slot for a decoding step's
  few rows, else two grouped matmuls over the slots sorted by expert (kernels/moe.py), with fixed shapes for the
  decoding step's CUDA graph, over transformers' 16-bit experts or the int4 profiles' 4-bit ones
  (experts_int4.py).
- The shared expert is a plain MLP (the decoder's), added to the routed sum, in float32 where the config's
  `enable_moe_fp32_combine` says so (a 16-bit sum rounds the same float32 sum once, so on the GPU one kernel sums
  the slots, adds the shared expert and the residual and takes the next norm: kernels/moe.combine_add_rms_norm).
  In the int4 profiles it is the 4-bit experts' last (Int4Experts with `shared`): each token's one more slot, with
  weight 1, summed with the others in float32 and rounded once.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from . import kernels
from .experts_int4 import Int4Experts


def route(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, top_k: int, scaling: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """x [T, H], the router's weight [E, H], the selection bias [E] -> each token's routing weights [T, top_k]
    (float32) and experts [T, top_k] (in topk's unsorted order, as transformers takes them)."""
    scores = torch.sigmoid(F.linear(x.float(), weight.float()))
    _, index = torch.topk(scores + bias, top_k, dim=-1, sorted=False)
    weights = scores.gather(1, index)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
    return weights * scaling, index


def with_shared(weights: torch.Tensor, index: torch.Tensor, shared: int) -> tuple[torch.Tensor, torch.Tensor]:
    """route's results with one more column a token: the shared expert (index `shared`) with weight 1."""
    ones = torch.ones_like(weights[:, :1])
    return torch.cat([weights, ones], dim=1), torch.cat([index, torch.full_like(index[:, :1], shared)], dim=1)


def is_moe(mlp) -> bool:
    """Whether a layer's MLP is a Mixture of Experts (hy_v3's HYV3MoE), not a dense MLP."""
    return hasattr(mlp, "experts")


class MoE:
    """The routed and shared experts of one model's MoE layers, on the path the decoder runs."""

    def __init__(self, config):
        self.top_k = config.num_experts_per_tok
        self.scaling = config.router_scaling_factor
        self.fp32_combine = bool(getattr(config, "enable_moe_fp32_combine", False))

    def forward(
        self,
        mlp,
        x: torch.Tensor,
        dense: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor],
        residual: tuple[torch.Tensor, torch.Tensor, float],
        add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]],
        arrived: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """mlp (a HYV3MoE) at x [T, H]: its routed experts' weighted sum plus its shared expert (which `dense`
        runs), added to the residual as the decoder adds a layer's MLP: `residual` is (hidden, the next norm's
        weight, eps) -> add_rms_norm's (hidden, its norm). With `arrived` (the decoder's arrival counters, on a GPU
        with Triton) the routing, the routed experts and the sum with the residual run as kernels/moe.py's."""
        hidden, norm_weight, eps = residual
        experts = mlp.experts
        # The shared expert's index where it is the 4-bit experts' last (their float32 sum then holds it).
        folded = experts.routed if isinstance(experts, Int4Experts) and experts.shared else None
        if arrived is None:
            weights, index = route(x, mlp.gate.weight, mlp.e_score_correction_bias, self.top_k, self.scaling)
            if folded is not None:
                weights, index = with_shared(weights, index, folded)
                return add_rms_norm(hidden, experts(x, index, weights), norm_weight, eps)
            shared = dense(mlp.shared_experts, x)
            routed = experts(x, index, weights)
            if self.fp32_combine:
                out = (routed.float() + shared.float()).to(x.dtype)
            else:
                out = routed + shared
            return add_rms_norm(hidden, out, norm_weight, eps)
        weights, index = kernels.route_experts(
            x, mlp.gate.weight, mlp.e_score_correction_bias, self.top_k, self.scaling, arrived, shared=folded
        )
        if isinstance(experts, Int4Experts):
            gate_up, down = experts.gate_up, experts.down
        else:
            gate_up, down = experts.gate_up_proj, experts.down_proj
        slots = kernels.expert_outputs(x, gate_up, down, index, weights)
        # In 16 bits, routed + shared rounds their float32 sum once, as the fp32 combine does: the kernel serves both.
        shared_out = None if folded is not None else dense(mlp.shared_experts, x)
        return kernels.combine_add_rms_norm(hidden, slots, shared_out, norm_weight, eps)
