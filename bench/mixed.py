"""Teams: documents and interactive sentences on one server. hymt's `document` (one 2,000-line document as a job
on an idle server, followed until done) and `mixed` (4 such documents alone, then 4 fresh ones beside 16
interactive clients), and llama-server's `mixed` under the same load, its documents sent one line a request.

hymt's documents are jobs (`POST /api/jobs`, a .txt file whose lines are its segments; `GET /api/jobs/{id}`;
`DELETE` cancels), their tokens the batch class's (`hymt_class_tokens_out{class="batch"}` in /metrics), the
interactive sentences `/translate`'s (class interactive). Every phase is bounded in time and ends by itself; each
function returns a record of the shape bench/run.py describes, or one with an `error`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from load import Hymt, OpenAIChat, Refused, document_lines, metric, run_window

if TYPE_CHECKING:
    from hymt.family import Family

POLL_S = 0.2  # how often a job is read
START_S = 30  # how long hymt's documents may take to have a segment done
IDLE_S = 20  # how long hymt may take to be idle after its jobs are cancelled
SETTLE_S = 2.0  # llama-server: the documents' first prefill, before the windows start
ACTIVE = ("queued", "translating")


@dataclass(frozen=True)
class Mixed:
    """The mixed scenario: `documents` documents of `lines` lines alone for `alone_s` seconds, then (hymt: fresh
    ones) beside `interactive` clients for `window_s`."""

    alone_s: float = 20
    window_s: float = 40
    lines: int = 2000
    documents: int = 4
    interactive: int = 16
    connections: int = 12  # llama-server: each document's requests at once (4 x 12 + 16: its 64 slots)
    finish_s: float = 15  # how long a sentence sent inside the window may take to finish


def settings(args) -> Mixed:
    return Mixed(alone_s=args.mixed_alone, window_s=args.mixed_window, lines=args.document_segments)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:400]


def _text(lines: int) -> bytes:
    return ("\n".join(document_lines(lines)) + "\n").encode("utf-8")


class Jobs:
    """hymt's document jobs, and its batch class's generated tokens."""

    def __init__(self, url: str, session: httpx.Client):
        self.url, self.session = url, session

    def submit(self, text: bytes) -> str:
        response = self.session.post(
            f"{self.url}/api/jobs",
            files={"file": ("document.txt", text, "text/plain")},
            data={"source": "en", "target": "de"},
            timeout=60,
        )
        if response.status_code != 202:
            raise RuntimeError(f"POST /api/jobs answered {response.status_code}: {response.text[:200]}")
        return response.json()["id"]

    def get(self, job: str) -> dict:
        response = self.session.get(f"{self.url}/api/jobs/{job}", timeout=10)
        response.raise_for_status()
        return response.json()

    def batch_tokens(self) -> float:
        return metric(self.url, "hymt_class_tokens_out", {"class": "batch"})

    def prompt_tokens(self) -> tuple[float, float]:
        """Prompt tokens prefilled, and those not prefilled because a kept prefix's were copied (HYMT_PREFIX_REUSE)."""
        return metric(self.url, "hymt_tokens_in"), metric(self.url, "hymt_prefix_tokens_reused")

    def prompt_figures(self, before: tuple[float, float]) -> dict:
        """The record's prompt figures since `before` (a prompt_tokens() reading)."""
        prefilled, reused = (now - then for now, then in zip(self.prompt_tokens(), before))
        return {"prompt_tokens_prefilled": int(prefilled), "prefix_tokens_reused": int(reused)}

    def follow(self, jobs: list[str], until: float, enough) -> list[dict]:
        """The jobs read every POLL_S until `enough(states)` or the clock passes `until`; their last states."""
        while True:
            states = [self.get(job) for job in jobs]
            if enough(states) or time.perf_counter() >= until:
                return states
            time.sleep(POLL_S)

    def cancel(self, jobs: list[str], idle_s: float) -> float:
        """The jobs cancelled, then the server followed until they have ended and nothing is queued or in flight
        (at most `idle_s`): the seconds that took."""
        started = time.perf_counter()
        for job in jobs:
            try:
                self.session.delete(f"{self.url}/api/jobs/{job}", timeout=10)
            except httpx.HTTPError:
                pass
        until = started + idle_s
        try:
            self.follow(jobs, until, lambda states: all(s["status"] not in ACTIVE for s in states))
            while time.perf_counter() < until:
                health = self.session.get(f"{self.url}/health", timeout=5).json()
                if not health.get("queue_depth") and not health.get("in_flight"):
                    break
                time.sleep(POLL_S)
        except (httpx.HTTPError, ValueError):
            pass
        return round(time.perf_counter() - started, 2)


