"""`hymt translate`: a document by its extension, or text on standard input, on a local engine or, with --server,
through a running server's API. cli.py parses the arguments."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from .errors import BadRequest
from .settings import Settings


def translate(args, settings: Settings) -> int:
    from . import languages

    target = languages.resolve(args.target, "target language")
    source = None if args.source == "auto" else languages.resolve(args.source, "source language")
    ext = _input_format(args)
    if args.server:
        return _translate_remote(args, source, target, ext)
    settings = settings.replace(
        model=args.model, greedy=args.greedy, max_segment_tokens=args.max_segment_tokens, profile=args.profile
    )
    if ext is not None and (args.output or ext != ".txt"):
        return _translate_document(args, settings, source, target)
    return _translate_text(args, settings, source, target)


def _input_format(args) -> str | None:
    """The input's format by its extension: exactly the server's formats (documents.FORMATS), anything else
    refused as the server refuses it; None for text on standard input. An output goes in the input's format."""
    from . import documents

    if args.input == "-":
        if args.output:
            raise BadRequest("a document needs a file name (its extension picks the format), not standard input")
        return None
    ext = documents.extension(args.input)
    if args.output:
        out_ext = os.path.splitext(args.output)[1].lower()
        if out_ext not in documents.FORMATS or documents.media_type(out_ext) != documents.media_type(ext):
            raise BadRequest(
                f"-o {args.output}: the translation is written in the input's format, so the output "
                f"must end in {ext} too"
            )
    return ext


def _translate_text(args, settings: Settings, source, target) -> int:
    """Text (standard input, or a .txt without -o) to standard output, line for line."""
    from tqdm import tqdm

    from . import detect
    from .engine.sampling_params import Sampling

    try:
        if args.input == "-":
            text = sys.stdin.read()
        else:
            with open(args.input, encoding="utf-8", newline="") as f:
                text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadRequest(f"cannot read {args.input}: {exc}") from None
    if source is None:
        found = detect.detect(text)
        source = found.language if found else None

    began = time.perf_counter()
    translator = _start_translator(settings)
    started = time.perf_counter()
    try:
        bar = None

        def progress(event):
            if bar is not None and event.kind == "segment":
                bar.update(1)

        job = translator.submit([(text, source)], target, Sampling(greedy=settings.greedy), listener=progress)
        if job.num_segments > 1:
            bar = tqdm(total=job.num_segments, unit="seg", file=sys.stderr, desc="translating")
            bar.update(job.num_done)
        try:
            (result,) = job.wait()
        finally:
            if bar is not None:
                bar.close()
        if args.stats:
            print(
                json.dumps({"stats": _stats(translator, job, time.perf_counter() - started, started - began)}),
                file=sys.stderr,
            )
    finally:
        translator.stop()
    sys.stdout.write(result)
    sys.stdout.flush()
    return 0


def _start_translator(settings: Settings):
    from .planner.decide import decision_for
    from .translation.translator import start

    decision = decision_for(settings)
    # Loading takes from seconds to minutes: say what is happening meanwhile, on stderr.
    print(f"hymt: loading {settings.model} (profile {decision.profile})", file=sys.stderr, flush=True)
    translator = start(settings, decision, lambda text: print(f"hymt: {text}", file=sys.stderr, flush=True))
    print("hymt: model ready", file=sys.stderr, flush=True)
    return translator


def _output_path(args, ext: str, target) -> str:
    from . import documents

    return args.output or os.path.join(
        os.path.dirname(args.input), documents.download_name(os.path.basename(args.input), ext, target.code)
    )


