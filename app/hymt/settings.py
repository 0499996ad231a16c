"""The one settings object: read from HYMT_* environment variables once, validated, then passed down explicitly."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .family import check_choice
from .tiers import AUTO, PROFILE_CHOICES

# The levels both Python's logging and uvicorn take (uvicorn's "trace" is not Python's).
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@dataclass(frozen=True)
class Settings:
    model: str = "tencent/Hunyuan-MT-7B"
    host: str = "0.0.0.0"
    port: int = 80
    profile: str = AUTO
    # Pretend the GPU has this much memory (GB); the process is capped to it. None: the real card.
    gpu_memory_gb: float | None = None
    # KV cache tokens (prompt + output budget, summed over the segments in flight) the planner must leave room for
    # before it picks a tier: the highest-fidelity tier that leaves this many.
    target_kv_tokens: int = 16384
    # Forces the size of the KV cache in tokens instead of the planner's.
    kv_cache_tokens: int | None = None
    # Segments decoded together at most (the planner lowers it when the KV cache holds fewer).
    max_in_flight: int = 128
    # Prompt tokens prefilled in one step: a bound on how long newcomers pause the segments being decoded.
    prefill_tokens: int = 1024
    # Decoding steps replayed as captured CUDA graphs, and small fused kernels compiled with torch.compile.
    cuda_graphs: bool = True
    # A prompt's instruction, the same for every segment to one language, prefilled once and copied after
    # (engine/prefixes.py).
    prefix_reuse: bool = True
    compile: bool = True
    # Where compiled kernels are kept so that a restart does not compile again (a volume in the image).
    compile_cache_dir: str | None = None
    max_segment_tokens: int = 256
    max_new_tokens: int = 1024
    greedy: bool = False
    max_chars: int = 20000
    max_texts: int = 64
    max_upload_bytes: int = 2_000_000
    max_queue_segments: int = 2048
    # Document translation: the largest file accepted, and how long an ended document job (its file) is kept.
    max_file_bytes: int = 20_000_000
    file_retention_s: float = 3600.0
    # An interactive request is refused at once (429) unless its segments can be expected to start within this many
    # seconds behind the interactive work ahead of it.
    max_queue_wait_s: float = 30.0
    # Batch work (documents, and requests of more than interactive_max_segments segments) waits behind interactive
    # work but keeps at least batch_min_share of the rows in flight whenever it has segments waiting, and holds at
    # most batch_max_share of them while interactive work is in flight (each row lengthens every step, and a
    # person's sentence gets one token a step); its own queue holds this many segments at most.
    interactive_max_segments: int = 32
    batch_min_share: float = 0.25
    batch_max_share: float = 1.0
    max_batch_queue_segments: int = 16384
    # Document jobs: where they are kept (SQLite and the files beside it; None: the user's data folder), how many
    # translate at once, and how much the queue of unfinished ones may hold (its documents' texts and bytes).
    data_dir: str | None = None
    max_running_jobs: int = 8
    max_queued_job_segments: int = 1_000_000
    max_queued_job_bytes: int = 2_000_000_000
    # Several replicas: a PostgreSQL URL (postgresql://user:password@host/db) holding the jobs, their files, the
    # stored glossaries and usage for all of them instead of HYMT_DATA_DIR's SQLite file. Not in repr: a password.
    database_url: str | None = field(default=None, repr=False)
    # How long a replica's claim on a running job lasts without a heartbeat (it renews it every third of this):
    # a replica killed mid-job hands it on to another this long after its last heartbeat.
    job_lease_s: float = 30.0
    # On SIGTERM: seconds to finish the requests in flight (new ones get 503) before exiting. Keep it below the
    # supervisord and compose stop timeouts, which end the process the hard way.
    drain_grace_s: float = 20.0
    # Requests per minute allowed to one API key / one client address (0: no limit); beyond it 429 + Retry-After.
    rate_limit_per_key: int = 0
    rate_limit_per_address: int = 0
    adapters: str | None = None
    api_keys: tuple[str, ...] = field(default_factory=tuple)
    # Origins whose pages may call the API from a browser (CORS): "*" for any, or a list of origins such as
    # https://app.example.org; "none" for no cross-origin access. Credentials (cookies) are never allowed.
    cors_origins: tuple[str, ...] = ("*",)
    decision_file: str | None = None
    log_level: str = "info"
    # cuDNN's attention kernels for SDPA (the gathering attention path). Off: on an H200 they build a graph for each
    # new sequence length, which made decoding 2.2x to 2.8x slower than the flash/efficient kernels.
    cudnn_attention: bool = False
    # The appliance: where supervisord keeps its socket, and how the health service watches the server.
    run_dir: str = "/run/hymt"
    # Where the programs' logs are (the health service quotes the server's last lines when it cannot start).
    log_dir: str = "/var/log/hymt"
    health_port: int = 8081
    health_interval_s: float = 5.0
    health_failures: int = 3  # consecutive failed checks before the server is restarted
    health_grace_s: float = 900.0  # how long a (re)started server may stay "loading"
    health_backoff_max_s: float = 300.0
    # Which model of the family the checkpoint holds (its prompts follow): auto tells from the checkpoint's name.
    model_family: str = "auto"
    # Server-wide glossaries: a TSV/CSV file or a directory of them, read again when one changes.
    glossaries: str | None = None
    # Stored glossaries (/v2/glossaries): the most entries one may hold.
    max_glossary_entries: int = 10000
    # Characters one API key (the whole server when keys are off) may have translated per calendar month (UTC),
    # on every API; past it, 456 (DeepL's "quota exceeded"). 0: no limit.
    character_limit: int = 0
    # The preceding segments of a document as context, where the model has a context prompt (HY-MT1.5), and how
    # many tokens of them at most.
    context: bool = True
    context_tokens: int = 192
    # Hunyuan-MT-Chimera-7B's checkpoint for quality "best" (not needed when HYMT_MODEL is Chimera itself).
    fusion_model: str | None = None

    @property
    def data_folder(self) -> str:
        """HYMT_DATA_DIR, or the user's data folder ($XDG_DATA_HOME/hymt, else ~/.local/share/hymt)."""
        if self.data_dir:
            return self.data_dir
        base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
        return os.path.join(base, "hymt")

    @property
    def supervisor_url(self) -> str:
        return f"unix://{self.run_dir}/supervisor.sock"

    def replace(self, **changes) -> Settings:
        """A copy with command-line overrides applied (None means: keep the environment's value)."""
        settings = dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})
        settings.validate()
        return settings

    def validate(self) -> None:
        if self.profile not in PROFILE_CHOICES:
            raise ConfigError(f"HYMT_PROFILE must be one of {', '.join(PROFILE_CHOICES)}, not {self.profile!r}")
        if self.log_level.lower() not in LOG_LEVELS:
            raise ConfigError(f"HYMT_LOG_LEVEL must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}")
        positive = (
            "port",
            "health_port",
            "health_interval_s",
            "health_failures",
            "health_backoff_max_s",
            "target_kv_tokens",
            "max_in_flight",
            "prefill_tokens",
            "max_segment_tokens",
            "max_new_tokens",
            "max_chars",
            "max_texts",
            "max_upload_bytes",
            "max_queue_segments",
            "max_file_bytes",
            "file_retention_s",
            "max_queue_wait_s",
            "interactive_max_segments",
            "max_batch_queue_segments",
            "max_running_jobs",
            "max_queued_job_segments",
            "max_queued_job_bytes",
            "job_lease_s",
            "max_glossary_entries",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"HYMT_{name.upper()} must be positive, not {getattr(self, name)}")
        check_choice(self.model_family)
        if self.context_tokens < 0:
            raise ConfigError(f"HYMT_CONTEXT_TOKENS must be 0 or more, not {self.context_tokens}")
        for name in ("drain_grace_s", "rate_limit_per_key", "rate_limit_per_address", "character_limit"):
            if getattr(self, name) < 0:
                raise ConfigError(f"HYMT_{name.upper()} must be 0 or more, not {getattr(self, name)}")
        if not 0 <= self.batch_min_share < 1:
            raise ConfigError(
                f"HYMT_BATCH_MIN_SHARE must be from 0 up to (not including) 1, not {self.batch_min_share}"
            )
        if not self.batch_min_share <= self.batch_max_share <= 1:
            raise ConfigError(
                f"HYMT_BATCH_MAX_SHARE must be from HYMT_BATCH_MIN_SHARE ({self.batch_min_share:g}) up to 1, not "
                f"{self.batch_max_share}"
            )
        if self.kv_cache_tokens is not None and self.kv_cache_tokens <= 0:
            raise ConfigError(f"HYMT_KV_CACHE_TOKENS must be positive, not {self.kv_cache_tokens}")
        if self.gpu_memory_gb is not None and self.gpu_memory_gb <= 0:
            raise ConfigError(f"HYMT_GPU_MEMORY_GB must be positive, not {self.gpu_memory_gb}")
        for origin in self.cors_origins:
            if origin not in ("*", "none") and not re.fullmatch(r"https?://[^/\s]+", origin):
                raise ConfigError(
                    f"HYMT_CORS_ORIGINS: {origin!r} is not an origin (scheme://host[:port], no path), * or none"
                )
        if "none" in self.cors_origins and len(self.cors_origins) > 1:
            raise ConfigError("HYMT_CORS_ORIGINS: none cannot be combined with origins")
        if self.database_url is not None and not re.match(r"postgres(ql)?://", self.database_url):
            raise ConfigError("HYMT_DATABASE_URL must be a PostgreSQL URL: postgresql://user:password@host:5432/db")
        if not 16 <= self.max_segment_tokens <= 4096:
            raise ConfigError("HYMT_MAX_SEGMENT_TOKENS must be between 16 and 4096 (input + output stay inside 8k)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}  # each field's value, of its own type
        for f in dataclasses.fields(cls):
            raw = env.get(f"HYMT_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            values[f.name] = _parse(f.name, str(f.type), raw)  # a string: annotations are not evaluated here
        settings = cls(**values)
        settings.validate()
        return settings


def _parse(name: str, type_name: str, raw: str):
    key = f"HYMT_{name.upper()}"
    try:
        if type_name == "bool":
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if type_name in ("int", "int | None"):
            return int(raw)
        if type_name in ("float", "float | None"):
            return float(raw)
        if type_name == "tuple[str, ...]":
            return tuple(part.strip() for part in raw.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"{key}={raw!r} is not a valid {type_name.split(' ')[0]}") from None
    return raw
