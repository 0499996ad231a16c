"""A checkpoint before it is loaded: where it is (a local directory, or a hub id fetched into the hub cache), whether
its files can be read (each failure named by its real cause), and its config, refused for an architecture hymt does
not serve. Below the planner, which sizes a checkpoint from its config, and the engine's loader, which loads it."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

from . import fp8_checkpoint
from .errors import ModelLoadError
from .family import MOE_MODEL_TYPE

log = logging.getLogger("hymt.checkpoint")

# The dense models' architecture, and Hy-MT2-30B-A3B's (a Mixture of Experts).
SUPPORTED_MODEL_TYPES = ("hunyuan_v1_dense", MOE_MODEL_TYPE)


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
    try:
        from huggingface_hub import snapshot_download

        log.info("downloading %s from the Hugging Face hub", model)
        return Path(
            snapshot_download(
                model, allow_patterns=["*.json", "*.safetensors", "*.model", "*.jinja", "*.txt", "*.py", "*.tiktoken"]
            )
        )
    except Exception as exc:  # noqa: BLE001 - every hub failure (no network, no such repo, auth) ends the same way
        raise ModelLoadError(
            f"cannot fetch {model!r} from the Hugging Face hub ({type(exc).__name__}); "
            "give a local checkpoint directory instead (HYMT_MODEL or --model)"
        ) from None


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
            raise ModelLoadError(
                f"{index} is not a safetensors index ({type(exc).__name__}): not a checkpoint"
            ) from None
        missing = [name for name in shards if not (path / name).is_file()]
        if missing:
            raise ModelLoadError(
                f"missing file: {path / missing[0]} (listed in {index.name}; "
                f"{len(missing)} of {len(shards)} weight files missing)"
            )
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
        raise ModelLoadError(
            f"{file} is not a safetensors file ({type(exc).__name__}: {exc}): a truncated or damaged checkpoint"
        ) from None


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
    if config.model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelLoadError(
            f"{checkpoint} holds a {config.model_type!r} model; hymt serves the Hunyuan-MT family "
            f"({', '.join(SUPPORTED_MODEL_TYPES)})"
        )
    fp8_checkpoint.check(getattr(config, "quantization_config", None), str(checkpoint))
    return config
