#!/usr/bin/env python3
"""Embedding throughput (issue 13): texts per second of the local model (cortex.embeddings, the
`local` provider: all-MiniLM-L6-v2 on the CPU) for batch sizes 1, 16, 64 and 256, under each runtime
(ONNX Runtime, the default, and torch through sentence-transformers).

usage: bench_embeddings.py [--texts 1024] [--batches 1,16,64,256] [--threads 0|1,2] [--rounds 3]
                           [--runtimes onnx,torch]
                           [--seconds 10] [--max-load 1.5] [--max-wait 300] [--out bench-results/embeddings.json]

The texts are memory-like sentences of 10 to 60 words (facts about contacts, preferences, events),
generated from a fixed seed, so every run embeds the same ones. For each combination of runtime,
batch size and threads the model is loaded with CORTEX_EMBEDDING_RUNTIME / CORTEX_EMBEDDING_BATCH /
CORTEX_EMBEDDING_THREADS set to them (not timed; the ONNX export is made first if missing),
warmed with one batch, then `embed_texts` is called on consecutive slices of `batch` texts, as
the worker does, until the texts are done or `--seconds` have passed. The
combinations take turns, `--rounds` times, so a change in the machine's load affects them alike.
Reported per combination: texts/s over the timed calls (and per round) and the milliseconds per
call (p50 and p95; for batch 1 that is a search query's embedding time). `--threads 0` uses the
setting (CORTEX_EMBEDDING_THREADS, else every core). The JSON goes to stdout and to `--out`. No
database and no network are used.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import ROOT, cpu_model, wait_for_quiet

from cortex import embeddings
from cortex.config import get_settings

RESULTS = ROOT / "bench-results" / "embeddings.json"

PEOPLE = ["Maria Lopez", "John Smith", "the buyer at Acme", "Priya from Globex", "the new office manager",
          "Tom, the CFO,", "our contact at Northwind", "Anna Berg", "the head of procurement", "Luis"]  # fmt: skip
FACTS = ["prefers email over phone calls", "asked to be contacted after 3 pm on weekdays",
         "is unhappy about the late delivery of order #{n}", "wants a quote for {n} ceramic mugs",
         "renewed the annual plan in March", "mentioned that the budget is frozen until the next quarter",
         "likes the blue lids better than the black ones", "reported a damaged shipment last week",
         "is moving to a new warehouse in Rotterdam", "will be on holiday until the {n}th",
         "asked for the invoice to be split across two cost centres", "compared our prices with a competitor",
         "promised to introduce us to their sister company", "needs the onboarding call moved to Friday"]  # fmt: skip
CLAUSES = ["because the last order arrived two days late", "and said the team was pleased with the samples",
           "although the contract is only up for renewal next year", "so the follow-up should wait until Monday",
           "after a long call with support about the tracking number", "and wants a written confirmation",
           "which matters because they order every month", "according to the notes from the last meeting",
           "while they evaluate two other suppliers", "and the decision is due by the end of the month"]  # fmt: skip


def memory_texts(count: int, seed: int = 13) -> list[str]:
    """`count` memory-like sentences of 10 to 60 words, the same ones for the same seed."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        target = rng.randint(10, 60)
        words = f"{rng.choice(PEOPLE)} {rng.choice(FACTS).format(n=rng.randint(2, 950))}".split()
        while len(words) < target:
            words += rng.choice(CLAUSES + FACTS).format(n=rng.randint(2, 950)).split()
        texts.append(" ".join(words[:target]).rstrip(",") + ".")
    return texts


def load(runtime: str, batch: int, threads: int) -> float:
    """Loads the model with CORTEX_EMBEDDING_RUNTIME=runtime, CORTEX_EMBEDDING_BATCH=batch and
    CORTEX_EMBEDDING_THREADS=threads (0: the default); returns the seconds it took (after the first
    load: reading the weights again)."""
    os.environ["CORTEX_EMBEDDING_RUNTIME"] = runtime
    os.environ["CORTEX_EMBEDDING_BATCH"] = str(batch)
    if threads:
        os.environ["CORTEX_EMBEDDING_THREADS"] = str(threads)
    else:
        os.environ.pop("CORTEX_EMBEDDING_THREADS", None)
    get_settings.cache_clear()
    embeddings.reset()
    started = time.perf_counter()
    embeddings.preload()
    return time.perf_counter() - started