def _write(output: str, data: bytes) -> None:
    try:
        with open(output, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise BadRequest(f"cannot write {output}: {exc}") from None


def _summary(output: str, segments: int, fallbacks: int) -> None:
    more = f", {fallbacks} with markup around the whole segment" if fallbacks else ""
    print(f"{output}: {segments} segments translated{more}", file=sys.stderr)


def _translate_document(args, settings: Settings, source, target) -> int:
    """A document in, the same format out (NAME.LANG.EXT beside it unless -o), with a progress bar: the server's
    own path for documents (api/pipeline.py), on an engine loaded here."""
    from tqdm import tqdm

    from . import documents
    from .api import pipeline

    ext = documents.extension(args.input)
    try:
        with open(args.input, "rb") as f:
            data = f.read(settings.max_file_bytes + 1)  # one byte more than the limit is enough to refuse it
    except OSError as exc:
        raise BadRequest(f"cannot read {args.input}: {exc}") from None
    output = _output_path(args, ext, target)
    name = os.path.basename(output)
    upload = asyncio.run(pipeline.open_upload(settings, ext, name, data, source, target))
    if upload.prepared.texts:
        service = _local_service(settings)
        bar = tqdm(total=len(upload.prepared.texts), unit="seg", file=sys.stderr, desc=os.path.basename(args.input))
        try:
            result = asyncio.run(
                pipeline.translate(service, upload, None, lambda done, total: bar.update(done - bar.n))
            )
        finally:
            bar.close()
            service.stop_translators()
    else:
        result = documents.finish(upload.prepared, [])  # nothing to translate, so no model is loaded
    _write(output, result.data)
    _summary(output, result.segments, result.markup_fallbacks)
    return 0


def _local_service(settings: Settings):
    """The server's service around an engine loaded here, for the path documents take in the server."""
    from .api.service import Service

    translator = _start_translator(settings)
    return Service(settings=settings, decision=translator.decision, translator=translator, phase="ready")


def _translate_remote(args, source, target, ext: str | None) -> int:
    """Through a running server: the file (standard input as a .txt document) sent, its translation downloaded."""
    from tqdm import tqdm

    from . import remote

    local = [
        name
        for name, value in (
            ("--model", args.model),
            ("--profile", args.profile),
            ("--max-segment-tokens", args.max_segment_tokens),
            ("--greedy", args.greedy),
            ("--stats", args.stats or None),
        )
        if value is not None
    ]
    if local:
        raise BadRequest(f"{local[0]} is for a model loaded here; the server at --server uses its own settings")
    try:
        if args.input == "-":
            name, data = "stdin.txt", sys.stdin.buffer.read()
        else:
            name = os.path.basename(args.input)
            with open(args.input, "rb") as f:
                data = f.read()
    except OSError as exc:
        raise BadRequest(f"cannot read {args.input}: {exc}") from None
    print(f"hymt: sending {name} to {args.server}", file=sys.stderr, flush=True)
    bars: list = []

    def on_start(total: int) -> None:
        bars.append(tqdm(total=total, unit="seg", file=sys.stderr, desc=name))

    def on_progress(done: int, total: int) -> None:
        bars[0].update(done - bars[0].n)

    try:
        translated, report = remote.translate_file(
            args.server, name, data, source, target, args.api_key, on_start, on_progress
        )
    finally:
        for bar in bars:
            bar.close()
    if ext is None or (ext == ".txt" and not args.output):
        sys.stdout.buffer.write(translated)
        sys.stdout.flush()
        return 0
    output = _output_path(args, ext, target)
    _write(output, translated)
    _summary(output, report["segments"], report.get("markup_fallback_segments", 0))
    return 0


def _stats(translator, job, seconds: float, startup_s: float) -> dict:
    peak = 0.0
    if translator.decision.device == "cuda":
        import torch

        peak = torch.cuda.max_memory_reserved() / 2**30
    now = translator.snapshot()
    return {
        "segments": job.num_segments,
        "segments_done": job.num_done,
        "tokens_out": job.tokens_out,
        "seconds": round(seconds, 2),
        "tok_s": round(job.tokens_out / max(seconds, 1e-9), 1),
        "startup_s": round(startup_s, 1),
        "peak_reserved_gb": round(peak, 2),
        "oom_events": now.oom_events,
        "max_in_flight": now.max_in_flight_seen,
        "profile": translator.decision.profile,
    }
