"""Load a Hunyuan-MT checkpoint (local directory or hub id) in the format a memory tier asks for."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ModelLoadError
from ..family import Identified, check_supported, identify
from ..planner.tiers import Tier
from . import weights

log = logging.getLogger("hymt.loader")

SUPPORTED_MODEL_TYPES = ("hunyuan_v1_dense",)
MOE_MODEL_TYPE = "hy_v3"  # Hy-MT2-30B-A3B's architecture, a Mixture of Experts


@dataclass
class Loaded:
    model: object
    tokenizer: object
    config: object
    checkpoint: Path
    stop_ids: list[int]
    pad_id: int
    load_s: float
    family: Identified


def resolve_checkpoint(model: str) -> Path:
    """A local directory as is (checked: see check_checkpoint); anything else is a hub id, fetched (with a progress
    bar) into the hub cache."""
    path = Path(model).expanduser()
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except PermissionError:
        raise ModelLoadError(f"permission denied: cannot look inside {path.parent} ({_who()})") from None
    if is_dir:
        check_checkpoint(path)
        return path
    if model.startswith((".", "/", "~")) or exists:
        raise ModelLoadError(f"model directory {model} does not exist")
    check_supported(model)  # before a download of tens of gigabytes that would be refused
    try:
        from huggingface_hub import snapshot_download

        log.info("downloading %s from the Hugging Face hub", model)
        return Path(snapshot_download(model, allow_patterns=["*.json", "*.safetensors", "*.model", "*.jinja",
                                                             "*.txt", "*.py", "*.tiktoken"]))
    except Exception as exc:  # noqa: BLE001 - every hub failure (no network, no such repo, auth) ends the same way
        raise ModelLoadError(f"cannot fetch {model!r} from the Hugging Face hub ({type(exc).__name__}); "
                             "give a local checkpoint directory instead (HYMT_MODEL or --model)") from None


def check_checkpoint(path: Path) -> None:
    """Name the real cause before the libraries would hide it (transformers reports an unreadable weights file as
    FileNotFoundError): a permission, a missing file, or a directory that is not a checkpoint."""
    _check_config(path)
    index = path / "model.safetensors.index.json"
    if index.is_file():
        _check_readable(index)
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"{index} is not a safetensors index ({type(exc).__name__}): not a checkpoint") from None
        missing = [name for name in shards if not (path / name).is_file()]
        if missing:
            raise ModelLoadError(f"missing file: {path / missing[0]} (listed in {index.name}; "
                                 f"{len(missing)} of {len(shards)} weight files missing)")
        weights = [path / name for name in shards]
    else:
        weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("pytorch_model*.bin"))
        if not weights:
            raise ModelLoadError(f"missing file: {path} has a config.json but no weights (*.safetensors)")
    for file in weights:
        _check_readable(file)
        if file.suffix == ".safetensors":
            _check_safetensors(file)


def _check_config(path: Path) -> None:
    if not os.access(path, os.R_OK | os.X_OK):
        raise ModelLoadError(f"permission denied: cannot read the model directory {path} ({_mode(path)}; {_who()})")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"{path} has no config.json: not a Hugging Face checkpoint directory")
    _check_readable(path / "config.json")


def _check_readable(file: Path) -> None:
    if not os.access(file, os.R_OK):
        raise ModelLoadError(f"permission denied: cannot read {file} ({_mode(file)}; {_who()})")


def _check_safetensors(file: Path) -> None:
    from safetensors import safe_open

    try:
        with safe_open(file, framework="pt"):
            pass
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types for every kind of bad header
        raise ModelLoadError(f"{file} is not a safetensors file ({type(exc).__name__}: {exc}): "
                             "a truncated or damaged checkpoint") from None


def _mode(path: Path) -> str:
    info = path.stat()
    return f"mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}"


def _who() -> str:
    return f"hymt runs as uid {os.getuid()}"


def load_config(checkpoint: Path):
    from transformers import AutoConfig

    _check_config(checkpoint)
    try:
        config = AutoConfig.from_pretrained(checkpoint)
    except Exception as exc:  # noqa: BLE001 - an unreadable config is one user-facing error
        raise ModelLoadError(f"cannot read {checkpoint}/config.json: {exc}") from None
    if config.model_type == MOE_MODEL_TYPE:
        raise ModelLoadError(f"{checkpoint} holds Hy-MT2-30B-A3B ({MOE_MODEL_TYPE}, a Mixture of Experts), which hymt "
                             "does not serve: use Hy-MT2-7B (close to it in the published evaluation) or Hy-MT2-1.8B")
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(f"{checkpoint} holds a {config.model_type!r} model; hymt serves the Hunyuan-MT family "
                             f"({', '.join(SUPPORTED_MODEL_TYPES)})")
    quant = getattr(config, "quantization_config", None)
    # The official FP8 checkpoints name the layers they leave unquantized `ignored_layers`; transformers reads `ignore`.
    if isinstance(quant, dict) and "ignored_layers" in quant and "ignore" not in quant:
        quant["ignore"] = quant.pop("ignored_layers")
    return config


def _quantization(tier: Tier, config):
    quant = getattr(config, "quantization_config", None)
    if isinstance(quant, dict) and quant.get("quant_method") == "gptq" and tier.device == "cuda":
        from transformers import GPTQConfig

        # gptqmodel's "auto" picks Machete on an H200, which downloads CUTLASS while loading (an appliance may be
        # offline), and Marlin compiled CUDA code for over 3 minutes; Triton loaded the 7B in 12.5 s on the same GPU.
        return GPTQConfig(bits=quant["bits"], backend="triton")
    if quant is not None:
        return None  # a pre-quantized checkpoint (AWQ, FP8; GPTQ on the CPU) loads in its own format
    if tier.weights == "int4":
        return None  # quantized after loading, layer by layer (weights.quantize_int4)
    if tier.weights not in ("nf4", "int8"):
        return None
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelLoadError(f"profile {tier.name} needs bitsandbytes, which is not installed")
    import torch
    from transformers import BitsAndBytesConfig

    if tier.weights == "nf4":
        return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                                  bnb_4bit_compute_dtype=torch.bfloat16)
    return BitsAndBytesConfig(load_in_8bit=True)


def load(model: str, tier: Tier, family: str = "auto") -> Loaded:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    checkpoint = resolve_checkpoint(model)
    config = load_config(checkpoint)
    identified = identify(checkpoint, family)
    if tier.device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"profile {tier.name} needs a CUDA GPU, and torch sees none")
    quantization = _quantization(tier, config)
    # INT4 reads the 16-bit weights into the computer's memory first and quantizes them on the GPU.
    int4 = tier.device == "cuda" and tier.weights == "int4" and getattr(config, "quantization_config", None) is None
    on_gpu = tier.device == "cuda" and not int4
    dtype = torch.float32 if tier.device == "cpu" else torch.bfloat16
    try:
        # Quantization libraries print banners; stdout is the translation's (hymt translate), so they go to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            tokenizer = AutoTokenizer.from_pretrained(checkpoint)
            model_obj = AutoModelForCausalLM.from_pretrained(
                checkpoint, config=config, dtype=dtype, attn_implementation="sdpa",
                quantization_config=quantization, device_map={"": 0} if on_gpu else None,
            )
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:  # noqa: BLE001 - any loading failure is reported as one line
        raise ModelLoadError(f"cannot load {checkpoint}: {type(exc).__name__}: {exc}") from None
    model_obj.eval()
    if int4:
        weights.quantize_int4(model_obj, torch.device("cuda", 0))
        model_obj.to("cuda:0")

    chat = identified.family.chat
    if not getattr(tokenizer, "chat_template", None) or not chat.renders_officially(tokenizer):
        log.warning("%s has no chat template or one that does not render the official %s prompt; using the "
                    "official one", checkpoint, identified.family.name)
        tokenizer.chat_template = chat.template
    tokenizer.padding_side = "left"
    stop_id = tokenizer.convert_tokens_to_ids(chat.stop)
    if stop_id is None or stop_id == tokenizer.unk_token_id:
        raise ModelLoadError(f"{checkpoint}'s tokenizer has no {chat.stop} token: not a {identified.family.name} "
                             "tokenizer (set HYMT_MODEL_FAMILY if the name misleads)")
    # The checkpoint's own end-of-answer ids stop decoding too, as in transformers' generate.
    declared = getattr(getattr(model_obj, "generation_config", None), "eos_token_id", None)
    declared = declared if isinstance(declared, list) else [declared]
    stop_ids = list(dict.fromkeys([stop_id, *(i for i in declared if isinstance(i, int))]))
    pad_id = tokenizer.convert_tokens_to_ids(chat.pad) if chat.pad else tokenizer.pad_token_id
    if pad_id is None:
        pad_id = getattr(config, "pad_token_id", None)
        pad_id = stop_id if pad_id is None else pad_id
    return Loaded(model=model_obj, tokenizer=tokenizer, config=config, checkpoint=checkpoint,
                  stop_ids=stop_ids, pad_id=pad_id, load_s=time.perf_counter() - started, family=identified)
