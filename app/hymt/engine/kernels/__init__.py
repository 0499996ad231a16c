"""Triton kernels for the GPU's forward pass and sampling, where torch's own kernels spend the decoding step in
small launches: a layer's element-wise work fused (`layers`), the one-row matvec (`matvec`, 16-bit or e4m3
weights), the fp8 tiers' activations quantized per row (`quantize`) and their matmul at a decoding step's few rows
(`fp8_matmul`), the decoding attention (`attention`), the
routed experts of a Mixture of Experts as grouped matmuls and their routing (`moe`) and the sampler's pass over
the vocabulary and its draw (`sampling`); launched with programmatic dependent launch where the GPU has it
(`common`).

All are captured in the decoding step's CUDA graphs like any other kernel. The CPU keeps torch's path (with
transformers' exact arithmetic), so these run only where Triton and a CUDA device are present.
"""

from .attention import PROGRAMS, decode_attention, splits_for
from .common import AVAILABLE, enable_pdl
from .fp8_matmul import MAX_ROWS as FP8_ROWS, fp8_matmul, tune_fp8_rows
from .layers import add_rms_norm, rope_norm_store
from .matvec import MATVEC_CONFIGS, matvec, tune_fp8_matvec, tune_matvec
from .moe import combine_add_rms_norm, expert_outputs, experts_by_slot, fused_experts, route_experts
from .quantize import E4M3_MAX, MIN_AMAX, quantize_rows
from .sampling import TOP, penalize, sample

__all__ = [
    "AVAILABLE",
    "E4M3_MAX",
    "FP8_ROWS",
    "MATVEC_CONFIGS",
    "MIN_AMAX",
    "PROGRAMS",
    "TOP",
    "add_rms_norm",
    "combine_add_rms_norm",
    "decode_attention",
    "enable_pdl",
    "fp8_matmul",
    "expert_outputs",
    "experts_by_slot",
    "fused_experts",
    "matvec",
    "penalize",
    "quantize_rows",
    "rope_norm_store",
    "route_experts",
    "sample",
    "splits_for",
    "tune_fp8_matvec",
    "tune_fp8_rows",
    "tune_matvec",
]
