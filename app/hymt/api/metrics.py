"""Prometheus metrics: request counters and latencies observed by the app, engine figures read at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, InfoMetricFamily

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class Metrics:
    def __init__(self, service):
        self.registry = CollectorRegistry()
        self.requests = Counter("hymt_requests", "HTTP requests by endpoint and status", ["endpoint", "status"],
                                registry=self.registry)
        self.latency = Histogram("hymt_request_seconds", "HTTP request latency by endpoint", ["endpoint"],
                                 registry=self.registry,
                                 buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
        self.registry.register(_EngineCollector(service))


class _EngineCollector:
    def __init__(self, service):
        self.service = service

    def collect(self):
        service = self.service
        engine = service.engine
        queue = GaugeMetricFamily("hymt_queue_depth", "Segments waiting for the engine")
        queue.add_metric([], engine.queue_depth if engine else 0)
        yield queue
        used_gb, total_gb = service.gpu_memory()
        used = GaugeMetricFamily("hymt_gpu_memory_used_bytes", "GPU memory held by the server process")
        used.add_metric([], used_gb * 2 ** 30)
        yield used
        total = GaugeMetricFamily("hymt_gpu_memory_total_bytes", "GPU memory of the card (0 without a GPU)")
        total.add_metric([], (total_gb or 0) * 2 ** 30)
        yield total
        decision = service.decision
        info = InfoMetricFamily("hymt_profile", "The active memory profile")
        info.add_metric([], {"profile": decision.profile, "weights": decision.weights, "kv_cache": decision.kv_cache,
                             "device": decision.device, "batch_tokens": str(decision.batch_tokens),
                             "attention": engine.attention if engine else "loading"})
        yield info
        if engine is None:
            return
        stats = engine.runner.stats
        for name, doc, value in (("hymt_tokens_in", "Prompt tokens sent to the model", stats.tokens_in),
                                 ("hymt_tokens_out", "Tokens generated", stats.tokens_out),
                                 ("hymt_segments", "Segments translated", stats.segments),
                                 ("hymt_oom_recoveries", "Out-of-memory errors recovered by splitting a batch",
                                  stats.oom_events)):
            counter = CounterMetricFamily(name, doc)
            counter.add_metric([], value)
            yield counter
        buckets = [(str(bound), sum(n for size, n in stats.batch_sizes.items() if size <= bound))
                   for bound in BATCH_BUCKETS] + [("+Inf", stats.batches)]
        sizes = HistogramMetricFamily("hymt_batch_size", "Segments per model batch")
        sizes.add_metric([], buckets, sum_value=stats.segments)
        yield sizes
