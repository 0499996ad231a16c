"""`hymt`: translate | serve | profile | quantize | make-test-model. Exit codes: 0 done, 2 bad arguments,
1 runtime failure; every failure is one readable line on stderr."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from .documents import FORMATS
from .errors import BadRequest, HymtError
from .family import FAMILIES, FAMILY_CHOICES, HUNYUAN_MT_7B
from .settings import Settings
from .tiers import PROFILE_CHOICES


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
    m.add_argument(
        "--fp8",
        action="store_true",
        help="store the projections as Tencent's FP8 checkpoints do (e4m3, a scale per tensor, compressed-tensors)",
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
            from .cli_translate import translate

            return translate(args, settings)
        if args.command == "serve":
            return _serve(args, settings)
        if args.command == "profile":
            return _profile(args, settings)
        if args.command == "quantize":
            return _quantize(args)
        if args.command == "make-test-model":
            from .testmodel import make_test_model

            print(make_test_model(args.directory, family=args.family, fp8=args.fp8))
            return 0
    except HymtError as exc:
        print(f"hymt: error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("hymt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of the output left (`hymt profile | head`): end quietly, as shell tools do, and keep Python's
        # flush at exit from raising it again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return 2


def _quiet_libraries() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # transformers' errors only, and no progress bars (its own and the hub's), told through the environment that it
    # reads when imported: importing it here took a second and a half of every command, a refused document's too.
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"


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
