"""Turn the GPU run's part files into one record per simulated card and tier (JSON), a markdown table and a chart."""

from __future__ import annotations

import json
from pathlib import Path

FIELDS = ("card_gb", "profile", "weights", "kv_cache", "attention", "batch_tokens", "load_s", "peak_allocated_gb",
          "peak_reserved_gb", "oom_events", "tok_s_batch1", "tok_s_concurrent16")
BASELINE = ("baseline_loaded", "baseline_tok_s_batch1", "baseline_tok_s_concurrent16", "baseline_peak_allocated_gb",
            "baseline_peak_reserved_gb", "baseline_oom_events", "baseline_load_error")


def _ratio(ours, base):
    return round(ours / base, 2) if ours and base else None


MAIN_PARTS = ("part_a.json", "part_b.json")


def write_report(out: Path) -> None:
    """Parts a and b make the main table (every card, every tier); later parts, run after engine changes, are
    reported in their own table with the ratios of their own run."""
    parts = [json.loads((out / name).read_text()) for name in MAIN_PARTS]
    later = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("part_*.json")) if p.name not in MAIN_PARTS}
    env = parts[0]["environment"]
    new_tokens = parts[0]["new_tokens"]
    cards: dict[float, dict] = {}
    tiers, extras = [], {}
    for part in parts:
        for rec in part["records"]:
            card = rec["card_gb"]
            if rec["kind"] == "baseline":
                cards.setdefault(card, {}).update({k: rec.get(k) for k in BASELINE})
            elif rec["kind"] == "lora":
                extras["lora_on_nf4"] = rec
            elif rec.get("forced_profile"):
                tiers.append(rec)
            elif rec.get("empty_cache_after_batch"):
                extras["empty_cache_after_batch"] = rec
            else:
                cards.setdefault(card, {}).update({k: rec.get(k) for k in FIELDS + ("decision_reason", "warmup",
                                                                                   "error", "refused")})
    records = []
    for card in sorted(cards):
        rec = {"card_gb": card, **cards[card]}
        for key in BASELINE:
            rec.setdefault(key, None)
        if not rec.get("baseline_loaded"):
            for key in ("baseline_tok_s_batch1", "baseline_tok_s_concurrent16", "baseline_peak_allocated_gb",
                        "baseline_peak_reserved_gb", "baseline_oom_events"):
                rec[key] = None
        rec["ratio_batch1"] = _ratio(rec.get("tok_s_batch1"), rec["baseline_tok_s_batch1"])
        rec["ratio_concurrent16"] = _ratio(rec.get("tok_s_concurrent16"), rec["baseline_tok_s_concurrent16"])
        rec.update(environment=env, new_tokens=new_tokens)
        records.append(rec)
        (out / f"card_{card:g}gb.json").write_text(json.dumps(rec, indent=2) + "\n")
    summary = {"environment": env, "new_tokens": new_tokens, "cards": records, "tiers_on_80gb": tiers, **extras,
               "later_runs": {name: part["records"] for name, part in later.items()}}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.md").write_text(_table(records, tiers, extras, env, new_tokens) + _later_tables(later))
    _chart(records, out / "chart.png")


def _attention(r: dict):
    """Records made before the engine chose its attention kernels say "sdpa" for what torch ran as cuDNN's kernels
    on the H200 (part f's profile shows them), which the engine now turns off; name them apart."""
    if r.get("attention") == "sdpa" and "cudnn_attention" not in r:
        return "sdpa+cudnn"
    return r.get("attention")


def _fmt(value, unit=""):
    return "–" if value is None else f"{value}{unit}"


