"""Spreadsheets (.xlsx) with openpyxl: each text cell a segment; numbers, dates, formulas, styles, merged cells
and sheet names untouched."""

from __future__ import annotations

import io

import openpyxl

from .base import Extraction, each_translated


def read(data: bytes, target: str) -> Extraction[bytes]:
    book = openpyxl.load_workbook(io.BytesIO(data))
    cells = [
        cell
        for sheet in book.worksheets
        for row in sheet.iter_rows()
        for cell in row
        if cell.data_type == "s" and isinstance(cell.value, str)
    ]

    def save() -> bytes:
        out = io.BytesIO()
        book.save(out)
        return out.getvalue()

    return each_translated(
        cells,
        [[cell.value] for cell in cells],
        lambda cell, outcome: setattr(cell, "value", outcome.text),
        save,
    )
