"""The memory index: embeddings, de-duplication and links, off the write path (a worker sweep).

The nodes are their own queue (no row in cortex.jobs per node): a node whose embed_status or
link_status is 'pending' is claimed in batches of `CORTEX_EMBEDDING_BATCH` under a lease
(cortex.claim_memory_index), embedded in one model call per batch, and stored in one statement
per batch (cortex.store_memory_embeddings: only where the content is still the one embedded).
Then, per tenant of the batch and in one transaction, near-duplicates are folded into older
nodes (cortex.dedup_memory_embeddings) and the rest linked (cortex.auto_link: relates_to,
mentions, heuristic contradicts). With `CORTEX_EMBEDDINGS=none` the embedding is 'skipped' and the
linker still adds its mentions. A batch that fails is retried with backoff, then parked with an
alert (cortex.fail_memory_index).

When a Claude key is configured, the linker's candidate pairs (its heuristic contradictions and
the most similar facts, preferences and decisions) go to the model once per tenant and batch,
budgeted like every model call (reserve, then settle with the usage, which records it in
token_usage). Its answer is validated against a schema and can only add a contradicts edge and a
review flag, or note a rejection on the heuristic's edge: it never deletes or supersedes. A failed
or over-budget check leaves the heuristic result as it is.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from cortex import db, embeddings, llm
from cortex.config import Settings, get_settings
from cortex.errors import CortexError
from cortex.llm import prompts
from cortex.queue.worker import describe_error, register_sweep
from cortex.usage import budget

log = logging.getLogger("cortex.memories.index")

# Pairs shown to the model per call: verdicts for ten pairs fit the default output cap of 500 tokens.
MAX_MODEL_PAIRS = 10
OPERATION = "contradiction_check"


@register_sweep("memory_index")
def index_memories(conn: psycopg.Connection[Any], worker_id: str, stop: threading.Event | None = None) -> int:
    """One batch of the memory index on the worker's autocommit connection `conn`: claim, embed,
    store, de-duplicate and link. Returns how many nodes it claimed (0: nothing was due)."""
    settings = get_settings()
    claimed = db.rows(
        conn,
        "cortex.claim_memory_index",
        p_worker=worker_id,
        p_limit=max(1, settings.embedding_batch),
        p_lease_seconds=settings.job_lease_seconds,
    )
    if not claimed:
        return 0
    failed = _embed_and_store(conn, [r for r in claimed if r["embed_status"] == "pending"])
    by_tenant: dict[str, list[str]] = defaultdict(list)
    for row in claimed:
        if str(row["id"]) not in failed:
            by_tenant[str(row["tenant_id"])].append(str(row["id"]))
    for tenant_id, ids in by_tenant.items():
        linked = _link(conn, tenant_id, ids)
        if linked and linked.get("candidates") and settings.use_remote_llm:
            check_contradictions(conn, tenant_id, linked["candidates"], settings)
    return len(claimed)


def _embed_and_store(conn: psycopg.Connection[Any], rows: Sequence[Mapping[str, Any]]) -> set[str]:
    """Embeds `rows` in one call and stores the vectors in one statement; returns the ids whose
    embedding failed (recorded with cortex.fail_memory_index, so not linked now)."""
    if not rows:
        return set()
    try:
        embedder = embeddings.get_embedder()
        vectors: list[list[float] | None]
        if embedder is None:  # CORTEX_EMBEDDINGS=none: stored as skipped
            vectors = [None] * len(rows)
        else:
            vectors = list(embeddings.embed_texts([str(r["text"]) for r in rows]))
    except (embeddings.EmbeddingError, ValueError, TypeError) as exc:
        _fail(conn, rows, f"embedding failed: {describe_error(exc)}")
        return {str(r["id"]) for r in rows}
    items = [
        {"tenant_id": str(r["tenant_id"]), "id": str(r["id"]), "content_hash": r["content_hash"], "embedding": v}
        for r, v in zip(rows, vectors, strict=True)
    ]
    stored = db.call(conn, "cortex.store_memory_embeddings", p_items=Jsonb(items))
    log.info(
        "memory index: %d embedded, %d skipped, %d changed meanwhile",
        stored["stored"],
        stored["skipped"],
        len(stored["stale"]),
    )
    return set()


def _link(conn: psycopg.Connection[Any], tenant_id: str, ids: list[str]) -> dict[str, Any] | None:
    """De-duplicates and links the tenant's nodes of the batch in one transaction; None when it
    failed (recorded for a retry)."""
    try:
        with conn.transaction():
            merged = db.call(
                conn, "cortex.dedup_memory_embeddings", p_tenant_id=tenant_id, p_ids=db.typed(ids, "uuid[]")
            )
            linked: dict[str, Any] = db.call(
                conn, "cortex.auto_link", p_tenant_id=tenant_id, p_ids=db.typed(ids, "uuid[]")
            )
    except CortexError as exc:
        _fail(conn, [{"tenant_id": tenant_id, "id": i} for i in ids], f"linking failed: {describe_error(exc)}")
        return None
    log.info(
        "memory index: tenant %s: %d merged as duplicates, %d linked (%d relates_to, %d mentions, %d contradicts)",
        tenant_id,
        len(merged["merged"]),
        linked["linked"],
        linked["relates_to"],
        linked["mentions"],
        linked["contradicts"],
    )
    return linked


def _fail(conn: psycopg.Connection[Any], rows: Sequence[Mapping[str, Any]], error: str) -> None:
    outcome = db.call(
        conn,
        "cortex.fail_memory_index",
        p_tenant_ids=db.typed([str(r["tenant_id"]) for r in rows], "uuid[]"),
        p_ids=db.typed([str(r["id"]) for r in rows], "uuid[]"),
        p_error=error,
    )
    log.warning(
        "memory index: %d node(s) failed (%d to retry, %d parked): %s",
        len(rows),
        outcome["retry"],
        outcome["parked"],
        error.splitlines()[0],
    )


def check_contradictions(
    conn: psycopg.Connection[Any],
    tenant_id: str,
    candidates: Sequence[Mapping[str, Any]],
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Asks the model (Haiku, the summary model) about the linker's candidate pairs, budgeted for
    the tenant's system agent: reserved before, settled after with the usage (recorded in
    token_usage). Only verdicts naming a pair that was sent are applied
    (cortex.apply_contradiction_verdicts: adds contradicts edges and review flags, never removes).
    Over budget, or when the model fails, nothing changes; the result says why."""
    settings = settings or get_settings()
    pairs = list(candidates[:MAX_MODEL_PAIRS])
    prompt = prompts.contradiction_prompt(pairs)
    with conn.transaction():
        plan = budget.reserve(conn, tenant_id, None, OPERATION, budget.estimate(prompt), settings=settings)
    if plan.model is None:  # over budget ('local'): the heuristics stand alone today
        with conn.transaction():
            budget.settle(conn, plan, None)
        log.info("memory index: tenant %s: contradiction check skipped (%s)", tenant_id, plan.action)
        return {"skipped": plan.action}
    try:
        verdicts, usage = llm.judge_contradictions(
            pairs, settings, model=settings.summary_model, max_tokens=plan.max_tokens
        )
    except llm.LLMError as exc:
        with conn.transaction():
            budget.settle(conn, plan, budget.failed_usage(plan, exc))
        log.warning("memory index: tenant %s: contradiction check failed: %s", tenant_id, exc)
        return {"error": str(exc)}
    sent = {v.pair: pairs[v.pair] for v in verdicts.verdicts if v.pair < len(pairs)}
    apply = [
        {"a": p["newer_id"], "b": p["older_id"], "contradicts": v.contradicts, "reason": v.reason}
        for v in verdicts.verdicts
        if (p := sent.get(v.pair)) is not None
    ]
    with conn.transaction():
        applied: dict[str, Any] = db.call(
            conn,
            "cortex.apply_contradiction_verdicts",
            p_tenant_id=tenant_id,
            p_verdicts=Jsonb(apply),
            p_model=usage.model,
        )
        budget.settle(conn, plan, usage)
    log.info("memory index: tenant %s: model check of %d pair(s): %s", tenant_id, len(pairs), applied)
    return applied
