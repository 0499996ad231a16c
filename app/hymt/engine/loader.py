"""Load a Hunyuan-MT checkpoint (local directory or hub id) in the format a memory tier asks for."""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .. import fp8_checkpoint
from ..checkpoint import load_config, resolve_checkpoint
from ..errors import ModelLoadError
from ..family import Identified, identify
from ..fp8_checkpoint import Fp8Scheme
from ..tiers import Tier, runs_on
from . import fp8_weights, layerwise, weights

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger("hymt.loader")


class CausalLM(Protocol):
    """What the runner reads of the loaded model: a transformers PreTrainedModel, or the PeftModel around it that
    adapters.attach returns (the Decoder reads its modules)."""

    def parameters(self) -> Iterator[torch.nn.Parameter]: ...

    def get_input_embeddings(self) -> torch.nn.Module: ...


class ModelConfig(Protocol):
    """The checkpoint's config.json, as the runner reads it."""

    num_attention_heads: int
    num_key_value_heads: int
    num_hidden_layers: int
    hidden_size: int
    vocab_size: int


@dataclass
class Loaded:
    model: CausalLM
    tokenizer: PreTrainedTokenizerBase
    config: ModelConfig
    checkpoint: Path
    stop_ids: list[int]
    pad_id: int
    load_s: float
    family: Identified


def _quantization(tier: Tier, config):
    quant = getattr(config, "quantization_config", None)
    if isinstance(quant, dict) and quant.get("quant_method") == "gptq" and tier.device == "cuda":
        from transformers import GPTQConfig

        # gptqmodel's "auto" picks Machete on an H200, which downloads CUTLASS while loading (an appliance may be
        # offline), and Marlin compiled CUDA code for over 3 minutes; Triton loaded the 7B in 12.5 s on the same GPU.
        return GPTQConfig(bits=quant["bits"], backend="triton")
    if quant is not None:
        return None  # a pre-quantized checkpoint (AWQ; GPTQ on the CPU) loads in its own format
    if tier.weights == "int4":
        return None  # quantized layer by layer as it is read (weights.int4_layer)
    if tier.weights not in ("nf4", "int8"):
        return None
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModelLoadError(f"profile {tier.name} needs bitsandbytes, which is not installed")
    import torch
    from transformers import BitsAndBytesConfig

    if tier.weights == "nf4":
        return BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
    return BitsAndBytesConfig(load_in_8bit=True)


def _placement(
    kind: str, checkpoint: Path, published: Fp8Scheme | None, device: torch.device, stack: contextlib.ExitStack
) -> layerwise.Placement:
    """What becomes of each layer as it is read, for weights `kind` (int4 or fp8) on `device`."""
    if kind == "int4":
        builds = stack.enter_context(weights.KernelBuilds()) if device.type == "cuda" else None
        return layerwise.Placement(
            layer=lambda name, layer: weights.int4_layer(layer, device, builds),
            head=lambda head: weights.int8_head(head, device, builds),
        )
    if published is not None:
        opened = stack.enter_context(fp8_weights.Published(checkpoint, published))
        return layerwise.Placement(layer=lambda name, layer: fp8_weights.place_published(layer, name, opened, device))
    return layerwise.Placement(layer=lambda name, layer: fp8_weights.quantize_layer(layer, device))


def _read(
    checkpoint: Path,
    config,
    dtype: torch.dtype,
    quantization,
    device_map: dict | None,
    placement: layerwise.Placement | None,
):
    """transformers' model of the checkpoint; with a placement, each layer placed as soon as it has been read."""
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        watch = stack.enter_context(layerwise.reading(placement)) if placement else None
        model = AutoModelForCausalLM.from_pretrained(
            checkpoint,
            config=config,
            dtype=dtype,
            attn_implementation="sdpa",
            quantization_config=quantization,
            device_map=device_map,
        )
        if watch is not None:
            watch.finish(model)
            log.info("read %s, each layer placed as read, in %.1f s", checkpoint, time.perf_counter() - started)
    return model


