"""Load as users make it: N concurrent HTTP clients sending sentences to a running server, and a watcher that
samples the server process's GPU memory and its segments in flight meanwhile (ten times a second).

Every scenario has a deadline: a request that has not finished by then counts as unfinished, and a latency
percentile that falls on an unfinished request is reported as the deadline with `censored` set (a lower bound),
so a server that answers one request at a time is not flattered by the requests it never reached. A 429 is
counted apart from other failures (`refused`); both count as unanswered in the percentiles.
"""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    from hymt.family import Family

# Realistic sentences (8 to 45 words), mixed languages, with their source and a target.
SENTENCES = [
    ("The meeting has been moved to Thursday afternoon.", "en", "zh"),
    ("Please keep your luggage with you at all times while inside the terminal building.", "en", "de"),
    ("我们将在下周一发布新版本，届时所有用户都可以免费升级。", "zh", "en"),
    (
        "Les résultats de l'étude montrent une nette amélioration de la qualité de l'air dans les grandes villes.",
        "fr",
        "zh",
    ),
    (
        "Der Zug nach München fährt heute wegen Bauarbeiten mit einer Verspätung von etwa zwanzig Minuten ab.",
        "de",
        "en",
    ),
    (
        "If you have any questions about your invoice, contact our support team by email or by phone during office "
        "hours.",
        "en",
        "ja",
    ),
    (
        "El nuevo museo abrirá sus puertas al público el próximo mes con una exposición dedicada al arte "
        "contemporáneo.",
        "es",
        "en",
    ),
    ("明日の会議は午後三時から始まりますので、資料を事前に確認しておいてください。", "ja", "zh"),
    (
        "Researchers found that people who sleep less than six hours a night are more likely to catch a cold, even "
        "when other factors such as age, stress and smoking are taken into account.",
        "en",
        "zh",
    ),
    ("Проект будет завершён к концу года, если финансирование сохранится на нынешнем уровне.", "ru", "en"),
    (
        "The committee reviewed forty applications and selected three finalists, each of whom will present a "
        "detailed proposal to the board in early spring.",
        "en",
        "fr",
    ),
    ("Mohon pastikan semua dokumen sudah ditandatangani sebelum dikirim ke kantor pusat.", "id", "en"),
    (
        "Il governo ha annunciato nuove misure per sostenere le piccole imprese colpite dall'aumento dei costi "
        "dell'energia.",
        "it",
        "en",
    ),
    ("Thank you for your patience.", "en", "bo"),
    ("Bu yıl festivale otuzdan fazla ülkeden sanatçı katılacak ve etkinlikler iki hafta sürecek.", "tr", "en"),
    (
        "The software update fixes a security vulnerability that could allow an attacker to read files on the "
        "device without the user's permission, so we recommend installing it as soon as possible.",
        "en",
        "zh",
    ),
]


def document_lines(count: int) -> list[str]:
    """A document of `count` short lines (subtitle-like clauses of the English sentences), one segment each."""
    clauses = [
        c.strip()
        for text, source, _ in SENTENCES
        if source == "en"
        for c in re.split(r"[,.]", text)
        if len(c.split()) >= 3
    ]
    return [f"{clauses[i % len(clauses)]} ({i + 1})." for i in range(count)]


