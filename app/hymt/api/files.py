"""Document translation over HTTP: LibreTranslate's /translate_file (answers a download URL), the page's
/api/translate_file (Server-Sent Events with segments done of total), and /download_file for the result.

Translated files live under the server's own folder, named by a random id; the uploaded name only ever picks the
format and, cleaned, the name offered for download. Each file is removed after the retention time.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from .. import documents
from ..errors import BadRequest, HymtError
from . import parsing, pipeline, preamble, sse
from .service import Service

_ID = re.compile(r"[0-9a-f]{32}")


class FileStore:
    """Finished files by id under one folder; the folder is made here (a private temporary one unless given)."""

    def __init__(self, folder: str | None, retention_s: float):
        self.owned = folder is None
        self.root = Path(tempfile.mkdtemp(prefix="hymt-files-") if folder is None else folder).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.retention_s = retention_s

    def put(self, data: bytes, name: str, media_type: str) -> str:
        self.expire()
        file_id = secrets.token_hex(16)
        (self.root / f"{file_id}.json").write_text(json.dumps({"name": name, "media_type": media_type}))
        (self.root / file_id).write_bytes(data)
        return file_id

    def get(self, file_id: str) -> tuple[Path, dict] | None:
        if not _ID.fullmatch(file_id):
            return None
        path, meta = self.root / file_id, self.root / f"{file_id}.json"
        if not path.is_file() or not meta.is_file() or time.time() - path.stat().st_mtime > self.retention_s:
            return None
        return path, json.loads(meta.read_text())

    def expire(self) -> None:
        for path in self.root.iterdir():
            if _ID.fullmatch(path.name.removesuffix(".json")) and time.time() - path.stat().st_mtime > self.retention_s:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        if self.owned:
            shutil.rmtree(self.root, ignore_errors=True)


async def _open(request: Request) -> tuple[Service, pipeline.Upload]:
    settings = request.app.state.service.settings
    service, data = await preamble.begin(request, limit=settings.max_file_bytes)
    upload = data.get("file")
    if not isinstance(upload, UploadFile):
        raise BadRequest(
            "missing field 'file' (send the document as a multipart/form-data file)", error_type="missing_field"
        )
    ext = documents.extension(upload.filename or "", upload.content_type)
    content = await upload.read()
    source = parsing.language(data, "source", allow_auto=True, default="auto")
    target = parsing.language(data, "target", allow_auto=False)
    options = parsing.options(data, settings)
    service.ready_engine().prompter.check_instructions(options)  # a 422 before the file is read, not mid-stream
    return service, await pipeline.open_upload(settings, ext, upload.filename or "", content, source, target, options)


async def _store(request: Request, upload: pipeline.Upload, result: documents.Result[bytes]) -> dict:
    store: FileStore = request.app.state.files
    file_id = await run_in_threadpool(store.put, result.data, upload.name, documents.media_type(upload.ext))
    url = str(request.url_for("download_file", file_id=file_id, name=upload.name))
    return {"translatedFileUrl": url, "name": upload.name, **result.report()}


async def translate_file(request: Request) -> JSONResponse:
    """LibreTranslate's file call: the whole file translated, then its download URL."""
    service, upload = await _open(request)
    return JSONResponse(await _store(request, upload, await pipeline.translate(service, upload, request)))


async def translate_file_stream(request: Request) -> Response:
    """The page's file call: progress as Server-Sent Events, then the download URL."""
    service, upload = await _open(request)

    async def stream():
        yield sse.event("start", {"segments": len(upload.prepared.texts), "name": upload.name})
        async for step in pipeline.translate_with_progress(service, upload, request):
            if isinstance(step, documents.Result):
                yield sse.event("done", await _store(request, upload, step))
            else:
                yield sse.event("progress", {"done": step[0], "total": step[1]})

    return sse.response(request, stream())


async def download_file(request: Request) -> Response:
    found = request.app.state.files.get(request.path_params["file_id"])
    if found is None:
        raise HymtError("no such file (it may have expired)", error_type="not_found", status=404)
    path, meta = found
    return FileResponse(path, media_type=meta["media_type"], filename=meta["name"])
