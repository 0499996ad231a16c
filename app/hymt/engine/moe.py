"""The Mixture-of-Experts block of hy_v3 (Hy-MT2-30B-A3B), over the loaded transformers modules: the router, the
routed experts and the shared expert beside them.

- Routing, as transformers' HYV3TopKRouter computes it: logits in float32, sigmoid scores; the expert-bias
  correction added for the choice alone (the top-k of score + bias), the chosen experts weighed by their unbiased
  scores, normalised to sum one and scaled by `router_scaling_factor`; on a GPU with Triton all after the matmul in
  one kernel (kernels/moe.route_experts).
- The routed experts: on the CPU (and on a GPU without Triton) the loaded experts module itself, whose arithmetic is
  transformers' own, so greedy output is `generate`'s; on a GPU with Triton two grouped matmuls over the slots
  sorted by expert (kernels/moe.py), with fixed shapes for the decoding step's CUDA graph, over transformers'
  16-bit experts or the int4 profiles' 4-bit ones (experts_int4.py).
- The shared expert is a plain MLP (the decoder's), added to the routed sum, in float32 where the config's
  `enable_moe_fp32_combine` says so.
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
        self, mlp, x: torch.Tensor, dense: Callable[[torch.nn.Module, torch.Tensor], torch.Tensor], fused: bool
    ) -> torch.Tensor:
        """mlp (a HYV3MoE) at x [T, H]: its routed experts' weighted sum plus its shared expert, which `dense` runs;
        fused: the routed experts through the Triton kernels."""
        routing = kernels.route_experts if fused else route
        weights, index = routing(x, mlp.gate.weight, mlp.e_score_correction_bias, self.top_k, self.scaling)
        experts = mlp.experts
        if fused:
            if isinstance(experts, Int4Experts):
                gate_up, down = experts.gate_up, experts.down
            else:
                gate_up, down = experts.gate_up_proj, experts.down_proj
            routed = kernels.fused_experts(x, gate_up, down, index, weights)
        else:
            routed = experts(x, index, weights)
        shared = dense(mlp.shared_experts, x)
        if self.fp32_combine:
            return (routed.float() + shared.float()).to(x.dtype)
        return routed + shared
