"""The int4 layers' kernels over a few ranges of rows (engine/weights.py row_table): humming's tuning table, each
range served by humming's own choice for the row count named, every row count in exactly one range."""

import json

from hymt.engine.weights import ROW_RANGES, ROWS_ABOVE, row_table


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
