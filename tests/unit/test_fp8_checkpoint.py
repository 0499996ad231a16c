"""Tencent's FP8 quantization_config read as published (hymt.fp8_checkpoint), every other FP8 scheme refused in one
line; and the planner's shape of such a checkpoint."""

import copy
import json

import pytest

from hymt.checkpoint import load_config
from hymt.errors import ModelLoadError
from hymt.fp8_checkpoint import Fp8Scheme, check, read_scheme
from hymt.planner.shapes import ModelShape
from hymt.testmodel import TENCENT_FP8_CONFIG

# AngelSlim's export for the hunyuan_v1_dense FP8 checkpoints, as the test model writes it.
TENCENT = TENCENT_FP8_CONFIG


def changed(path: str, value) -> dict:
    """TENCENT with one field (dotted path) replaced; None removes it."""
    config = copy.deepcopy(TENCENT)
    *parents, last = path.split(".")
    node = config
    for key in parents:
        node = node[key]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return config


def test_tencents_layout_is_per_tensor_with_either_name_for_the_ignore_list():
    assert read_scheme(TENCENT, "ckpt") == Fp8Scheme("tensor")
    newer = changed("ignored_layers", None) | {"ignore": ["lm_head"]}
    assert read_scheme(newer, "ckpt") == Fp8Scheme("tensor")
    assert read_scheme(changed("ignored_layers", None), "ckpt") == Fp8Scheme("tensor")
    channel = changed("config_groups.group_0.weights.strategy", "channel")
    assert read_scheme(channel, "ckpt") == Fp8Scheme("channel")
    # The activations' scheme is not used (hymt quantizes them per token): dynamic ones, or none, are fine.
    assert read_scheme(changed("config_groups.group_0.input_activations", None), "ckpt") == Fp8Scheme("tensor")
    assert read_scheme(changed("format", "float-quantized"), "ckpt") == Fp8Scheme("tensor")


@pytest.mark.parametrize(
    "config,says",
    [
        (changed("config_groups.group_0.weights.strategy", "block"), "weights scaled per 'block'"),
        (changed("config_groups.group_0.weights.strategy", "group"), "weights scaled per 'group'"),
        (changed("config_groups.group_0.weights.block_structure", [128, 128]), "groups, blocks or with zero points"),
        (changed("config_groups.group_0.weights.symmetric", False), "groups, blocks or with zero points"),
        (changed("config_groups.group_0.weights.type", "int"), "8-bit int weights"),
        (changed("config_groups.group_0.weights.num_bits", 4), "4-bit float weights"),
        (changed("config_groups.group_0.weights", None), "no weights scheme"),
        (changed("config_groups.group_0.targets", ["re:.*q_proj"]), "a config group targeting ['re:.*q_proj']"),
        (changed("config_groups", {}), "0 config groups, where one is served"),
        (changed("config_groups", None), "no config groups, where one is served"),
        (changed("format", "pack-quantized"), "compressed-tensors format 'pack-quantized' is not served"),
        (changed("ignored_layers", ["lm_head", "model.layers.0.mlp.down_proj"]), "(model.layers.0.mlp.down_proj)"),
        (changed("ignored_layers", "lm_head"), "ignored_layers is 'lm_head', not a list of layers"),
    ],
)
def test_any_other_scheme_is_refused_in_one_line(config, says):
    with pytest.raises(ModelLoadError) as err:
        read_scheme(config, "/models/x")
    message = err.value.message
    assert message.startswith("/models/x: ") and says in message and "\n" not in message
    assert message.endswith("or serve the bf16 checkpoint")


def test_transformers_own_fp8_formats_are_refused_and_other_quantizations_pass():
    for method in ("fp8", "fbgemm_fp8"):
        with pytest.raises(ModelLoadError, match=f"quant_method '{method}'"):
            check({"quant_method": method, "weight_block_size": [128, 128]}, "/models/x")
    check({"quant_method": "gptq", "bits": 4}, "/models/x")  # loaded by transformers, as before
    check(None, "/models/x")


def _checkpoint(tmp_path, quantization_config) -> ModelShape:
    config = {
        "model_type": "hunyuan_v1_dense",
        "architectures": ["HunYuanDenseV1ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "vocab_size": 1000,
        "quantization_config": quantization_config,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    return ModelShape.from_config(load_config(tmp_path))


def test_the_planner_reads_an_fp8_checkpoint_and_refuses_a_block_wise_one(tmp_path):
    shape = _checkpoint(tmp_path, TENCENT)
    assert shape.quantized_format == "compressed-tensors-fp8" and shape.quantized_bits == 8
    with pytest.raises(ModelLoadError, match="weights scaled per 'block'"):
        _checkpoint(tmp_path, changed("config_groups.group_0.weights.strategy", "block"))