def document(url: str, lines: int, deadline_s: float) -> dict:
    """One document of `lines` lines submitted as a job on an idle server, read until it has ended or
    `deadline_s` passed (then cancelled, `completed` false). tok_s: the batch class's tokens over the seconds from
    submitting it to seeing it done (or to the deadline)."""
    record: dict = {"scenario": "document", "via": "/api/jobs", "clients": 1, "p50_s": None, "p95_s": None}
    try:
        with httpx.Client() as session:
            jobs = Jobs(url, session)
            before, prompts_before = jobs.batch_tokens(), jobs.prompt_tokens()
            started = time.perf_counter()
            job = jobs.submit(_text(lines))
            state = {"status": "queued"}
            try:
                (state,) = jobs.follow([job], started + deadline_s, lambda s: s[0]["status"] not in ACTIVE)
                elapsed = time.perf_counter() - started
                tokens = jobs.batch_tokens() - before
                record.update(jobs.prompt_figures(prompts_before))
            finally:
                if state["status"] in ACTIVE:  # past the deadline (or failed): the server idle again
                    jobs.cancel([job], IDLE_S)
    except Exception as exc:  # noqa: BLE001 - a scenario that fails is a result too
        return {**record, "error": _error(exc)}
    record.update(
        completed=state["status"] == "done",
        status=state["status"],
        segments_done=state.get("segments_done"),
        segments_total=state.get("segments_total"),
        seconds=round(elapsed, 2),
        tokens_out=int(tokens),
        tok_s=round(tokens / elapsed, 1),
    )
    if state["status"] == "error":
        record["error"] = f"job: {state.get('error')}"[:400]
    return record


def hymt_mixed(url: str, mixed: Mixed) -> dict:
    """hymt's mixed scenario: the documents alone for `alone_s` (then cancelled), then fresh ones beside the
    interactive clients (`/translate`, as run_clients sends them) for `window_s` (then cancelled: the server is
    idle again)."""
    record = _head(mixed)
    try:
        with httpx.Client() as session:
            jobs = Jobs(url, session)
            prompts_before = jobs.prompt_tokens()
            alone, _ = _beside_documents(jobs, mixed, lambda: time.sleep(mixed.alone_s))
            target = Hymt(url, tokens_class="interactive")
            documents, interactive = _beside_documents(
                jobs, mixed, lambda: run_window(target, mixed.interactive, mixed.window_s, mixed.finish_s)
            )
            record.update(jobs.prompt_figures(prompts_before))
        if interactive is None:
            raise RuntimeError("the interactive clients' window returned no record")
    except Exception as exc:  # noqa: BLE001 - a scenario that fails is a result too
        return {**record, "error": _error(exc)}
    return {**record, **_teams(interactive, alone["tok_s"], documents["tok_s"]), **documents["more"]}


def _beside_documents(jobs: Jobs, mixed: Mixed, during) -> tuple[dict, dict | None]:
    """The documents submitted as jobs, followed until one of their segments is done (the batch is full), then
    `during()` timed: the batch class's tokens over it, and what it returned; the jobs cancelled after."""
    text = _text(mixed.lines)
    submitted: list[str] = []
    try:
        for _ in range(mixed.documents):
            submitted.append(jobs.submit(text))
        states = jobs.follow(
            submitted,
            time.perf_counter() + START_S,
            lambda states: any(s.get("segments_done") or s["status"] not in ACTIVE for s in states),
        )
        if not any(s.get("segments_done") for s in states):
            raise TimeoutError(f"no segment of the documents done after {START_S} s: {states[0]}")
        before, started = jobs.batch_tokens(), time.perf_counter()
        result = during()
        elapsed = time.perf_counter() - started
        tokens = jobs.batch_tokens() - before
        ended = [jobs.get(job) for job in submitted]
    finally:
        cancel_s = jobs.cancel(submitted, IDLE_S)
    failed = [s.get("error") for s in ended if s["status"] == "error"]
    if failed:
        raise RuntimeError(f"a document failed: {failed[0]}")
    more = {"documents_finished": sum(s["status"] == "done" for s in ended), "cancel_s": cancel_s}
    return {"tok_s": tokens / elapsed, "seconds": elapsed, "more": more}, result


def _head(mixed: Mixed) -> dict:
    return {
        "scenario": "mixed",
        "clients": mixed.interactive,
        "documents": mixed.documents,
        "document_lines": mixed.lines,
        "alone_s": mixed.alone_s,
        "window_s": mixed.window_s,
    }


