"""`hymt`: translate | serve | profile | quantize | make-test-model. Exit codes: 0 done, 2 bad arguments,
1 runtime failure; every failure is one readable line on stderr."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time

from .documents import FORMATS
from .errors import BadRequest, HymtError
from .family import FAMILIES, FAMILY_CHOICES, HUNYUAN_MT_7B
from .planner.tiers import PROFILE_CHOICES
from .settings import Settings


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line instead of usage + message
        self.exit(2, f"hymt: error: {message} (see hymt {self.prog.split()[-1]} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="hymt", description="Self-hosted Hunyuan-MT-7B translation.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    t = sub.add_parser("translate", help="translate a document (by its extension), or text to standard output")
    t.add_argument(
        "input",
        nargs="?",
        default="-",
        help=f"a file of a format the server takes ({' '.join(FORMATS)}; a .txt goes to standard output "
        "unless -o), or - for text on standard input",
    )
    t.add_argument("-o", "--output", help="where to write the translated document (default: NAME.LANG.EXT beside it)")
    t.add_argument("--model", help="checkpoint directory or hub id (default: HYMT_MODEL)")
    t.add_argument(
        "--server",
        help="translate through a running hymt server at this URL (e.g. "
        "http://localhost:8080) instead of loading a model here",
    )
    t.add_argument("--api-key", help="the key a --server that requires keys wants")
    t.add_argument("--to", required=True, dest="target", help="target language code, e.g. en, zh, zh-Hant, bo")
    t.add_argument("--from", dest="source", default="auto", help="source language code, or auto (default)")
    t.add_argument("--greedy", action="store_true", default=None, help="greedy decoding instead of sampling")
    t.add_argument("--max-segment-tokens", type=int, help="longest segment sent to the model, in tokens")
    t.add_argument("--profile", choices=PROFILE_CHOICES, help="memory profile (default: chosen for the GPU)")
    t.add_argument(
        "--stats",
        action="store_true",
        help="print one JSON line of figures (segments, tokens, seconds, memory) on stderr at the end",
    )

    s = sub.add_parser("serve", help="run the HTTP API and web page")
    s.add_argument("--model", help="checkpoint directory or hub id (default: HYMT_MODEL)")
    s.add_argument("--host", help="address to listen on (default 0.0.0.0)")
    s.add_argument("--port", type=int, help="port (default 80)")
    s.add_argument("--profile", choices=PROFILE_CHOICES)

    p = sub.add_parser("profile", help="print the memory profile chosen for this GPU, as JSON")
    p.add_argument("--model", help="checkpoint directory whose config sizes the plan")
    p.add_argument(
        "--family",
        choices=FAMILY_CHOICES,
        help="which model of the family (default: HYMT_MODEL_FAMILY); without a checkpoint on disk, "
        "its published shape is planned",
    )
    p.add_argument("--gpu-memory-gb", type=float, help="plan for a card of this many GiB")
    p.add_argument("--profile", choices=PROFILE_CHOICES)
    p.add_argument("--output", help="also write the decision to this file")

    m = sub.add_parser("make-test-model", help="write a tiny random-weight Hunyuan-MT checkpoint")
    m.add_argument("directory")
    m.add_argument(
        "--family",
        choices=FAMILIES,
        default=HUNYUAN_MT_7B.key,
        help="which model of the family to imitate: its vocabulary, chat template and name (its prompts "
        "follow the name)",
    )

    q = sub.add_parser("quantize", help="make an INT4 GPTQ checkpoint from a bf16 one (needs hymt[quantize])")
    q.add_argument("--model", required=True, help="the bf16 checkpoint directory or hub id")
    q.add_argument("--out", required=True, help="an empty or new directory for the quantized checkpoint")
    q.add_argument("--bits", type=int, default=4, choices=(4, 8))
    q.add_argument("--group-size", type=int, default=128)
    q.add_argument("--calibration", help="a text file of extra calibration prompts, one per line")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_libraries()
    try:
        settings = Settings.from_env()
        if args.command == "translate":
            return _translate(args, settings)
        if args.command == "serve":
            return _serve(args, settings)
        if args.command == "profile":
            return _profile(args, settings)
        if args.command == "quantize":
            return _quantize(args)
        if args.command == "make-test-model":
            from .testmodel import make_test_model

            print(make_test_model(args.directory, family=args.family))
            return 0
    except HymtError as exc:
        print(f"hymt: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hymt: interrupted", file=sys.stderr)
        return 130
    return 2


def _quiet_libraries() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def _translate(args, settings: Settings) -> int:
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

    from . import detect, prompts

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
    engine = _start_engine(settings)
    started = time.perf_counter()
    try:
        bar = None

        def progress(event):
            if bar is not None and event.kind == "segment":
                bar.update(1)

        job = engine.submit([(text, source)], target, prompts.Sampling(greedy=settings.greedy), listener=progress)
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
                json.dumps({"stats": _stats(engine, job, time.perf_counter() - started, started - began)}),
                file=sys.stderr,
            )
    finally:
        engine.stop()
    sys.stdout.write(result)
    sys.stdout.flush()
    return 0


def _start_engine(settings: Settings):
    from .engine import startup as engine_mod
    from .planner.decide import decision_for
    from .planner.gpu import apply_memory_cap

    decision = decision_for(settings)
    apply_memory_cap(settings.gpu_memory_gb)
    # Loading takes from seconds to minutes: say what is happening meanwhile, on stderr.
    print(f"hymt: loading {settings.model} (profile {decision.profile})", file=sys.stderr, flush=True)
    engine = engine_mod.start(settings, decision, lambda text: print(f"hymt: {text}", file=sys.stderr, flush=True))
    print("hymt: model ready", file=sys.stderr, flush=True)
    return engine


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
    upload = asyncio.run(pipeline.open_upload(settings, ext, os.path.basename(args.input), data, source, target))
    output = _output_path(args, ext, target)
    if upload.prepared.texts:
        service = _local_service(settings)
        bar = tqdm(total=len(upload.prepared.texts), unit="seg", file=sys.stderr, desc=os.path.basename(args.input))
        try:
            result = asyncio.run(
                pipeline.translate(service, upload, None, lambda done, total: bar.update(done - bar.n))
            )
        finally:
            bar.close()
            service.stop_engines()
    else:
        result = documents.finish(upload.prepared, [])  # nothing to translate, so no model is loaded
    _write(output, result.data)
    _summary(output, result.segments, result.markup_fallbacks)
    return 0


def _local_service(settings: Settings):
    """The server's service around an engine loaded here, for the path documents take in the server."""
    from .api.service import Service

    engine = _start_engine(settings)
    return Service(settings=settings, decision=engine.decision, engine=engine, phase="ready")


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


