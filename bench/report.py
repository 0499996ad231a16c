"""The standard run's records as markdown tables and one chart, for whichever model and cards the run measured:
the cards, and the card each llama.cpp GGUF type stands for, are read from the records. A second table, "Teams",
has the mixed scenario (interactive sentences while documents run) and the document alone, against their targets.

python bench/report.py bench/results        # reads standard.json, writes table.md and chart.png
python bench/report.py bench/results/small  # the 1.8B's
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ENGINES = ("hymt", "llama.cpp", "seed-style")
# What the mixed and document scenarios serve (bench/README.md): the interactive sentences' p50 and p95 seconds
# and 429s beside the documents, the documents' tok/s beside them over theirs alone, and one document alone (a
# job on an idle server) over the 64 clients' tok/s on the same card.
TARGETS = {"p50_s": 0.4, "p95_s": 1.0, "interactive_429": 0, "documents_share": 0.8, "document": 0.7}


def _find(
    records: list[dict], card: float, engine: str, scenario: str, clients: int | None = 1, **fields
) -> dict | None:
    """The first record of the card, engine, scenario and clients (None: any) without an error, whose `fields`
    are as given."""
    return next(
        (
            r
            for r in records
            if r.get("card_gb") == card
            and r.get("engine") == engine
            and r.get("scenario") == scenario
            and (clients is None or r.get("clients") == clients)
            and all(r.get(k) == v for k, v in fields.items())
            and "error" not in r
        ),
        None,
    )


def _tok_s(r: dict | None, latency: str = "") -> str:
    if not r:
        return "–"
    partial = r.get("completed", r.get("requests", 0)) < r.get("requests", 0)
    text = f"{r['tok_s']:,.0f}" + (f" ({r['completed']}/{r['requests']})" if partial else "")
    if latency == "p50":
        text += f" ({r['p50_s']:g} s)"
    elif latency == "both":
        text += f" ({r['p50_s']:g} / {r['p95_s']:g} s)"
    return text


def _ratio(ours: dict | None, theirs: dict | None) -> str:
    return f"{ours['tok_s'] / theirs['tok_s']:.2f}x" if ours and theirs and theirs.get("tok_s") else "–"


def _listed(cards: list[float]) -> str:
    """8, 12 and 16 GB."""
    names = [f"{c:g}" for c in sorted(cards)]
    return (", ".join(names[:-1]) + " and " if len(names) > 1 else "") + names[-1] + " GB"


def _stands_for(records: list[dict]) -> str:
    """Which cards each llama.cpp GGUF type stood for in the run: "Q4_K_M stands for 8, 12 and 16 GB, BF16 for
    24 GB"."""
    cards: dict[str, set[float]] = {}
    for r in records:
        if r.get("engine") == "llama.cpp" and r.get("profile") and "card_gb" in r:
            cards.setdefault(r["profile"], set()).add(r["card_gb"])
    kinds = sorted(cards, key=lambda kind: min(cards[kind]))
    return ", ".join(
        f"{kind} {'stands ' if i == 0 else ''}for {_listed(list(cards[kind]))}" for i, kind in enumerate(kinds)
    )


def _seconds(r: dict, key: str) -> str:
    return ("≥" if r.get(key.replace("_s", "_censored")) else "") + f"{r[key]:g}"


def _document_ratio(document: dict | None, clients: dict | None) -> float | None:
    return document["tok_s"] / clients["tok_s"] if document and clients and clients.get("tok_s") else None


def _missed(mixed: dict | None, ratio: float | None) -> str:
    """The targets a card's records miss ("met" where none), of those they have figures for."""
    if not mixed and ratio is None:
        return "–"
    missed = []
    if mixed:
        missed += [key.removesuffix("_s") for key in ("p50_s", "p95_s") if mixed[key] > TARGETS[key]]
        missed += ["429"] if mixed["interactive_429"] > TARGETS["interactive_429"] else []
        share = mixed.get("documents_share")
        missed += ["share"] if share is None or share < TARGETS["documents_share"] else []
    missed += ["document"] if ratio is not None and ratio < TARGETS["document"] else []
    return "missed: " + ", ".join(missed) if missed else "met"