def _teams(interactive: dict, alone_tok_s: float, documents_tok_s: float) -> dict:
    """The mixed record's figures: the interactive clients' (tok_s, p50_s, p95_s are theirs, and hymt's account of
    where their time went, server_s) and the documents'."""
    return {
        **{key: interactive[key] for key in ("server_s",) if key in interactive},
        "tok_s": interactive["tok_s"],
        "p50_s": interactive["p50_s"],
        "p95_s": interactive["p95_s"],
        "p50_censored": interactive["p50_censored"],
        "p95_censored": interactive["p95_censored"],
        "seconds": interactive["seconds"],
        "interactive_requests": interactive["requests"],
        "interactive_completed": interactive["completed"],
        "interactive_429": interactive["refused"],
        "interactive_errors": interactive["errors"],
        "interactive_unfinished": interactive["unfinished"],
        "interactive_tokens_out": interactive["tokens_out"],
        "documents_tok_s": round(documents_tok_s, 1),
        "documents_alone_tok_s": round(alone_tok_s, 1),
        "documents_share": round(documents_tok_s / alone_tok_s, 3) if alone_tok_s else None,
    }


class _Lines:
    """llama-server's documents: each document's lines sent in order, one a request, over `connections`
    connections at once, from start() until stop() (or a line count or the clock runs out). Each answer is kept
    with its start and end, so that a window's tokens are each answer's share of it (an answer's tokens spread
    evenly over its seconds): llama-server's answers finish in waves, which counting whole answers would not
    average out over seconds."""

    def __init__(self, target: OpenAIChat, mixed: Mixed, until: float):
        self.target, self.mixed, self.until = target, mixed, until
        self.answers: list[tuple[float, float, int]] = []
        self.errors = 0
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """The connections made (~10 ms of the load generator's CPU each), then their threads started."""
        lines = document_lines(self.mixed.lines)
        for _ in range(self.mixed.documents):
            cursor = iter(range(len(lines)))  # the document's next line, shared by its connections
            self._threads += [
                threading.Thread(target=self._send, args=(lines, cursor, httpx.Client()), daemon=True)
                for _ in range(self.mixed.connections)
            ]
        for thread in self._threads:
            thread.start()

    def _send(self, lines: list[str], cursor, session: httpx.Client) -> None:
        with session:
            while not self._halt.is_set():
                with self._lock:
                    number = next(cursor, None)
                remaining = self.until - time.perf_counter()
                if number is None or remaining <= 0:
                    return
                started = time.perf_counter()
                try:
                    tokens = self.target.post(session, (lines[number], "en", "de"), remaining)
                except httpx.TimeoutException:
                    return
                except (Refused, httpx.HTTPError):
                    tokens = None
                with self._lock:
                    if tokens is None:
                        self.errors += 1
                    else:
                        self.answers.append((started, time.perf_counter(), tokens))

    def stop(self) -> None:
        """No new request; the ones in flight answered (each bounded by `until`)."""
        self._halt.set()
        for thread in self._threads:
            thread.join()

    def tok_s(self, start: float, end: float) -> float:
        tokens = sum(
            n * max(0.0, min(b, end) - max(a, start)) / (b - a) if b > a else n * (start <= b <= end)
            for a, b, n in self.answers
        )
        return tokens / (end - start) if end > start else 0.0


def llama_mixed(url: str, family: Family, new_tokens: int, mixed: Mixed) -> dict:
    """llama-server's mixed scenario: the documents as `documents` x `connections` requests at once, one line
    each, alone for `alone_s` and then, without a pause, beside the interactive clients (its official prompt, as
    run_clients sends them) for `window_s`; tokens from the answers' usage."""
    record = {**_head(mixed), "connections": mixed.connections}
    began = time.perf_counter()
    lines = _Lines(
        OpenAIChat(url, new_tokens, family),
        mixed,
        began + SETTLE_S + mixed.alone_s + mixed.window_s + 2 * mixed.finish_s,
    )
    try:
        lines.start()
        time.sleep(SETTLE_S)
        alone_from = time.perf_counter()
        time.sleep(mixed.alone_s)
        alone_to = time.perf_counter()
        interactive = run_window(OpenAIChat(url, new_tokens, family), mixed.interactive, mixed.window_s, mixed.finish_s)
        window_to = time.perf_counter()
    except Exception as exc:  # noqa: BLE001 - a scenario that fails is a result too
        return {**record, "error": _error(exc)}
    finally:
        lines.stop()
    if not lines.answers:
        return {**record, "error": f"no document line answered ({lines.errors} errors)"}
    alone, documents = lines.tok_s(alone_from, alone_to), lines.tok_s(alone_to, window_to)
    return {**record, **_teams(interactive, alone, documents), "documents_errors": lines.errors}
