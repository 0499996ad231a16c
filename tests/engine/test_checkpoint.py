"""A broken model directory is named for what it is: a permission, a missing file, or not a checkpoint; and the
test model that `hymt make-test-model` writes is readable by another user (the image's)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hymt.checkpoint import resolve_checkpoint
from hymt.errors import ModelLoadError

NOBODY = 65534


@pytest.fixture
def checkpoint(test_model):
    """A copy of the test model in a directory every user may enter (pytest's tmp_path is private to its owner)."""
    parent = Path(tempfile.mkdtemp(prefix="hymt-checkpoint-"))
    parent.chmod(0o755)
    copy = Path(shutil.copytree(test_model, parent / "model"))
    for path in copy.iterdir():
        path.chmod(0o644)
    yield copy
    shutil.rmtree(parent)


def make_private(path: Path) -> None:
    """Readable by its owner only, and its owner another user than this test's (a root test gives it to nobody)."""
    path.chmod(0o700 if path.is_dir() else 0o600)
    if os.getuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    else:
        path.chmod(0o000)


def resolve_as_the_appliance(path: Path) -> subprocess.CompletedProcess:
    """The check as a user without root's power to read any file (root drops CAP_DAC_OVERRIDE for it)."""
    code = (
        "import sys\nfrom hymt.checkpoint import resolve_checkpoint\nfrom hymt.errors import ModelLoadError\n"
        f"try: resolve_checkpoint({str(path)!r})\nexcept ModelLoadError as e: print(e.message); sys.exit(1)"
    )
    prefix = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"] if os.getuid() == 0 else []
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_make_test_model_writes_files_another_user_can_read(tmp_path):
    out = tmp_path / "m"
    result = subprocess.run(
        [sys.executable, "-m", "hymt", "make-test-model", str(out)], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    for path in out.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o044 == 0o044, f"{path.name} is not readable by others"


def test_unreadable_weights_are_a_permission_problem(checkpoint):
    make_private(checkpoint / "model.safetensors")
    result = resolve_as_the_appliance(checkpoint)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith(f"permission denied: cannot read {checkpoint}/model.safetensors (mode 0")
    assert "hymt runs as uid" in result.stdout


def test_unreadable_directory_is_a_permission_problem(checkpoint):
    make_private(checkpoint)
    result = resolve_as_the_appliance(checkpoint)
    checkpoint.chmod(0o755)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout.startswith(f"permission denied: cannot read the model directory {checkpoint} (mode 0")


def test_missing_weights_are_a_missing_file(checkpoint):
    (checkpoint / "model.safetensors").unlink()
    with pytest.raises(ModelLoadError, match=r"missing file: .* has a config.json but no weights"):
        resolve_checkpoint(str(checkpoint))


def test_missing_shard_of_an_index_is_named(checkpoint):
    (checkpoint / "model.safetensors").rename(checkpoint / "model-00001-of-00002.safetensors")
    weight_map = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (checkpoint / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    with pytest.raises(
        ModelLoadError,
        match=r"missing file: .*model-00002-of-00002.safetensors \(listed in "
        r"model.safetensors.index.json; 1 of 2 weight files missing\)",
    ):
        resolve_checkpoint(str(checkpoint))


def test_a_directory_without_config_is_not_a_checkpoint(checkpoint):
    (checkpoint / "config.json").unlink()
    with pytest.raises(ModelLoadError, match="has no config.json: not a Hugging Face checkpoint directory"):
        resolve_checkpoint(str(checkpoint))


def test_damaged_weights_are_not_a_checkpoint(checkpoint):
    (checkpoint / "model.safetensors").write_bytes(b"<html>404 not found</html>")
    with pytest.raises(ModelLoadError, match="model.safetensors is not a safetensors file .*truncated or damaged"):
        resolve_checkpoint(str(checkpoint))


def test_a_good_checkpoint_passes(checkpoint):
    assert resolve_checkpoint(str(checkpoint)) == checkpoint
