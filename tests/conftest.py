"""Shared fixtures: one tiny test model per run, and a CPU translator on it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest

from hymt.settings import Settings

# One thread per process for torch (OpenMP and MKL): the test run starts a dozen processes on torch at once (the
# workers and their servers) on a 2-core machine, where each process's pool of one thread per core spins for its
# share and oversubscribes the cores: a server's document took 3 to 4 times as long beside three busy processes as
# with one thread, which is as fast on an idle machine. Set before torch is imported; the servers and commands the
# tests start inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ARTIFACTS = Path(__file__).parent / "artifacts"
# How long a browser test waits for the page (Playwright waits 30 s unless told).
BROWSER_WAIT_MS = 90_000

# The tiers run side by side on a loaded 2-core machine in CI, where httpx's default of 5 s (for the calls that name
# no timeout) failed answers that were only slow. httpx's functions and clients share one default Timeout object, so
# changing it in place gives every such call two minutes.
for _phase in ("connect", "read", "write", "pool"):
    setattr(httpx._config.DEFAULT_TIMEOUT_CONFIG, _phase, 120.0)


# The files that take minutes beside the others on a 2-core machine, longest first (seconds from a run's --durations:
# schemathesis; the interpreted kernels; documents and restarts; the page in Chromium; replicas; the image; ...).
# tests/run.sh hands its workers whole files in the order collected (--no-loadscope-reorder), so these start first
# and the short files fill in after them, where otherwise a long one started last kept one worker busy while the
# others had nothing left. A name that is no longer a file is passed over.
LONG_FILES = [
    "server/test_hostile_requests.py",
    "engine/test_kernels.py",
    "server/test_jobs.py",
    "server/test_browser.py",
    "system/test_image.py",
    "server/test_replicas.py",
    "server/test_hostile_documents.py",
    "system/test_appliance.py",
    "server/test_small_model.py",
    "server/test_cli.py",
    "server/test_api.py",
    "engine/test_family.py",
    "server/test_reliability.py",
    "server/test_docs.py",
]


def pytest_collection_modifyitems(config, items):
    """On an xdist worker, the long files' tests first (LONG_FILES), each file's in its own order, then the rest as
    collected."""
    if not hasattr(config, "workerinput"):
        return
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    here = Path(__file__).parent

    def place(item) -> int:
        name = item.path.relative_to(here).as_posix() if item.path.is_relative_to(here) else ""
        return rank.get(name, len(LONG_FILES))

    items.sort(key=place)


@pytest.fixture(scope="session")
def test_model(tmp_path_factory) -> Path:
    from hymt.testmodel import make_test_model

    existing = os.environ.get("HYMT_TEST_MODEL")
    if existing and Path(existing, "config.json").is_file():
        return Path(existing)
    return make_test_model(tmp_path_factory.mktemp("model") / "tiny-hunyuan-mt")


@pytest.fixture(scope="session")
def cpu_settings(test_model, tmp_path_factory) -> Settings:
    # Short outputs keep the random-weight model fast; greedy keeps it deterministic. Document jobs are kept in a
    # folder of the run's own.
    data = tmp_path_factory.mktemp("data")
    return Settings(model=str(test_model), profile="cpu", greedy=True, max_new_tokens=12, data_dir=str(data))


@pytest.fixture(scope="session")
def translator(cpu_settings):
    from hymt.planner.decide import decision_for
    from hymt.translation.translator import start

    translator = start(cpu_settings, decision_for(cpu_settings))
    yield translator
    translator.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def family_model(tmp_path_factory):
    """A tiny model of a given family ("hunyuan-mt-chimera-7b", "hy-mt1.5-7b", ...), made once per run."""
    from hymt.testmodel import make_test_model

    made: dict[str, Path] = {}

    def make(family: str) -> Path:
        if family not in made:
            made[family] = make_test_model(tmp_path_factory.mktemp("family") / "checkpoint", family=family)
        return made[family]

    return make


@pytest.fixture
def in_process(translator, monkeypatch):
    """A TestClient on the app around the session's translator, once it serves; the translator outlives the app."""
    import time

    from starlette.testclient import TestClient

    from hymt.api.app import create_app

    monkeypatch.setattr(translator, "stop", lambda: None)
    app = create_app(translator.settings, translator.decision, factory=lambda settings, decision, on_phase: translator)
    with TestClient(app, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + 30
        while client.get("/health").status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield client


@pytest.fixture
def native_start(artifacts):
    """start.sh's native appliance lives in the clone's one `.run`: a test that drives it holds this lock, so tests on
    other workers (tests/run.sh runs files side by side) wait for it instead of meeting its supervisord."""
    import fcntl

    with open(artifacts / "start-sh.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class BrowserLog:
    """What the test's pages did that a failure should tell: their errors, failed and refused requests, and the
    requests still unanswered when it failed (a page left empty in CI for 90 s said nothing of why)."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.began = time.monotonic()
        self.lines: list[str] = []
        self.pending: dict[object, str] = {}

    def say(self, line: str):
        self.lines.append(f"{time.monotonic() - self.began:7.2f} s  {line}")

    def watch(self, page):
        def requested(request):
            self.pending[request] = f"{time.monotonic() - self.began:7.2f} s  {request.method} {request.url}"

        def answered(response):
            if response.status >= 400:
                self.say(f"{response.status} for {response.request.method} {response.url}")

        page.on("request", requested)
        page.on("requestfinished", lambda request: self.pending.pop(request, None))
        page.on("requestfailed", lambda r: (self.pending.pop(r, None), self.say(f"failed: {r.url}: {r.failure}")))
        page.on("response", answered)
        page.on("pageerror", lambda error: self.say(f"page error: {error}"))
        page.on("console", lambda m: m.type in ("error", "warning") and self.say(f"console {m.type}: {m.text}"))
        page.on("crash", lambda _: self.say("the page crashed"))

    def report(self) -> str:
        unanswered = [f"{since}  (no answer yet)" for since in self.pending.values()]
        return "\n".join(self.lines + unanswered)


BROWSER_LOG = BrowserLog()
# Loads of a page tried at most while Chromium cancels its requests for a network change.
PAGE_LOADS = 3


def load_again_if_the_network_changed(page):
    """Chromium cancels the requests in flight (net::ERR_NETWORK_CHANGED) when a network interface comes or goes,
    as podman's do while tests/system/test_image.py runs beside the browser tests: a page whose module scripts were
    cancelled so never starts (a fresh clone's CI saw the pickers stay empty for 90 s). Its `goto` loads it again
    then, as a person would."""
    goto, cancelled = page.goto, []
    page.on("requestfailed", lambda r: "ERR_NETWORK_CHANGED" in (r.failure or "") and cancelled.append(r.url))

    def goto_whole(url, **options):
        for _ in range(PAGE_LOADS):
            cancelled.clear()
            response = goto(url, **options)
            if not cancelled:
                break
        return response

    page.goto = goto_whole


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    BROWSER_LOG.clear()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and (told := BROWSER_LOG.report()):
        report.sections.append(("the browser's pages", told))


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (Debian's package), one per test module; skipped where it is not installed."""
    from browsers import CHROMIUM, FLAGS

    if CHROMIUM is None:
        pytest.skip("Debian's chromium package is not installed (tests/run.sh installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        new_context = b.new_context

        def patient_context(**options):
            # Playwright's 30 s default failed once in CI for a page that loads in one second on an idle machine:
            # a 2-core machine running a dozen test processes is slower by more than that at times.
            context = new_context(**options)
            context.set_default_timeout(BROWSER_WAIT_MS)
            context.on("page", BROWSER_LOG.watch)
            context.on("page", load_again_if_the_network_changed)
            return context

        b.new_context = patient_context  # type: ignore[method-assign]
        yield b
        b.close()