def _stats(engine, job, seconds: float, startup_s: float) -> dict:
    peak = 0.0
    if engine.runner.device.type == "cuda":
        import torch

        peak = torch.cuda.max_memory_reserved() / 2**30
    stats = engine.runner.stats
    return {
        "segments": job.num_segments,
        "segments_done": job.num_done,
        "tokens_out": job.tokens_out,
        "seconds": round(seconds, 2),
        "tok_s": round(job.tokens_out / max(seconds, 1e-9), 1),
        "startup_s": round(startup_s, 1),
        "peak_reserved_gb": round(peak, 2),
        "oom_events": stats.oom_events,
        "max_in_flight": stats.max_in_flight_seen,
        "profile": engine.decision.profile,
    }


def _serve(args, settings: Settings) -> int:
    from .api.server import serve

    settings = settings.replace(model=args.model, host=args.host, port=args.port, profile=args.profile)
    logging.getLogger().setLevel(settings.log_level.upper())
    serve(settings)
    return 0


def _quantize(args) -> int:
    from .engine.quantize import quantize

    extra = []
    if args.calibration:
        try:
            with open(args.calibration, encoding="utf-8") as f:
                extra = [line.strip() for line in f if line.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise BadRequest(f"cannot read {args.calibration}: {exc}") from None
    print(quantize(args.model, args.out, bits=args.bits, group_size=args.group_size, extra_calibration=extra))
    return 0


def _profile(args, settings: Settings) -> int:
    from .planner.decide import decision_for

    settings = settings.replace(
        model=args.model,
        gpu_memory_gb=args.gpu_memory_gb,
        profile=args.profile,
        model_family=args.family,
        decision_file="",
    )
    try:
        decision = decision_for(settings)
    except HymtError as exc:
        print(json.dumps({"profile": None, "error": exc.message}), flush=True)
        raise
    text = json.dumps(decision.to_json(), indent=2)
    print(text)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
