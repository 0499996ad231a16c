"""The benchmark's records as one markdown table and one chart.

    python bench/report.py bench/results        # reads serve-*.json and check-*.json, writes table.md and chart.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ENGINES = ("hymt", "a3db12e", "seed")
LABELS = {"hymt": "hymt", "a3db12e": "engine at a3db12e", "seed": "seed-style server"}


def load(folder: Path) -> tuple[list[dict], list[dict], dict]:
    serves = [json.loads(p.read_text()) for p in sorted(folder.glob("serve-*.json"))]
    checks = [json.loads(p.read_text()) for p in sorted(folder.glob("check-*.json"))]
    records = [r for s in serves for r in s["records"]]
    return records, checks, serves[0]["environment"] if serves else {}


def _find(records: list[dict], card: float, engine: str, clients: int) -> dict | None:
    return next((r for r in records if r["card_gb"] == card and r["engine"] == engine
                 and r.get("clients") == clients and "error" not in r), None)


def _latency(r: dict | None) -> str:
    if not r or r.get("p50_s") is None:
        return "–"
    return " / ".join((">" if r[f"{k}_censored"] else "") + f"{r[f'{k}_s']:g}" for k in ("p50", "p95"))


def _tok_s(r: dict | None) -> str:
    if not r:
        return "–"
    partial = r["completed"] < r["requests"]
    return f"{r['tok_s']:g}" + (f" ({r['completed']}/{r['requests']})" if partial else "")


def table(records: list[dict], checks: list[dict], environment: dict, new_tokens: int) -> str:
    cards = sorted({r["card_gb"] for r in records})
    lines = [f"Measured on {environment.get('gpu')} ({environment.get('date')}; torch {environment.get('torch')}, "
             f"transformers {environment.get('transformers')}, bitsandbytes {environment.get('bitsandbytes')}), "
             f"random weights of the real 7B shape, every segment {new_tokens} new tokens. tok/s: generated tokens "
             "per second over all clients; latency: seconds per request, `>` where the deadline came first "
             "(unfinished requests); a partial run shows (done/total).", "",
             "| card | engine | profile | 1 client tok/s | 16 clients tok/s | 64 clients tok/s | p50 / p95 s at 64 "
             "| 2,000-segment document tok/s | peak GPU GiB | OOM | most in flight | start-up s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for card in cards:
        for engine in ENGINES:
            rows = {c: _find(records, card, engine, c) for c in (1, 16, 64, 0)}
            present = [r for r in rows.values() if r]
            if not present:
                continue
            lines.append(
                f"| {card:g} GB | {LABELS[engine]} | {present[0].get('profile')} | {_tok_s(rows[1])} | "
                f"{_tok_s(rows[16])} | {_tok_s(rows[64])} | {_latency(rows[64])} | {_tok_s(rows[0])} | "
                f"{max(r.get('peak_reserved_gb') or 0 for r in present):g} | "
                f"{max(r.get('oom_events') or 0 for r in present)} | "
                f"{max(r.get('max_in_flight') or 0 for r in present)} | {present[0].get('startup_s')} |")
    lines += ["", "hymt against the engine at a3db12e on the same card, in the same run:", "",
              "| card | tok/s 1 client | tok/s 64 clients | p95 latency at 64 clients | document tok/s |",
              "|---|---|---|---|---|"]
    for card in cards:
        ratio = []
        for clients, key in ((1, "tok_s"), (64, "tok_s"), (64, "p95_s"), (0, "tok_s")):
            ours, theirs = _find(records, card, "hymt", clients), _find(records, card, "a3db12e", clients)
            ratio.append(f"{ours[key] / theirs[key]:.2f}x" if ours and theirs and theirs.get(key) else "–")
        lines.append(f"| {card:g} GB | " + " | ".join(ratio) + " |")
    if checks:
        lines += ["", f"The engine in-process (`bench/run.py check`, {checks[0]['environment'].get('date')}), decoding "
                  "tok/s by segments in flight:", "",
                  "| card | profile | KV cache tokens | most in flight | tok/s at 1 / 16 / 64 / most | peak GiB "
                  "| start-up s (graphs) |", "|---|---|---|---|---|---|---|"]
        for c in checks:
            speeds = " / ".join(f"{v['tok_s']:g}" for v in c["speed_by_rows"].values())
            lines.append(f"| {c['card_gb']:g} GB | {c['profile']} | {c['kv_cache_tokens']} | {c['max_in_flight']} | "
                         f"{speeds} | {c['peak_reserved_gb']} | {c['startup_s']} ({c['graphs_s']}) |")
    return "\n".join(lines) + "\n"


def chart(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cards = sorted({r["card_gb"] for r in records})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, clients, title in ((axes[0], 1, "1 client"), (axes[1], 64, "64 concurrent clients")):
        width = 0.27
        for i, engine in enumerate(ENGINES):
            values = [(_find(records, c, engine, clients) or {}).get("tok_s", 0) for c in cards]
            ax.bar([x + (i - 1) * width for x in range(len(cards))], values, width, label=LABELS[engine])
        ax.set_xticks(range(len(cards)), [f"{c:g} GB" for c in cards])
        ax.set_title(f"tokens/s, {title}")
        ax.set_yscale("log")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    fig.savefig(path, dpi=110)


def main() -> int:
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results")
    records, checks, environment = load(folder)
    new_tokens = json.loads(next(folder.glob("serve-*.json")).read_text())["new_tokens"]
    (folder / "table.md").write_text(table(records, checks, environment, new_tokens))
    chart(records, folder / "chart.png")
    print((folder / "table.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
