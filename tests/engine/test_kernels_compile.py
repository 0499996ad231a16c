"""Every kernel launch the interpreted checks make (tests/engine/test_kernels.py), compiled for a Hopper GPU (and
those of the fp8 tiers for Ada too) by Triton's own compiler, which needs no GPU. The interpreter runs a kernel as
Python, so it takes code the compiler refuses (a constexpr assigned in each pass of a loop ran there and failed on
the GPU); this finds such code here. test_kernels.py's test_every_kernel_compiles_for_hopper compiles the launches its
float16 checks recorded as they ran; by hand:

    python tests/engine/test_kernels_compile.py record LAUNCHES.json MODEL_DIR...   # with TRITON_INTERPRET=1
    python tests/engine/test_kernels_compile.py compile LAUNCHES.json
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP = HERE.parents[1] / "app"
# Pointer types by torch dtype name, as Triton's signatures spell them.
POINTERS = {
    "float32": "*fp32",
    "float16": "*fp16",
    "bfloat16": "*bf16",
    "int64": "*i64",
    "int32": "*i32",
    "int8": "*i8",
    "uint8": "*u8",
    "bool": "*i1",
    "float8_e4m3fn": "*fp8e4nv",
}


def record_launches(launches: list[dict]) -> None:
    """From here on, each kernel launch appended to `launches`: the kernel, its positional arguments (a tensor as its
    pointer type, anything else as its value) and its keywords."""
    import torch

    from hymt.engine.kernels import common

    run = common.launch

    def launch(kernel, grid, *args, **meta):
        launches.append(
            {
                "module": kernel.fn.__module__,
                "name": kernel.fn.__name__,
                "args": [POINTERS[str(a.dtype).removeprefix("torch.")] if torch.is_tensor(a) else [a] for a in args],
                "meta": meta,
            }
        )
        run(kernel, grid, *args, **meta)

    common.launch = launch


def record(path: Path, model_dirs: list[str]) -> None:
    """Run every check in the interpreter (float16) and the decoding step of each model, writing each launch."""
    import torch

    sys.path.insert(0, str(HERE))
    import test_kernels

    launches: list[dict] = []
    record_launches(launches)
    for check in test_kernels.CHECKS.values():
        check("cpu", torch.float16)
    for model_dir in model_dirs:
        test_kernels.check_decoding_step("cpu", torch.float16, model_dir)
    path.write_text(json.dumps(launches))


def _scalar_type(value) -> str:
    if isinstance(value, bool):
        return "i1"
    if isinstance(value, int):
        return "i32" if -(2**31) <= value < 2**31 else "i64"
    return "fp32"


def compile_all(path: Path) -> int:
    """Compile each distinct launch for sm_90 as the GPU runs it (under PDL), and those reading or writing e4m3 for
    sm_89 too (Ada runs the fp8 tiers, without PDL); the number of launches compiled. Every kernel the modules launch
    (those that take PDL) must be among them."""
    import triton
    from triton.backends.compiler import GPUTarget

    from hymt.engine.kernels import attention, layers, matvec, moe, quantize, sampling

    specs = {json.dumps(spec, sort_keys=True) for spec in json.loads(path.read_text())}
    for text in sorted(specs):
        spec = json.loads(text)
        kernel = getattr(importlib.import_module(spec["module"]), spec["name"])
        meta = spec["meta"]
        options = {key: meta.pop(key) for key in ("num_warps", "num_stages") if key in meta}
        targets = [(90, True)] + ([(89, False)] if POINTERS["float8_e4m3fn"] in spec["args"] else [])
        for arch, pdl in targets:
            meta["PDL"] = pdl
            signature, constexprs = {}, {}
            for i, param in enumerate(kernel.params):
                given = spec["args"][i] if i < len(spec["args"]) else [meta[param.name]]
                if param.is_constexpr or given == [None]:
                    signature[param.name] = "constexpr"
                    constexprs[(i,)] = given[0]
                else:
                    signature[param.name] = given if isinstance(given, str) else _scalar_type(given[0])
            try:
                triton.compile(
                    triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs),
                    target=GPUTarget("cuda", arch, 32),
                    options=options,
                )
            except (triton.errors.TritonError, RuntimeError) as exc:  # the front end's, ptxas's, MLIR's passes'
                given = {kernel.arg_names[i]: value for (i,), value in constexprs.items()}
                raise SystemExit(f"{spec['name']} {given} does not compile for sm_{arch}: {exc}") from None
    launched = {
        name
        for module in (attention, layers, matvec, moe, quantize, sampling)
        for name, kernel in vars(module).items()
        if isinstance(kernel, triton.runtime.JITFunction)
        and kernel.fn.__module__ == module.__name__
        and "PDL" in kernel.arg_names
    }
    missing = launched - {json.loads(text)["name"] for text in specs}
    if missing:
        raise SystemExit(f"no check launches {sorted(missing)}: add one to tests/engine/test_kernels.py")
    return len(specs)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(APP))
    if argv[0] == "record":
        record(Path(argv[1]), argv[2:])
    else:
        print(f"compiled {compile_all(Path(argv[1]))} kernel launches for sm_90 (those on e4m3 for sm_89 too)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