def load(model: str, tier: Tier, family: str = "auto") -> Loaded:
    import torch
    from transformers import AutoTokenizer

    started = time.perf_counter()
    checkpoint = resolve_checkpoint(model)
    config = load_config(checkpoint)
    identified = identify(checkpoint, family)
    if tier.device == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"profile {tier.name} needs a CUDA GPU, and torch sees none")
    if tier.device == "cuda" and not runs_on(tier, torch.cuda.get_device_capability(0)):
        raise ModelLoadError(
            f"profile {tier.name} needs a GPU of compute capability {'.'.join(map(str, tier.min_capability))} or later"
        )
    quant = getattr(config, "quantization_config", None)
    # Tencent's FP8 checkpoint: transformers reads it as a plain one (its e4m3 values cast exactly to the dtype
    # asked for, the scales left over), then fp8_weights puts its projections together as published.
    published = fp8_checkpoint.read_scheme(quant, str(checkpoint)) if fp8_checkpoint.is_fp8(quant) else None
    if published and tier.device == "cuda" and tier.weights != "fp8":
        raise ModelLoadError(f"{checkpoint} is an FP8 checkpoint, which the fp8 profiles serve, not {tier.name}")
    if published:
        config = copy.deepcopy(config)
        del config.quantization_config
    quantization = _quantization(tier, config)
    # INT4 and FP8 put each layer on the GPU in their own format as soon as it has been read (layerwise.py).
    by_layer = tier.device == "cuda" and (tier.weights == "fp8" or (tier.weights == "int4" and quant is None))
    if by_layer and tier.weights == "int4" and (missing := weights.int4_unavailable()):
        raise ModelLoadError(missing)
    dtype = torch.float32 if tier.device == "cpu" else torch.bfloat16
    gpu = torch.device("cuda", 0)
    try:
        # Quantization libraries print banners; stdout is the translation's (hymt translate), so they go to stderr.
        with contextlib.redirect_stdout(sys.stderr), contextlib.ExitStack() as stack:
            tokenizer = AutoTokenizer.from_pretrained(checkpoint)
            placement = _placement(tier.weights, checkpoint, published, gpu, stack) if by_layer else None
            model_obj = _read(
                checkpoint,
                config,
                dtype,
                quantization,
                device_map={"": 0} if tier.device == "cuda" and not by_layer else None,
                placement=placement,
            )
    except (torch.OutOfMemoryError, ModelLoadError):
        raise
    except Exception as exc:  # noqa: BLE001 - any loading failure is reported as one line
        raise ModelLoadError(f"cannot load {checkpoint}: {type(exc).__name__}: {exc}") from None
    model_obj.eval()
    if by_layer:
        model_obj.to(gpu)
    elif published:  # the CPU's float32
        fp8_weights.dequantize_published(model_obj, checkpoint, published)

    chat = identified.family.chat
    if not getattr(tokenizer, "chat_template", None) or not chat.renders_officially(tokenizer):
        log.warning(
            "%s has no chat template or one that does not render the official %s prompt; using the official one",
            checkpoint,
            identified.family.name,
        )
        tokenizer.chat_template = chat.template
    tokenizer.padding_side = "left"
    stop_id = tokenizer.convert_tokens_to_ids(chat.stop)
    if not isinstance(stop_id, int) or stop_id == tokenizer.unk_token_id:  # None: no such token
        raise ModelLoadError(
            f"{checkpoint}'s tokenizer has no {chat.stop} token: not a {identified.family.name} "
            "tokenizer (set HYMT_MODEL_FAMILY if the name misleads)"
        )
    # The checkpoint's own end-of-answer ids stop decoding too, as in transformers' generate.
    declared = getattr(getattr(model_obj, "generation_config", None), "eos_token_id", None)
    declared = declared if isinstance(declared, list) else [declared]
    stop_ids = list(dict.fromkeys([stop_id, *(i for i in declared if isinstance(i, int))]))
    pad_id = tokenizer.convert_tokens_to_ids(chat.pad) if chat.pad else tokenizer.pad_token_id
    if not isinstance(pad_id, int):  # None: neither names a padding token
        pad_id = getattr(config, "pad_token_id", None)
        pad_id = stop_id if pad_id is None else pad_id
    return Loaded(
        model=model_obj,
        tokenizer=tokenizer,
        config=config,
        checkpoint=checkpoint,
        stop_ids=stop_ids,
        pad_id=pad_id,
        load_s=time.perf_counter() - started,
        family=identified,
    )