def _table(records, tiers, extras, env, new_tokens) -> str:
    lines = [f"Measured on {env['gpu']} (torch {env['torch']}, transformers {env['transformers']}, bitsandbytes "
             f"{env['bitsandbytes']}), random weights of the real 7B shape, {new_tokens} new tokens per request, "
             "each card simulated by capping the process's GPU memory. Baseline: plain transformers, bf16, "
             "`generate`, one request at a time. Reproduce: `bench/README.md`.", "",
             "| card | profile | attention | peak alloc / reserved GiB | OOM | tok/s batch 1 | tok/s 16 concurrent "
             "| baseline tok/s batch 1 | baseline tok/s 16 concurrent | ratio batch 1 | ratio 16 concurrent |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        base1 = _fmt(r["baseline_tok_s_batch1"]) if r.get("baseline_loaded") else "does not load"
        base16 = _fmt(r["baseline_tok_s_concurrent16"]) if r.get("baseline_loaded") else "does not load"
        lines.append(f"| {r['card_gb']:g} GB | {_fmt(r.get('profile'))} | {_fmt(_attention(r))} | "
                     f"{_fmt(r.get('peak_allocated_gb'))} / {_fmt(r.get('peak_reserved_gb'))} | "
                     f"{_fmt(r.get('oom_events'))} | {_fmt(r.get('tok_s_batch1'))} | "
                     f"{_fmt(r.get('tok_s_concurrent16'))} | {base1} | {base16} | {_fmt(r['ratio_batch1'], 'x')} | "
                     f"{_fmt(r['ratio_concurrent16'], 'x')} |")
    if tiers:
        lines += ["", "Every tier forced on the 80 GB card:", "",
                  "| profile | weights | KV cache | peak alloc / reserved GiB | OOM | tok/s batch 1 "
                  "| tok/s 16 concurrent |",
                  "|---|---|---|---|---|---|---|"]
        for t in tiers:
            lines.append(f"| {t.get('profile', t.get('forced_profile'))} | {_fmt(t.get('weights'))} | "
                         f"{_fmt(t.get('kv_cache'))} | {_fmt(t.get('peak_allocated_gb'))} / "
                         f"{_fmt(t.get('peak_reserved_gb'))} | {_fmt(t.get('oom_events'))} | "
                         f"{_fmt(t.get('tok_s_batch1'))} | {_fmt(t.get('tok_s_concurrent16'))} |")
    return "\n".join(lines) + "\n"


def _batches(sizes: dict | None) -> str:
    """{"13": 1, "3": 1} -> "13 + 3": the batches the 16 concurrent requests ran in."""
    if not sizes:
        return "–"
    return " + ".join(size for size, n in sorted(sizes.items(), key=lambda kv: -int(kv[0])) for _ in range(n))


def _later_tables(later: dict) -> str:
    lines = []
    for name, part in later.items():
        records = part["records"]
        base = {r["card_gb"]: r for r in records if r["kind"] == "baseline"}
        how = part.get("how", "same commands, engine as committed with it")
        lines += ["", f"Later run `{name}` ({how}):", ""]
        for r in records:
            if r["kind"] == "quantize" and "error" not in r:
                lines.append(_quantize_line(r))
            elif r["kind"] == "profile" and "rows" in r:  # a profile stopped by its time limit keeps its figures
                lines.append(_profile_line(r))
            elif "error" in r:
                lines.append(f"- `{r['kind']}` at {r['card_gb']:g} GB ({r.get('checkpoint')}): {r.get('error')}")
        served = [r for r in records if r["kind"] == "ours" and "error" not in r]
        if not served:
            continue
        if lines[-1]:
            lines.append("")
        lines += ["| card | checkpoint | profile | attention | linear layers | peak alloc / reserved GiB | OOM "
                  "| tok/s batch 1 | tok/s 16 concurrent | batches for the 16 | time in generate | baseline batch 1 "
                  "| baseline 16 concurrent | ratio 16 concurrent |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in served:
            b = base.get(r["card_gb"], {})
            lines.append(f"| {r['card_gb']:g} GB | {r.get('checkpoint', 'bf16')} | {r.get('profile')} | "
                         f"{_fmt(_attention(r))} | {_fmt(r.get('linear_kernel'))} | "
                         f"{_fmt(r.get('peak_allocated_gb'))} / {_fmt(r.get('peak_reserved_gb'))} | "
                         f"{_fmt(r.get('oom_events'))} | {r.get('tok_s_batch1')} | "
                         f"{r.get('tok_s_concurrent16')} | {_batches(r.get('concurrent16_batches'))} | "
                         f"{_fmt(r.get('concurrent16_generate_share'))} | {_fmt(b.get('baseline_tok_s_batch1'))} | "
                         f"{_fmt(b.get('baseline_tok_s_concurrent16'))} | "
                         f"{_fmt(_ratio(r.get('tok_s_concurrent16'), b.get('baseline_tok_s_concurrent16')), 'x')} |")
    return "\n".join(lines) + ("\n" if lines else "")


def _quantize_line(r: dict) -> str:
    return (f"- `hymt quantize` of the 7B (gptqmodel {r['gptqmodel']}, {r['bits']}-bit, group {r['group_size']}, "
            f"{r['calibration_prompts']} calibration prompts): {r['quantize_s']} s, peak reserved "
            f"{r['peak_reserved_gb']} GiB; checkpoint {r['checkpoint_gib']} GiB (bf16: {r['bf16_checkpoint_gib']} GiB)")


def _profile_line(r: dict) -> str:
    figures = ", ".join(f"{key.removeprefix('ms_per_step_').replace('_', ' ')} {value}"
                        for key, value in r.items() if key.startswith("ms_per_step_"))
    done = f" (stopped: {r['error']})" if "error" in r else ""
    return f"- ms per decoding step, {r.get('rows')} rows on the {r['card_gb']:g} GB card{done}: {figures}"


def _chart(records, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['card_gb']:g} GB\n{r.get('profile') or '-'}" for r in records]
    x = range(len(records))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    w = 0.38
    left.bar([i - w / 2 for i in x], [r.get("tok_s_concurrent16") or 0 for r in records], w, label="hymt")
    left.bar([i + w / 2 for i in x], [r["baseline_tok_s_concurrent16"] or 0 for r in records], w,
             label="plain transformers (0 = does not load)")
    left.set_title("Aggregate tokens/s, 16 concurrent requests")
    left.set_xticks(list(x), labels)
    left.legend()
    right.bar([i - w / 2 for i in x], [r.get("peak_reserved_gb") or 0 for r in records], w, label="hymt peak reserved")
    right.bar([i + w / 2 for i in x], [r["baseline_peak_reserved_gb"] or 0 for r in records], w,
              label="baseline peak reserved")
    right.plot(list(x), [r["card_gb"] for r in records], "k_", markersize=30, label="card size")
    right.set_title("GPU memory (GiB)")
    right.set_xticks(list(x), labels)
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
