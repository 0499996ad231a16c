"""The int4 layers' kernels over a few ranges of rows (engine/weights.py row_table): humming's tuning table, each
range served by humming's own choice for the row count named, every row count in exactly one range; and humming's
own table where those kernels fail at the first call."""

import functools
import json

import pytest
import torch

from hymt.engine.weights import ROW_RANGES, ROWS_ABOVE, _first_call, row_table


def test_the_ranges_cover_every_row_count_once_each_with_hummings_choice_for_its_named_rows():
    asked: list[int] = []

    def heuristics(rows: int) -> dict:
        asked.append(rows)
        return {"block_m": rows}

    table = json.loads(row_table(heuristics))
    assert len(table) == len(ROW_RANGES) + 1 <= 10
    assert table[0][0] == 0 and table[-1][1] == 0  # from the first row, the last range without a limit
    for (_, high, _), (low, _, _) in zip(table, table[1:]):
        assert low == high  # humming serves rows in (above, up to]: no gap, no overlap
    assert [config["block_m"] for _, _, config in table] == [*(rows for _, rows in ROW_RANGES), ROWS_ABOVE]
    assert asked == [config["block_m"] for _, _, config in table]
    # the decoding step's one row, and the row counts the decoding graphs and prefill buckets fall on most
    for rows in (1, 8, 16, 32, 64, 128, 256, 512, 1024):
        assert next(config for low, high, config in table if low < rows <= (high or rows))["block_m"] == rows


def test_a_layer_whose_row_ranges_fail_goes_back_to_hummings_own_table():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("packed", torch.zeros(1))
            self.calls: list = []

        def forward(self, x, tuning_config=None):
            self.calls.append(tuning_config)
            if tuning_config is not None:
                raise RuntimeError("shape_m is not within any range")
            return x

    class Head(torch.nn.Module):  # as weights.Int8Head holds its humming layer
        def __init__(self):
            super().__init__()
            self.layer = Layer()

        def forward(self, x):
            return self.layer(x)

    for module in (Layer(), Head()):
        humming = getattr(module, "layer", module)
        humming.forward = functools.partial(humming.forward, tuning_config="[]")
        _first_call(module, 8)
        assert humming.calls == ["[]", None] and "forward" not in vars(humming)

    class Failing(Layer):  # humming's own table failing too is the layer's error, raised as it is
        def forward(self, x, tuning_config=None):
            raise RuntimeError("no kernel for this GPU")

    with pytest.raises(RuntimeError, match="no kernel for this GPU"):
        _first_call(Failing(), 8)
