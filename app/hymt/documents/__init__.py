"""Documents: files read into segments with their inline markup as markers, translated, and written back in the
same format with the same structure. One module per format family; base.py holds the shape they share."""

from __future__ import annotations

import re
from typing import Callable

from ..errors import BadRequest, HymtError, PayloadTooLarge, UnsupportedFormat
from ..settings import Settings
from . import ebook, gettext, guard, html, markdown, odf, office, spreadsheet, subtitles, text, xliff
from .base import Extraction, Prepared, Result, finish, prepare
from .guard import Limits

Reader = Callable[[bytes, str], Extraction]

FORMATS: dict[str, tuple[Reader, str]] = {
    ".txt": (text.read, "text/plain; charset=utf-8"),
    ".md": (markdown.read, "text/markdown; charset=utf-8"),
    ".html": (html.read, "text/html; charset=utf-8"),
    ".htm": (html.read, "text/html; charset=utf-8"),
    ".srt": (subtitles.read_srt, "application/x-subrip; charset=utf-8"),
    ".vtt": (subtitles.read_vtt, "text/vtt; charset=utf-8"),
    ".docx": (office.read_docx, "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
    ".pptx": (office.read_pptx, "application/vnd.openxmlformats-officedocument.presentationml.presentation"),
    ".xlsx": (spreadsheet.read, "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"),
    ".po": (gettext.read, "text/x-gettext-translation; charset=utf-8"),
    ".pot": (gettext.read, "text/x-gettext-translation; charset=utf-8"),
    ".xliff": (xliff.read, "application/xliff+xml"),
    ".xlf": (xliff.read, "application/xliff+xml"),
    ".epub": (ebook.read, "application/epub+zip"),
    ".odt": (odf.read, "application/vnd.oasis.opendocument.text"),
    ".odp": (odf.read, "application/vnd.oasis.opendocument.presentation"),
    ".ods": (odf.read, "application/vnd.oasis.opendocument.spreadsheet"),
}

# How each kind of file is checked before its library reads it (guard.py).
ARCHIVES = {".docx", ".pptx", ".xlsx", ".epub", ".odt", ".odp", ".ods"}
XML = {".xliff", ".xlf"}
LINES = {".txt", ".md", ".srt", ".vtt", ".po", ".pot"}
DEFAULT_LIMITS = Limits.of(Settings())

__all__ = ["FORMATS", "Limits", "Prepared", "Result", "extension", "finish", "media_type", "open_document", "prepare"]


def extension(filename: str) -> str:
    """The file's format by its extension, or a 415 that lists the supported ones."""
    dot = filename.rfind(".")
    ext = filename[dot:].lower() if dot >= 0 else ""
    if ext not in FORMATS:
        shown = ext or "a file without an extension"
        raise UnsupportedFormat(f"{shown} is not a supported format; supported: {', '.join(FORMATS)}")
    return ext


def download_name(uploaded: str, ext: str, target: str) -> str:
    """The name offered for download: the upload's own base name, cleaned to safe characters, with the target
    language before the extension."""
    base = re.split(r"[\\/]", uploaded)[-1]
    stem = re.sub(r"[^\w.\- ]", "_", base[:len(base) - len(ext)]).strip(" .")[:80] or "document"
    return f"{stem}.{target}{ext}"


def media_type(ext: str) -> str:
    return FORMATS[ext][1]


def open_document(ext: str, data: bytes, target: str, limits: Limits = DEFAULT_LIMITS) -> Prepared:
    """Read a file (by its extension) into the texts to translate, once it has passed the checks for hostile files;
    a document over the limits is a 413 before any translation. A file the library cannot read is a 400."""
    if len(data) > limits.file_bytes:
        raise PayloadTooLarge(f"the file is over the limit of {limits.file_bytes} bytes (HYMT_MAX_FILE_BYTES)")
    if ext in ARCHIVES:
        guard.check_archive(data, ext, limits)
    elif ext in XML:
        guard.check_xml(data, ext)
    elif ext in LINES:
        guard.check_lines(data, ext, limits)
    try:
        prepared = prepare(FORMATS[ext][0](data, target))
    except HymtError:
        raise
    except Exception as exc:  # noqa: BLE001 - each library has its own errors for a damaged file
        raise BadRequest(f"could not read this {ext} file: {type(exc).__name__}: {exc}",
                         error_type="invalid_file") from None
    guard.check_segments(prepared.texts, ext, limits)
    return prepared