def teams(records: list[dict]) -> list[str]:
    """The Teams table's lines: per card, hymt's and llama-server's mixed scenario, and hymt's document alone
    against its 64-client row; none where the run had neither scenario."""
    cards = sorted(
        {
            r["card_gb"]
            for r in records
            if "card_gb" in r and (r.get("scenario") == "mixed" or r.get("via") == "/api/jobs")
        }
    )
    if not cards:
        return []
    example = next((r for r in records if r.get("scenario") == "mixed" and "error" not in r), {})
    window, alone = example.get("window_s", 40), example.get("alone_s", 20)
    documents, lines_each = example.get("documents", 4), example.get("document_lines", 2000)
    lines = [
        "",
        "Teams: interactive sentences while documents run. "
        f"{example.get('clients', 16)} clients send sentences one after another for {window:g} s beside "
        f"{documents} documents of {lines_each:,} lines (hymt: jobs through `/api/jobs`; llama-server: each "
        "document's lines one a request over 12 connections), after the documents alone for "
        f"{alone:g} s; documents tok/s alone and beside the sentences, and their share (the second over the "
        "first). One document: a job on an idle server, its tok/s (seconds) and over the 64 clients' tok/s. "
        f"Targets: p50 ≤ {TARGETS['p50_s']:g} s, p95 ≤ {TARGETS['p95_s']:g} s, no 429, share ≥ "
        f"{TARGETS['documents_share']:g}, one document ≥ {TARGETS['document']:g} of 64 clients.",
        "",
        "| card | engine | profile | interactive p50 / p95 s | 429 | documents tok/s alone | beside sentences "
        "| share | one document tok/s (s) | of 64 clients | targets |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for card in cards:
        for engine in ENGINES[:2]:
            mixed = _find(records, card, engine, "mixed", None)
            document = _find(records, card, engine, "document", 1, via="/api/jobs")
            row = mixed or document
            if row is None:
                continue
            ratio = _document_ratio(document, _find(records, card, engine, "clients", 64))
            cells = ["–"] * 5
            if mixed:
                errors = mixed.get("interactive_errors") or 0
                cells = [
                    f"{_seconds(mixed, 'p50_s')} / {_seconds(mixed, 'p95_s')}",
                    f"{mixed['interactive_429']}" + (f" (+{errors} errors)" if errors else ""),
                    f"{mixed['documents_alone_tok_s']:,.0f}",
                    f"{mixed['documents_tok_s']:,.0f}",
                    "–" if mixed.get("documents_share") is None else f"{mixed['documents_share']:.2f}",
                ]
            one = "–"
            if document:
                one = f"{document['tok_s']:,.0f} ({document['seconds']:g} s)"
                if not document.get("completed"):
                    one += f", {document.get('segments_done')}/{document.get('segments_total')} by the deadline"
            lines.append(
                f"| {card:g} GB | {engine} | {row.get('profile')} | "
                + " | ".join(cells)
                + f" | {one} | {'–' if ratio is None else f'{ratio:.2f}'} | {_missed(mixed, ratio)} |"
            )
    return lines + _accounts([r for r in records if r.get("scenario") == "mixed" and "server_s" in r])


# How the report names server_s's means (bench/load.py), in its order.
ACCOUNT = {
    "request": "the HTTP request",
    "segment": "in the engine",
    "queue": "waiting for a row",
    "first_token": "to the first token",
}


def _accounts(mixed: list[dict]) -> list[str]:
    """hymt's own account of its sentences' time beside the documents (the means of its /metrics), a line a card."""
    if not mixed:
        return []
    lines = ["", "Where hymt says its sentences' time went beside the documents (means over the window):"]
    for r in mixed:
        t = r["server_s"]
        parts = [f"{name} {t[key]:.3f} s" for key, name in ACCOUNT.items() if key in t]
        if "token" in t:
            parts.append(f"{t['token'] * 1000:.1f} ms between tokens")
        lines.append(f"- {r['card_gb']:g} GB ({r.get('profile')}): " + ", ".join(parts) + ".")
    return lines


def _stream(records: list[dict], card: float, engine: str) -> dict | None:
    """The engine's single stream on the card in the profile its clients were served with (any, where none were)."""
    served = next((r for c in (1, 16, 64) if (r := _find(records, card, engine, "clients", c))), None)
    return _find(records, card, engine, "single_stream", **({"profile": served["profile"]} if served else {}))


def pinned(records: list[dict]) -> list[str]:
    """The lines of hymt's single streams in a profile other than the one its card was served with (a profile
    pinned: the 7B's int4 on a 12 GB card, where Ada and Hopper are given fp8-int8kv), each against llama.cpp's
    single stream on that card."""
    lines = []
    for r in records:
        if r.get("scenario") != "single_stream" or r.get("engine") != "hymt" or "error" in r:
            continue
        if _stream(records, r["card_gb"], "hymt") is r:
            continue
        theirs = _stream(records, r["card_gb"], "llama.cpp")
        against = f", {_ratio(r, theirs)} llama.cpp's ({theirs['profile']}) on that card" if theirs else ""
        lines += [
            "",
            f"hymt's single stream on a {r['card_gb']:g} GB card in {r['profile']}: {_tok_s(r)} tok/s{against}.",
        ]
    return lines


def beside(results: dict) -> list[str]:
    """The lines of other models' single streams measured in the run (bench/standard.py's `beside`), each against
    the run's model's single stream on each of its cards; none where the run had none (a run from before the results
    named their family has none)."""
    ours = results.get("family")
    streams = [
        r
        for r in results["records"]
        if r.get("scenario") == "single_stream" and r.get("engine") == "hymt" and "error" not in r
    ]
    mine = [r for r in streams if r.get("family") == ours]
    lines = []
    for other in (r for r in streams if ours and r.get("family") != ours):
        against = "; ".join(
            f"{results.get('model')}'s on {r['card_gb']:g} GB ({r['profile']}) {_tok_s(r)}, "
            f"{_ratio(r, other).removesuffix('x')} of it"
            for r in mine
        )
        lines += [
            "",
            f"Beside it in the same run: {other['family']}'s single stream on a {other['card_gb']:g} GB card "
            f"({other['profile']}), {_tok_s(other)} tok/s" + (f"; {against}." if against else "."),
        ]
    return lines


def table(results: dict) -> str:
    env = results["environment"]
    # The run's own model's records (all of a run from before the results named their family); another model's
    # (`beside`) have lines of their own.
    ours = results.get("family")
    records = [r for r in results["records"] if ours is None or r.get("family", ours) == ours]
    cards = sorted(
        {r["card_gb"] for r in records if r.get("scenario") in ("clients", "single_stream") and "card_gb" in r}
    )
    stands_for = _stands_for(records)
    lines = [
        # A run from before the 1.8B's names no model: it is the 7B's.
        f"Run {results.get('run')} on {env.get('gpu')} ({env.get('date')}; torch {env.get('torch')}, "
        f"transformers {env.get('transformers')}), random weights of the real {results.get('model', '7B')} shape, "
        f"every answer {results['new_tokens']} tokens, the official sampling; hymt through `/translate` with "
        "`source: auto`, "
        "llama.cpp's `llama-server` through `/v1/chat/completions` with the same prompt. tok/s: generated tokens "
        "per second over all clients (p50, p95: seconds per request). Single stream: one segment, decoding "
        "alone (hymt's engine in-process, greedy: its decoding steps over their wall time; `llama-bench` "
        "tg128).",
    ]
    if cards:
        lines += [
            "",
            "| card | engine | profile | 1 client tok/s (p50) | 16 clients | 64 clients (p50 / p95) "
            "| single stream tok/s | peak GPU GiB | OOM | start-up s |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
    for card in cards:
        for engine in ENGINES:
            rows = {c: _find(records, card, engine, "clients", c) for c in (1, 16, 64)}
            stream = _stream(records, card, engine)
            present = [r for r in (*rows.values(), stream) if r]
            if not present:
                continue
            lines.append(
                f"| {card:g} GB | {engine} | {present[0].get('profile')} | {_tok_s(rows[1], 'p50')} | "
                f"{_tok_s(rows[16])} | {_tok_s(rows[64], 'both')} | {_tok_s(stream)} | "
                f"{max(r.get('peak_reserved_gb') or 0 for r in present):g} | "
                f"{max(r.get('oom_events') or 0 for r in present)} | {present[0].get('startup_s', '–')} |"
            )
    if cards:
        lines += [
            "",
            "hymt against llama.cpp on the same card, in the same run" + (f" ({stands_for}):" if stands_for else ":"),
            "",
            "| card | 1 client | 64 clients | single stream |",
            "|---|---|---|---|",
        ]
    for card in cards:
        cells = [
            _ratio(_find(records, card, "hymt", s, c), _find(records, card, "llama.cpp", s, c))
            for s, c in (("clients", 1), ("clients", 64))
        ]
        cells.append(_ratio(_stream(records, card, "hymt"), _stream(records, card, "llama.cpp")))
        lines.append(f"| {card:g} GB | " + " | ".join(cells) + " |")
    lines += pinned(records)
    lines += teams(records)
    lines += beside(results)
    failed = [r for r in results["records"] if "error" in r]
    if failed:
        lines += [
            "",
            "Not measured in this run: "
            + "; ".join(
                f"{r.get('engine', '')} {r.get('card_gb', '')} "
                f"{r.get('scenario', '')} {r.get('what', '')}: {r['error']}"
                for r in failed
            ),
        ]
    return "\n".join(lines) + "\n"


def chart(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = results["records"]
    cards = sorted({r["card_gb"] for r in records if r.get("scenario") == "clients" and "card_gb" in r})
    if not cards:  # a run of the mixed and document scenarios alone: its table says it all
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, clients, title in ((axes[0], 1, "1 client"), (axes[1], 64, "64 concurrent clients")):
        width = 0.38
        for i, engine in enumerate(ENGINES[:2]):
            values = [(_find(records, c, engine, "clients", clients) or {}).get("tok_s", 0) for c in cards]
            ax.bar([x + (i - 0.5) * width for x in range(len(cards))], values, width, label=engine)
        ax.set_xticks(range(len(cards)), [f"{c:g} GB" for c in cards])
        ax.set_title(f"tokens/s, {title}")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    results = json.loads((folder / "standard.json").read_text())
    (folder / "table.md").write_text(table(results))
    chart(results, folder / "chart.png")
    print((folder / "table.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
