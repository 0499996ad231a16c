"""Hostile files refused before any library reads them, and documents too big for the queue before any translation.

Archives (.docx .pptx .xlsx .epub .odt .odp .ods) are checked on their central directory first: member count,
expanded size of each member and of all together, and compression ratio. Python's zipfile never expands a member
past the size its directory entry declares (a member that holds more fails its CRC check), so checking the declared
sizes bounds what every library can read. Then every member, and every plain XML upload, is scanned for entity
declarations: no format we read needs them, and they are how XML expands without bound (billion laughs) or reads
files and URLs (external entities). Our own XML parsing goes through parser(), which resolves no entity, opens no
network and keeps libxml2's limits on depth and node size.
"""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass

from lxml import etree

from ..errors import BadRequest, PayloadTooLarge
from ..settings import Settings


def parser() -> etree.XMLParser:
    """A new parser for each document: lxml parsers keep state, and documents are read in several threads."""
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False)


# Small members may compress far better than real documents do (a run of spaces, an empty part): the ratio applies
# only to members that expand past this.
RATIO_FLOOR_BYTES = 1 << 20
_ENTITY = "<!ENTITY"
_ENTITY_FORMS = tuple(_ENTITY.encode(codec) for codec in ("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Limits:
    """What a document may be, all derived from HYMT_MAX_FILE_BYTES and the queue's length."""

    file_bytes: int
    expanded_bytes: int  # an archive's members together, expanded
    member_bytes: int  # one member, expanded
    members: int
    ratio: int  # expanded size over compressed size of one member (past RATIO_FLOOR_BYTES)
    segments: int  # segments with words in one document
    segment_chars: int  # characters of one segment, as of one text request

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        # The floors keep a small document readable under a small HYMT_MAX_FILE_BYTES: an empty .docx holds a
        # 438 kB style part, and every .docx that Word or python-docx writes starts from it.
        size = settings.max_file_bytes
        return cls(
            file_bytes=size,
            expanded_bytes=max(3 * size, 24 << 20),
            member_bytes=max(size, 8 << 20),
            members=max(100, size // 2000),
            ratio=200,
            segments=16 * settings.max_queue_segments,
            segment_chars=settings.max_chars,
        )


def check_archive(data: bytes, ext: str, limits: Limits) -> None:
    """The archive's directory against the limits, then each member scanned for entity declarations."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise BadRequest(
            f"could not read this {ext} file: it is not a zip archive ({exc})", error_type="invalid_file"
        ) from None
    with archive:
        members = archive.infolist()
        if len(members) > limits.members:
            raise PayloadTooLarge(
                f"the {ext} archive has {len(members)} members; the limit is {limits.members}",
                error_type="archive_too_large",
            )
        total = 0
        for member in members:
            if member.file_size > limits.member_bytes:
                raise PayloadTooLarge(
                    f"{member.filename!r} in the {ext} archive expands to {member.file_size} bytes; "
                    f"the limit is {limits.member_bytes}",
                    error_type="archive_too_large",
                )
            if member.file_size > RATIO_FLOOR_BYTES and member.file_size > limits.ratio * max(1, member.compress_size):
                raise PayloadTooLarge(
                    f"{member.filename!r} in the {ext} archive expands {member.file_size} bytes from "
                    f"{member.compress_size}, more than {limits.ratio} times: refused as a zip bomb",
                    error_type="archive_too_large",
                )
            total += member.file_size
        if total > limits.expanded_bytes:
            raise PayloadTooLarge(
                f"the {ext} archive expands to {total} bytes; the limit is {limits.expanded_bytes}",
                error_type="archive_too_large",
            )
        for member in members:
            if not member.is_dir():
                _scan_member(archive, member, ext)


def _scan_member(archive: zipfile.ZipFile, member: zipfile.ZipInfo, ext: str) -> None:
    tail = b""
    try:
        with archive.open(member) as stream:
            while chunk := stream.read(_CHUNK):
                window = tail + chunk
                if any(form in window for form in _ENTITY_FORMS):
                    raise _entities(f"{member.filename!r} in the {ext} file")
                tail = window[-32:]  # a declaration split between two chunks
    except (zipfile.BadZipFile, NotImplementedError, RuntimeError, EOFError, OSError, ValueError) as exc:
        # A damaged member, an unknown compression or a password: no library could read it either.
        raise BadRequest(
            f"could not read {member.filename!r} in this {ext} file: {exc}", error_type="invalid_file"
        ) from None


def check_xml(data: bytes, ext: str) -> None:
    """A plain XML upload (.xliff): refused when it declares entities."""
    if any(form in data for form in _ENTITY_FORMS):
        raise _entities(f"the {ext} file")


def _entities(where: str) -> BadRequest:
    return BadRequest(
        f"{where} declares XML entities, which documents never need and which can expand without "
        "bound or read other files: refused",
        error_type="xml_entities",
    )


def check_lines(data: bytes, ext: str, limits: Limits) -> None:
    """A line-based file with more lines than four times the segment limit, refused before it is split into them."""
    lines = max(data.count(b"\n"), data.count(b"\r"))
    if lines > 4 * limits.segments:
        raise PayloadTooLarge(
            f"the {ext} file has {lines} lines; documents of more than {limits.segments} "
            f"segments are refused (16 x HYMT_MAX_QUEUE_SEGMENTS)",
            error_type="too_many_segments",
        )


def check_segments(texts: list[str], ext: str, limits: Limits) -> None:
    """The segments to translate against what the queue is meant to take from one document."""
    if len(texts) > limits.segments:
        raise PayloadTooLarge(
            f"the {ext} file has {len(texts)} segments to translate; the limit is "
            f"{limits.segments} (16 x HYMT_MAX_QUEUE_SEGMENTS)",
            error_type="too_many_segments",
        )
    longest = max(texts, key=len, default="")
    if len(longest) > limits.segment_chars:
        raise PayloadTooLarge(
            f"a segment of the {ext} file has {len(longest)} characters; the limit is "
            f"{limits.segment_chars} (HYMT_MAX_CHARS)",
            error_type="segment_too_long",
        )
