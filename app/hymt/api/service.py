"""The service behind the routes: the translator once its model is loaded (in a background thread, so /health
answers "loading" meanwhile), the fusion model's translator beside it, and what state they are in. Routes reach
their translations through bridge.py."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import detect
from ..errors import HymtError, NotReady
from ..planner.decision import Decision
from ..planner.fusion import fusion_settings
from ..planner.gpu import GIB, process_gpu_memory_bytes
from ..settings import Settings
from ..store.backend import Backend
from ..translation.candidates import CANDIDATE_SAMPLINGS
from .ratelimit import Limits

if TYPE_CHECKING:
    from ..translation.translator import Translator

log = logging.getLogger("hymt.service")

DEGRADED_AFTER_OOM_S = 300


@dataclass
class Service:
    settings: Settings
    decision: Decision
    translator: Translator | None = None
    load_error: str | None = None
    started_at: float = field(default_factory=time.monotonic)
    started_at_wall: float = field(default_factory=time.time)
    on_fatal: Callable[[str], None] | None = None
    phase: str = "starting"  # what start-up is doing, for /health until the engine is ready
    fusion: Translator | None = None  # the fusion model's own, when it is resident beside the translation model
    fusion_error: str | None = None
    draining: bool = False  # SIGTERM came: requests in flight finish, new ones get 503
    # The jobs', glossaries' and usage's database: one that cannot be reached makes the service unhealthy (text
    # translation goes on; what needs the database gets 503).
    database: Backend | None = None
    limits: Limits = field(init=False)

    def __post_init__(self):
        self.limits = Limits(self.settings.rate_limit_per_key, self.settings.rate_limit_per_address)

    def load_in_background(self, factory: Callable[..., Translator] | None = None) -> threading.Thread:
        def on_phase(text: str) -> None:
            log.info("start-up: %s", text)
            self.phase = text

        def load():
            # Imported here: the engine imports torch (seconds), which `hymt translate` needs only once a document
            # has been read and found to hold text.
            from ..translation.translator import start

            try:
                translator = (factory or start)(self.settings, self.decision, on_phase)
                self.decision = translator.decision
                # Before the translation model serves: capturing the fusion model's CUDA graphs while another
                # thread runs steps on the same GPU is not allowed.
                self._load_fusion(factory or start, on_phase)
                detect.prepare()
                self.translator = translator
                self.phase = "ready"
            except Exception as exc:  # noqa: BLE001 - any start-up failure makes the service unhealthy, with a reason
                message = exc.message if isinstance(exc, HymtError) else f"{type(exc).__name__}: {exc}"
                log.error("start-up failed: %s", message)
                self.load_error = message
                if self.on_fatal is not None:
                    self.on_fatal(message)

        thread = threading.Thread(target=load, name="hymt-load", daemon=True)
        thread.start()
        return thread

    def _load_fusion(self, factory: Callable[..., Translator], on_phase: Callable[[str], None]) -> None:
        """The fusion model, where the planner placed it beside the translation model. Its failure only refuses
        quality "best" (with the reason); the translation model serves all the same."""
        own = self.decision.fusion.decision
        if self.decision.fusion.placement != "resident" or own is None:
            return
        on_phase("loading the fusion model")
        try:
            fusion = factory(fusion_settings(self.settings), own, lambda text: on_phase(f"fusion model: {text}"))
            # A checkpoint whose name says nothing is taken at the setting's word; one named otherwise is refused.
            if not fusion.family.fusion and fusion.identified.source != "assumed":
                fusion.stop()
                raise HymtError(
                    f"HYMT_FUSION_MODEL holds {fusion.family.name} (told by its "
                    f"{fusion.identified.source}), not Hunyuan-MT-Chimera-7B"
                )
            self.fusion = fusion
        except Exception as exc:  # noqa: BLE001 - the translation model serves on without quality "best"
            self.fusion_error = exc.message if isinstance(exc, HymtError) else f"{type(exc).__name__}: {exc}"
            log.error("the fusion model did not start: %s; quality best is refused", self.fusion_error)

    def ready_translator(self) -> Translator:
        if self.draining:
            raise NotReady(
                "the server is shutting down and takes no new requests; try again shortly",
                max(1, round(self.settings.drain_grace_s)),
                error_type="draining",
            )
        if self.translator is None:
            raise NotReady(self.load_error or f"the server is starting ({self.phase}); try again shortly")
        if not self.translator.alive:
            raise NotReady("the engine stopped; the service is restarting")
        return self.translator

    def fusion_translator(self) -> Translator:
        """The translator that fuses candidates for quality "best", or a 422 that says why the mode is refused."""
        translator = self.ready_translator()
        if self.decision.fusion.placement == "same":
            return translator
        if self.fusion is not None and self.fusion.alive:
            return self.fusion
        why = self.fusion_error or self.decision.fusion.reason or "no fusion model"
        raise HymtError(f"quality best is not available: {why}", error_type="quality_unavailable", status=422)

    def _fusion_up(self) -> bool:
        """Whether a fusion model runs: the translation model itself (Chimera), or its own engine, alive."""
        return self.decision.fusion.placement == "same" or (self.fusion is not None and self.fusion.alive)

    def quality_json(self) -> dict:
        """What /health says about quality "best"."""
        fusion = self.decision.fusion
        return {
            "best": self.translator is not None and self._fusion_up(),
            "placement": fusion.placement,
            "reason": self.fusion_error or fusion.reason,
            "fusion_profile": fusion.decision.profile if fusion.decision else None,
            "fusion_model": self.fusion.family.name if self.fusion else None,
            "candidates": len(CANDIDATE_SAMPLINGS),
        }

    def stop_translators(self) -> None:
        """End what the translators hold with an error, and stop their engines."""
        for translator in (self.translator, self.fusion):
            if translator is not None:
                translator.stop()

    def busy(self) -> bool:
        """Whether an engine still holds segments (waiting or in flight)."""
        return any(
            (now := t.snapshot()).queue_depth > 0 or now.in_flight > 0
            for t in (self.translator, self.fusion)
            if t is not None
        )

    def status(self) -> str:
        if self.draining:
            return "draining"
        if self.load_error is not None or (self.translator is not None and not self.translator.alive):
            return "unhealthy"
        if self.database is not None and self.database.error is not None:
            return "unhealthy"
        if self.translator is None:
            return "loading"
        now = self.translator.snapshot()
        recent_oom = now.last_oom_at is not None and time.monotonic() - now.last_oom_at < DEGRADED_AFTER_OOM_S
        if recent_oom or now.waiting["interactive"] > 0.8 * self.settings.max_queue_segments:
            return "degraded"
        return "healthy"

    def gpu_memory(self) -> tuple[float, float | None]:
        """(used by this process, card total) in GiB; (0, None) without a GPU."""
        gpu = self.decision.gpu
        if gpu is None:
            return 0.0, None
        used = process_gpu_memory_bytes(os.getpid())
        if used is None:
            try:
                import torch

                used = torch.cuda.memory_reserved() if torch.cuda.is_available() else 0
            except ImportError:
                used = 0
        return round(used / GIB, 3), round(gpu.total_bytes / GIB, 3)