def metric(url: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """A counter from the server's Prometheus text (0 when absent): the first sample of `name`, or with `labels`
    the first whose labels include them (`hymt_class_tokens_out`, {"class": "batch"})."""
    return sample(httpx.get(f"{url}/metrics", timeout=10).text, name, labels)


def sample(text: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """`metric`'s reading of one Prometheus text."""
    for found in re.finditer(rf"^{name}(?:_total)?(?:{{([^}}]*)}})? ([0-9.e+-]+)$", text, re.MULTILINE):
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', found.group(1) or ""))
        if all(have.get(key) == value for key, value in (labels or {}).items()):
            return float(found.group(2))
    return 0.0


# Where hymt says an interactive request's time went (its /metrics: engine/timings.py): the HTTP request's latency
# and its segments' times inside the engine, each averaged over a scenario from the sums and counts before and after.
SERVER_TIMES = {
    "request": ("hymt_request_seconds", {"endpoint": "/translate"}),
    "queue": ("hymt_segment_queue_seconds", {"class": "interactive"}),
    "first_token": ("hymt_segment_first_token_seconds", {"class": "interactive"}),
    "token": ("hymt_segment_token_seconds", {"class": "interactive"}),
    "segment": ("hymt_segment_seconds", {"class": "interactive"}),
}


def server_times(url: str) -> dict[str, tuple[float, float]]:
    """SERVER_TIMES' sums and counts now (zeros from a server without them)."""
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return {
        key: (sample(text, f"{name}_sum", labels), sample(text, f"{name}_count", labels))
        for key, (name, labels) in SERVER_TIMES.items()
    }


def server_means(before: dict | None, after: dict | None) -> dict:
    """The means over a scenario, as `server_s` of its record: {"request": s, "queue": s, ...}; those no request
    added to are left out, and the whole key where the target has none (llama-server)."""
    if before is None or after is None:
        return {}
    means = {
        key: round((after[key][0] - before[key][0]) / (after[key][1] - before[key][1]), 4)
        for key in SERVER_TIMES
        if after[key][1] > before[key][1]
    }
    return {"server_s": means} if means else {}


class Refused(Exception):
    """A 429: the server refused the request at once (its queue, its expected wait or a rate limit)."""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class Hymt:
    """hymt (or the seed-style server) through LibreTranslate's `/translate`, as a new user sends it (`source:
    auto`, so language detection is part of the work); tokens counted by the server's /metrics."""

    def __init__(self, url: str, source_auto: bool = True, tokens_class: str | None = None):
        self.url, self.source_auto, self.tokens_class = url, source_auto, tokens_class

    def post(self, session: httpx.Client, sentence: tuple[str, str, str], timeout: float) -> int | None:
        text, source, target = sentence
        response = session.post(
            f"{self.url}/translate",
            timeout=timeout,
            json={"q": text, "source": "auto" if self.source_auto else source, "target": target},
        )
        if response.status_code == 429:
            raise Refused
        return 0 if response.status_code == 200 else None

    def tokens_out(self) -> float:
        """All generated tokens, or with `tokens_class` those of its scheduling class (interactive, batch)."""
        if self.tokens_class:
            return metric(self.url, "hymt_class_tokens_out", {"class": self.tokens_class})
        return metric(self.url, "hymt_tokens_out")

    def times(self) -> dict:
        return server_times(self.url)


class OpenAIChat:
    """llama.cpp's `llama-server` through `/v1/chat/completions`: the same official prompt hymt builds for the
    sentence with the family's prompts (the GGUF carries the same chat template), the official sampling,
    `max_tokens` as hymt's output budget and `ignore_eos` (random weights never stop, as hymt's segments run to
    their budget); tokens from each answer's `usage`."""

    def __init__(self, url: str, max_tokens: int, family: Family):
        from hymt.languages import resolve
        from hymt.prompts import user_message

        self.url, self.max_tokens = url, max_tokens
        self._message = lambda text, source, target: user_message(resolve(source), resolve(target), text, family)
        self._tokens = 0
        self._lock = threading.Lock()

    def post(self, session: httpx.Client, sentence: tuple[str, str, str], timeout: float) -> int | None:
        body = {
            "messages": [{"role": "user", "content": self._message(*sentence)}],
            "max_tokens": self.max_tokens,
            "ignore_eos": True,
            "temperature": 0.7,
            "top_k": 20,
            "top_p": 0.6,
            "repeat_penalty": 1.05,
        }
        response = session.post(f"{self.url}/v1/chat/completions", json=body, timeout=timeout)
        if response.status_code == 429:
            raise Refused
        if response.status_code != 200:
            return None
        tokens = response.json()["usage"]["completion_tokens"]
        with self._lock:
            self._tokens += tokens
        return tokens

    def tokens_out(self) -> float:
        return self._tokens

    def times(self) -> None:  # llama-server tells none
        return None


def run_clients(target, clients: int, per_client: int, deadline_s: float) -> dict:
    """`clients` threads, each sending `per_client` sentences one after another to `target` (Hymt or
    OpenAIChat). The clients are made and their threads started before the clock starts (making an httpx client
    takes ~10 ms of the load generator's own CPU), so all of them send their first request at once, as separate
    users would."""
    tokens_before, times_before = target.tokens_out(), target.times()
    latencies: list[float] = []
    unfinished = errors = refused = 0
    lock = threading.Lock()
    sessions = [httpx.Client() for _ in range(clients)]
    ready = threading.Barrier(clients + 1)
    started = deadline = 0.0

    def client(number: int) -> None:
        nonlocal unfinished, errors, refused
        ready.wait()
        with sessions[number] as session:
            for k in range(per_client):
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    with lock:
                        unfinished += per_client - k
                    return
                sentence = SENTENCES[(number * per_client + k) % len(SENTENCES)]
                t0 = time.perf_counter()
                try:
                    answered = target.post(session, sentence, remaining)
                except Refused:
                    with lock:
                        refused += 1
                    continue
                except httpx.TimeoutException:
                    with lock:
                        unfinished += per_client - k
                    return
                with lock:
                    if answered is not None:
                        latencies.append(time.perf_counter() - t0)
                    else:
                        errors += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    deadline = started + deadline_s
    ready.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    tokens = target.tokens_out() - tokens_before
    record = {
        "scenario": "clients",
        "clients": clients,
        "requests": clients * per_client,
        "completed": len(latencies),
        "errors": errors,
        "refused": refused,
        "unfinished": unfinished,
        "seconds": round(elapsed, 2),
        "tokens_out": int(tokens),
        "tok_s": round(tokens / elapsed, 1),
        **server_means(times_before, target.times()),
    }
    return {**record, **_percentiles(latencies, unfinished + errors + refused, deadline_s)}


def _percentiles(latencies: list[float], unanswered: int, censor_s: float) -> dict:
    """p50_s and p95_s over the answered requests' latencies and the unanswered ones (as infinite): a percentile
    that falls on an unanswered request is `censor_s`, with its `censored` set."""
    padded = latencies + [math.inf] * unanswered
    record: dict = {}
    for key, q in (("p50_s", 0.5), ("p95_s", 0.95)):
        value = percentile(padded, q) if padded else math.inf
        record[key] = round(value, 2) if math.isfinite(value) else round(censor_s, 2)
        record[key.replace("_s", "_censored")] = not math.isfinite(value)
    return record


def run_window(target, clients: int, window_s: float, finish_s: float, cap: int = 1000) -> dict:
    """`clients` threads, each sending sentences one after another to `target` (Hymt or OpenAIChat) for
    `window_s` seconds, at most `cap` each (so that the loop ends by itself even where every answer is at once).
    A request is sent only inside the window and may finish until `finish_s` after its end; one unanswered then is
    unfinished (it took at least `finish_s`: a percentile that falls on it is `finish_s`, censored). tok_s: the
    target's tokens over the seconds from the first request to the last answer. The clients are made before the
    clock starts, as in run_clients."""
    tokens_before, times_before = target.tokens_out(), target.times()
    latencies: list[float] = []
    sent = unfinished = errors = refused = 0
    lock = threading.Lock()
    sessions = [httpx.Client() for _ in range(clients)]
    ready = threading.Barrier(clients + 1)
    started = 0.0

    def client(number: int) -> None:
        nonlocal sent, unfinished, errors, refused
        ready.wait()
        with sessions[number] as session:
            for k in range(cap):
                now = time.perf_counter()
                if now >= started + window_s:
                    return
                with lock:
                    sent += 1
                try:
                    answered = target.post(
                        session, SENTENCES[(number + k) % len(SENTENCES)], started + window_s + finish_s - now
                    )
                except Refused:
                    with lock:
                        refused += 1
                    continue
                except httpx.TimeoutException:
                    with lock:
                        unfinished += 1
                    return
                except httpx.HTTPError:
                    answered = None
                with lock:
                    if answered is not None:
                        latencies.append(time.perf_counter() - now)
                    else:
                        errors += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    ready.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    tokens = target.tokens_out() - tokens_before
    record = {
        "clients": clients,
        "requests": sent,
        "completed": len(latencies),
        "errors": errors,
        "refused": refused,
        "unfinished": unfinished,
        "seconds": round(elapsed, 2),
        "tokens_out": int(tokens),
        "tok_s": round(tokens / elapsed, 1),
        **server_means(times_before, target.times()),
    }
    return {**record, **_percentiles(latencies, unfinished + errors + refused, finish_s)}


class Watcher:
    """Samples the server process's GPU memory (NVML; torch's view from /health when NVML cannot see the
    process) and its segments in flight (/health)."""

    def __init__(self, url: str, pid: int):
        self.url, self.pid = url, pid
        self.peak_gb = 0.0
        self.max_in_flight = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Watcher:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import pynvml

        try:
            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except pynvml.NVMLError:
            handles = []
        with httpx.Client() as session:
            while not self._stop.wait(0.1):
                used = [
                    p.usedGpuMemory
                    for h in handles
                    for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                    if p.pid == self.pid and p.usedGpuMemory
                ]
                try:
                    health = session.get(f"{self.url}/health", timeout=2).json()
                except (httpx.HTTPError, ValueError):
                    continue
                gb = used[0] / 2**30 if used else health.get("gpu_memory_used_gb") or 0.0
                self.peak_gb = max(self.peak_gb, gb)
                self.max_in_flight = max(
                    self.max_in_flight, health.get("in_flight", health.get("running_segments", 0)) or 0
                )
        if handles:
            pynvml.nvmlShutdown()


def stop(process: subprocess.Popen, timeout: float = 30) -> int | str:
    """A server stopped as supervisord stops it: SIGTERM, then SIGKILL after `timeout` s. Its exit code, or how it
    was killed."""
    process.terminate()
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        return f"killed after {timeout:g} s"


def wait_healthy(url: str, process: subprocess.Popen, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            response = httpx.get(f"{url}/health", timeout=2)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"not healthy after {timeout} s")
