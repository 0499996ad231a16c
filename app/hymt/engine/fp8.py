"""`Fp8Linear`: a linear layer of the fp8 tiers, its weight in e4m3 with one float32 scale per output row.

Its input is quantized as it comes, each row (token) to e4m3 with its own scale, and multiplied by
torch._scaled_mm with both sets of scales (row-wise: one per token, one per output row) into the input's dtype.
A per-token scale follows each token's own range, where a checkpoint's static per-tensor input_scale is one
calibrated range for every token: the dynamic one loses less. One row alone (a segment decoding by itself) takes
the Triton matvec where start-up's timing chose it (`row_kernel`): it reads the e4m3 weights as stored and keeps the
input in 16 bits. A decoding step's few rows (up to `rows_limit`, where start-up's timing chose it) take the Triton
matmul that reads each weight byte once (kernels/fp8_matmul.py), with the same quantized input and arithmetic as
torch._scaled_mm, whose tiles are made for large matmuls. Fixed shapes, no host synchronization: the decoding
step's CUDA graphs capture it.

torch's CPU build runs _scaled_mm too (the tests' path); on a GPU it needs FP8 tensor cores (compute capability
8.9 and up), and both dimensions of the weight a multiple of 16.
"""

from __future__ import annotations

import functools

import torch

from . import kernels
from .kernels import E4M3_MAX, MIN_AMAX


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K]: e4m3 values [M, K] and float32 scales [M, 1] (amax / 448 per row), torch's arithmetic
    (kernels.quantize_rows does the same in one kernel)."""
    scale = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=MIN_AMAX) / E4M3_MAX
    return (x.float() / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), scale


def scaled_matmul(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, triton: bool = False) -> torch.Tensor:
    """x [M, K] @ (weight [N, K] e4m3 * scale [N, 1]).T in x's dtype, x quantized per row (by the Triton kernel
    where `triton`)."""
    q, row_scale = (kernels.quantize_rows if triton else quantize_rows)(x)
    return torch._scaled_mm(q, weight.t(), scale_a=row_scale, scale_b=scale[None, :], out_dtype=x.dtype)


class Fp8Linear(torch.nn.Module):
    """y = x @ (weight * scale[:, None]).T: weight [N, K] float8_e4m3fn, scale [N] float32; no bias."""

    weight: torch.Tensor
    scale: torch.Tensor

    def __init__(self, weight: torch.Tensor, scale: torch.Tensor):
        super().__init__()
        n, k = weight.shape
        if weight.dtype != torch.float8_e4m3fn or scale.dtype != torch.float32 or scale.shape != (n,):
            raise ValueError(
                f"Fp8Linear takes an e4m3 weight and a float32 scale per row, not {weight.dtype} {tuple(weight.shape)} "
                f"and {scale.dtype} {tuple(scale.shape)}"
            )
        if n % 16 or k % 16:  # torch._scaled_mm's requirement on a GPU
            raise ValueError(f"Fp8Linear needs both dimensions a multiple of 16, not {n} x {k}")
        self.in_features, self.out_features = k, n
        self.register_buffer("weight", weight)
        self.register_buffer("scale", scale)
        self.triton = False  # the Triton kernel quantizes the input (the Decoder sets it where its kernels run)
        self.row_kernel: dict | None = None  # the matvec's configuration at one row, where it beat the matmul
        self.rows_kernel: dict = {}  # the few-rows matmul's tiling, for up to rows_limit rows (0: torch's)
        self.rows_limit = 0

    @classmethod
    def quantized(cls, weight: torch.Tensor) -> Fp8Linear:
        """From a 16-bit (or float32) weight [N, K] on its device: each row scaled by its own amax / 448."""
        scale = weight.abs().amax(dim=1).float().clamp(min=MIN_AMAX) / E4M3_MAX
        values = (weight.float() / scale[:, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return cls(values, scale)

    def dequantized(self) -> torch.Tensor:
        """The weight it stands for, in float32 [N, K]."""
        return self.weight.float() * self.scale[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.shape[0] == 1 and self.row_kernel is not None:
            out = kernels.matvec(rows, self.weight, scale=self.scale, **self.row_kernel)
        elif rows.shape[0] <= self.rows_limit:
            q, row_scale = kernels.quantize_rows(rows)
            out = kernels.fp8_matmul(q, row_scale, self.weight, self.scale, rows.dtype, **self.rows_kernel)
        else:
            out = scaled_matmul(rows, self.weight, self.scale, self.triton)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, e4m3 with a scale per row"


def use_kernels(modules: list[Fp8Linear], on: bool, dtype: torch.dtype) -> None:
    """The Triton kernels for these layers where `on` (a GPU with Triton): the input (of `dtype`) quantized in one
    kernel, and for each weight shape the matvec at one row and the few-rows matmul up to 16 or 64 rows where they
    beat torch's matmul (timed here, in a CUDA graph); torch's path throughout where not."""
    layers = [(m.weight, m.scale) for m in modules]
    matmul = functools.partial(scaled_matmul, triton=True)
    one_row = kernels.tune_fp8_matvec(layers, matmul, dtype) if on and modules else {}
    few_rows = kernels.tune_fp8_rows(layers, matmul, dtype) if on and modules else {}
    for module in modules:
        module.triton = on
        shape = (module.out_features, module.in_features)
        module.row_kernel = one_row[shape][0] if shape in one_row else None
        module.rows_kernel, module.rows_limit = few_rows.get(shape, ({}, 0))


def unavailable(device: torch.device) -> str | None:
    """Why the fp8 tiers cannot run on `device` (a small Fp8Linear's matmul failing there: a torch build without
    row-wise FP8 for this GPU), or None; checked before a model is loaded."""
    try:
        layer = Fp8Linear.quantized(torch.randn(32, 32, device=device, dtype=torch.bfloat16))
        layer(torch.randn(2, 32, device=device, dtype=torch.bfloat16))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure of the matmul here is one reason to step down
        return f"torch._scaled_mm with row-wise scales does not run here: {type(exc).__name__}: {exc}"[:400]
    return None
