"""Documents: files read into segments with their inline markup as markers, translated, and written back in the
same format with the same structure. One module per format family; base.py holds the shape they share."""

from __future__ import annotations

import re
from collections.abc import Callable

from ..errors import BadRequest, HymtError, PayloadTooLarge, UnsupportedFormat
from ..settings import Settings
from . import ebook, gettext, guard, html, markdown, odf, office, pdf, spreadsheet, subtitles, text, xliff
from .base import Extraction, Prepared, Result, finish, prepare
from .guard import Limits

Reader = Callable[[bytes, str], Extraction[bytes]]

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
    ".pdf": (pdf.read, "application/pdf"),
}

# How each kind of file is checked before its library reads it (guard.py).
ARCHIVES = {".docx", ".pptx", ".xlsx", ".epub", ".odt", ".odp", ".ods"}
XML = {".xliff", ".xlf"}
LINES = {".txt", ".md", ".srt", ".vtt", ".po", ".pot"}
DEFAULT_LIMITS = Limits.of(Settings())

__all__ = [
    "FORMATS",
    "Limits",
    "Prepared",
    "Result",
    "extension",
    "finish",
    "media_type",
    "media_types",
    "open_document",
    "prepare",
]


def media_types() -> dict[str, str]:
    """The accepted media types (parameters left out), each with the extension it stands for (the first that has it)."""
    types: dict[str, str] = {}
    for ext, (_, media) in FORMATS.items():
        types.setdefault(media.split(";")[0], ext)
    return types


def extension(filename: str, media: str | None = None) -> str:
    """The file's format by its extension, else by the media type it was sent as; or a 415 that lists both."""
    dot = filename.rfind(".")
    ext = filename[dot:].lower() if dot >= 0 else ""
    if ext in FORMATS:
        return ext
    by_type = media_types().get((media or "").split(";")[0].strip().lower())
    if by_type:
        return by_type
    shown = ext or "a file without an extension"
    raise UnsupportedFormat(
        f"{shown} is not a supported format; supported: {', '.join(FORMATS)} (a file named "
        "otherwise is read by its part's Content-Type: the media types in /openapi.json)"
    )


def download_name(uploaded: str, ext: str, target: str) -> str:
    """The name offered for download: the upload's own base name without its extension, cleaned to safe characters,
    with the target language and the format's extension."""
    base = re.split(r"[\\/]", uploaded)[-1]
    dot = base.rfind(".")
    stem = re.sub(r"[^\w.\- ]", "_", base[:dot] if dot > 0 else base).strip(" .")[:80] or "document"
    return f"{stem}.{target}{ext}"


def media_type(ext: str) -> str:
    return FORMATS[ext][1]


def open_document(ext: str, data: bytes, target: str, limits: Limits = DEFAULT_LIMITS) -> Prepared[bytes]:
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
    elif ext == ".pdf":
        pdf.check(data, limits.expanded_bytes, limits.members)
        pdf.fonts_for(target)
    try:
        prepared = prepare(FORMATS[ext][0](data, target))
    except HymtError:
        raise
    except Exception as exc:  # noqa: BLE001 - each library has its own errors for a damaged file
        raise BadRequest(
            f"could not read this {ext} file: {type(exc).__name__}: {exc}", error_type="invalid_file"
        ) from None
    guard.check_segments(prepared.texts, ext, limits)
    return prepared
