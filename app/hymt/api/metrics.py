"""Prometheus metrics: request counters and latencies observed by the app, engine figures read at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily

from .health import figures


class Metrics:
    def __init__(self, service):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "hymt_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "hymt_request_seconds",
            "HTTP request latency by endpoint",
            ["endpoint"],
            registry=self.registry,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
        )
        self.registry.register(_EngineCollector(service))


class _EngineCollector:
    def __init__(self, service):
        self.service = service

    def collect(self):
        service = self.service
        now = figures(service)
        engine = now.engine
        yield GaugeMetricFamily(
            "hymt_queue_depth", "Segments waiting for the engine", engine.queue_depth if engine else 0
        )
        yield GaugeMetricFamily(
            "hymt_gpu_memory_used_bytes", "GPU memory held by the server process", now.gpu_memory_used_gb * 2**30
        )
        yield GaugeMetricFamily(
            "hymt_gpu_memory_total_bytes",
            "GPU memory of the card (0 without a GPU)",
            (now.gpu_memory_total_gb or 0) * 2**30,
        )
        decision = service.decision
        info = InfoMetricFamily("hymt_profile", "The active memory profile")
        info.add_metric(
            [],
            {
                "profile": decision.profile,
                "weights": decision.weights,
                "kv_cache": decision.kv_cache,
                "device": decision.device,
                "attention": now.attention or "starting",
                "phase": service.phase,
            },
        )
        yield info
        for name, doc, value in (
            ("hymt_kv_cache_tokens", "Tokens the KV cache holds", decision.kv_cache_tokens),
            ("hymt_kv_cache_bytes", "Bytes of GPU memory given to the KV cache", decision.kv_cache_bytes),
            ("hymt_max_in_flight", "Segments decoded together at most", now.max_in_flight),
            ("hymt_in_flight", "Segments being prefilled or decoded", engine.in_flight if engine else 0),
            (
                "hymt_kv_cache_used_tokens",
                "KV cache tokens held by segments in flight",
                engine.kv_used_tokens if engine else 0,
            ),
            (
                "hymt_startup_seconds",
                "Seconds from start to ready: loading, compiling, graphs, warm-up",
                now.startup.total_s if now.startup else 0,
            ),
            ("hymt_draining", "1 while shutting down: new requests get 503", int(service.draining)),
        ):
            yield GaugeMetricFamily(name, doc, value)
        refused = CounterMetricFamily(
            "hymt_refused",
            "Requests refused at once with 429: expected wait or full queue, rate limit",
            labels=["reason"],
        )
        refused.add_metric(["rate_limit"], service.limits.refused)
        if engine is None:
            yield refused
            return
        refused.add_metric(["queue"], engine.refused)
        yield refused
        yield CounterMetricFamily("hymt_admitted", "Requests whose segments were queued", engine.admitted)
        for name, doc, value in (
            (
                "hymt_expected_wait_seconds",
                "Expected wait before the latest interactive request's segments start",
                engine.expected_wait_s,
            ),
            (
                "hymt_max_queue_wait_seconds",
                "Longest expected wait admitted (HYMT_MAX_QUEUE_WAIT_S)",
                engine.max_wait_s,
            ),
            (
                "hymt_throughput_tokens_per_second",
                "Output tokens per second under load, measured (the warm-up's figure before any)",
                engine.tokens_per_s,
            ),
        ):
            yield GaugeMetricFamily(name, doc, value)
        for name, doc, value in (
            ("hymt_tokens_in", "Prompt tokens prefilled", engine.tokens_in),
            (
                "hymt_prefix_tokens_reused",
                "Prompt tokens not prefilled: a kept prompt prefix's keys and values copied (HYMT_PREFIX_REUSE)",
                engine.prefix_tokens_reused,
            ),
            ("hymt_tokens_out", "Tokens generated", engine.tokens_out),
            ("hymt_segments", "Segments translated", engine.segments),
            ("hymt_oom_recoveries", "Out-of-memory errors recovered by requeueing segments", engine.oom_events),
            ("hymt_preemptions", "Segments requeued after out-of-memory", engine.preemptions),
        ):
            yield CounterMetricFamily(name, doc, value)
        by_class = CounterMetricFamily(
            "hymt_class_tokens_out", "Tokens generated, by scheduling class", labels=["class"]
        )
        waiting = GaugeMetricFamily("hymt_class_queue_depth", "Segments waiting, by scheduling class", labels=["class"])
        running = GaugeMetricFamily("hymt_class_in_flight", "Segments in flight, by scheduling class", labels=["class"])
        for name, tokens in engine.tokens_out_by_class.items():
            by_class.add_metric([name], tokens)
            waiting.add_metric([name], engine.waiting[name])
            running.add_metric([name], engine.running[name])
        yield by_class
        yield waiting
        yield running
        for kind in ("prefill", "decode"):
            yield CounterMetricFamily(f"hymt_{kind}_steps", f"Model steps of kind {kind}", engine.steps[kind])
            yield CounterMetricFamily(f"hymt_{kind}_seconds", f"Seconds spent in {kind} steps", engine.step_s[kind])
        yield from _timings(engine.timings)


# The engine's segment times (engine/timings.py) by phase: the metric's name and what it measures.
TIMINGS = {
    "queue": (
        "hymt_segment_queue_seconds",
        "Seconds from a segment's posting to the engine until it took a row, by scheduling class",
    ),
    "first_token": (
        "hymt_segment_first_token_seconds",
        "Seconds from a segment's posting to its first token (the queue, then its prefill), by class",
    ),
    "token": (
        "hymt_segment_token_seconds",
        "A segment's mean seconds between its tokens after the first (its decoding steps), by class",
    ),
    "segment": ("hymt_segment_seconds", "Seconds from a segment's posting to its last token, by class"),
}


def _timings(timings: dict):
    families = {phase: HistogramMetricFamily(name, doc, labels=["class"]) for phase, (name, doc) in TIMINGS.items()}
    for (phase, cls), histogram in timings.items():
        families[phase].add_metric([cls], histogram.cumulative(), histogram.total)
    yield from families.values()
