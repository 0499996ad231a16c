"""What ships is what is measured: the image's torch, CUDA and pinned packages are those of the committed standard
run (bench/results/standard.json's `environment`, written on the GPU machine), and the README states the driver
floor of that CUDA."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# NVIDIA's minimum Linux driver for each CUDA minor release (CUDA's release notes, "CUDA Toolkit and Minimum
# Required Driver Version"); a newer CUDA in the image needs its row here.
DRIVER_FLOOR = {"12.8": 570, "12.9": 575, "13.0": 580}
# The python3 each Ubuntu release of the CUDA base ships, which the image's venv is made from.
UBUNTU_PYTHON = {"ubuntu22.04": "3.10", "ubuntu24.04": "3.12"}


def measured() -> dict[str, str]:
    return json.loads((ROOT / "bench/results/standard.json").read_text())["environment"]


def dockerfile_args() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text()
    return dict(re.findall(r"^ARG (\w+)=(\S*)$", text, flags=re.MULTILINE))


def shell_vars(path: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)=([^\s$]+)$", (ROOT / path).read_text(), flags=re.MULTILINE))


def pins() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = project["dependencies"] + project["optional-dependencies"]["gpu"]
    return dict(requirement.split("==") for requirement in requirements if "==" in requirement)


def cuda_of_index(url: str) -> str:
    """`https://download.pytorch.org/whl/cu130` -> "13.0"."""
    digits = re.fullmatch(r".*/cu(\d+)(\d)", url)
    assert digits, f"not one of PyTorch's CUDA indexes: {url}"
    return f"{digits[1]}.{digits[2]}"


def test_the_images_torch_is_the_measured_build():
    args, environment = dockerfile_args(), measured()
    build = f"{args['TORCH_VERSION']}+cu{cuda_of_index(args['TORCH_INDEX_URL']).replace('.', '')}"
    assert build == environment["torch"]


def test_the_images_cuda_base_is_the_measured_cuda_and_its_torchs():
    args, environment = dockerfile_args(), measured()
    base = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-runtime-(ubuntu[\d.]+)", args["CUDA_IMAGE"])
    assert base, args["CUDA_IMAGE"]
    assert f"{base[1]}.{base[2]}" == environment["cuda"] == cuda_of_index(args["TORCH_INDEX_URL"])
    assert environment["python"].startswith(UBUNTU_PYTHON[base[3]] + ".")


def test_a_native_start_with_a_gpu_installs_the_images_torch():
    args, start = dockerfile_args(), shell_vars("start.sh")
    assert (start["TORCH_GPU"], start["TORCH_GPU_INDEX"]) == (args["TORCH_VERSION"], args["TORCH_INDEX_URL"])


def test_the_pinned_packages_are_the_measured_ones():
    environment, pinned = measured(), pins()
    assert pinned["transformers"] == environment["transformers"]
    assert pinned["bitsandbytes"] == environment["bitsandbytes"]


def test_the_readme_and_operations_state_the_cuda_driver_floor():
    floor = DRIVER_FLOOR[measured()["cuda"]]
    assert f"driver of release {floor} or newer" in " ".join((ROOT / "README.md").read_text().split())
    assert f"driver of release {floor} or newer" in " ".join((ROOT / "docs/operations.md").read_text().split())