def measure(texts: list[str], runtime: str, batch: int, threads: int, seconds: float) -> list[tuple[float, int]]:
    """(seconds, texts) of each `embed_texts` call over consecutive slices of `batch` texts, until
    the texts are done or `seconds` have passed (the first slice is a warm-up, not counted)."""
    load(runtime, batch, threads)
    embeddings.embed_texts(texts[:batch])  # first-call allocations are not the steady state
    calls: list[tuple[float, int]] = []
    done = 0
    started = time.perf_counter()
    while done < len(texts) and time.perf_counter() - started < seconds:
        chunk = texts[done : done + batch]
        t0 = time.perf_counter()
        vectors = embeddings.embed_texts(chunk)
        calls.append((time.perf_counter() - t0, len(chunk)))
        assert len(vectors) == len(chunk)
        done += len(chunk)
    return calls


def summary(runtime: str, batch: int, threads: int, rounds: list[list[tuple[float, int]]]) -> dict[str, Any]:
    """Texts/s over all rounds (and per round), milliseconds per call."""
    calls = [c for r in rounds for c in r]
    ms = sorted(seconds * 1000 for seconds, _ in calls)
    texts = sum(n for _, n in calls)
    return {
        "runtime": runtime,
        "batch": batch,
        "threads": threads,
        "texts": texts,
        "calls": len(calls),
        "seconds": round(sum(seconds for seconds, _ in calls), 3),
        "texts_per_s": round(texts / sum(seconds for seconds, _ in calls), 1),
        "texts_per_s_by_round": [round(sum(n for _, n in r) / sum(t for t, _ in r), 1) for r in rounds],
        "ms_per_call_p50": round(statistics.median(ms), 2),
        "ms_per_call_p95": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=1024, help="texts per round (default 1024)")
    parser.add_argument("--batches", default="1,16,64,256", help="batch sizes, comma-separated")
    parser.add_argument("--threads", default="0", help="the model's threads to compare, e.g. 1,2 (0: the setting)")
    parser.add_argument("--runtimes", default="onnx,torch", help="runtimes to compare (onnx, torch)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over every combination (default 3)")
    parser.add_argument("--seconds", type=float, default=10.0, help="time limit per combination and round")
    parser.add_argument("--max-load", type=float, default=1.5, help="start when the 1-min load is below this")
    parser.add_argument("--max-wait", type=float, default=300.0)
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    os.environ["CORTEX_EMBEDDINGS"] = "local"
    texts = memory_texts(args.texts)
    combos = [
        (r, int(b), int(t))
        for r in args.runtimes.split(",")
        for t in args.threads.split(",")
        for b in args.batches.split(",")
    ]
    load_at_start = wait_for_quiet(args.max_load, args.max_wait)
    first_load = load(*combos[0])
    # Rounds over all combinations, so a change in the machine's load touches them all alike.
    timings: dict[tuple[str, int, int], list[list[tuple[float, int]]]] = {c: [] for c in combos}
    for _ in range(args.rounds):
        for runtime, batch, threads in combos:
            timings[(runtime, batch, threads)].append(measure(texts, runtime, batch, threads, args.seconds))
    runs = [summary(r, b, t or embeddings.thread_count(), timings[(r, b, t)]) for r, b, t in combos]
    embedder = embeddings.get_embedder()
    assert embedder is not None

    import onnxruntime
    import sentence_transformers
    import torch

    words = [len(t.split()) for t in texts]
    results = {
        "benchmark": "embeddings",
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": embedder.name,
        "model_path": get_settings().embedding_model,
        "dimensions": embedder.dimensions,
        "texts": {
            "count": len(texts),
            "words_min": min(words),
            "words_mean": round(statistics.mean(words), 1),
            "words_max": max(words),
            "example": texts[0],
        },
        "runs": runs,
        "machine": {
            "cpus": os.cpu_count(),
            "cpu_model": cpu_model(),
            "first_load_seconds": round(first_load, 2),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "onnxruntime": onnxruntime.__version__,
            "load_average_at_start": round(load_at_start, 2),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
