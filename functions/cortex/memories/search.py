"""Hybrid memory search: `POST /api/v1/memories/search` and its service (public.search_memories).

The API embeds the query itself (`cortex.embeddings.aembed_query`, the model loaded once per
process) unless the client sends `query_vector`; with `CORTEX_EMBEDDINGS=none`, or when the model
fails, it searches by text and graph only (the answer's `used.vector` says so). SQL fuses the
rankings and applies every rule, so a PostgREST caller gets the same results for the same vector.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StringConstraints, field_validator

from cortex import db, embeddings
from cortex.config import available_cores, get_settings
from cortex.graph.models import Node, NodeKind
from cortex.routing import Call, RawJSON, Reply, Router
from cortex.schemas import AgentName, Instant, Request, Response, Tag

log = logging.getLogger("cortex.memories.search")

router = Router("memories")

Claims = Mapping[str, Any]

# --- models --------------------------------------------------------------------------------------


class SearchWeights(Request):
    """Weights of the three rankings in the fusion; an absent one is the tenant's setting."""

    text: float | None = Field(default=None, ge=0, le=1000)
    vector: float | None = Field(default=None, ge=0, le=1000)
    graph: float | None = Field(default=None, ge=0, le=1000)


class MemorySearch(Request):
    """POST /memories/search: a query (text, vector or anchors) and filters that apply to every ranking."""

    query: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        default=None, description="Full text (web search syntax); embedded by the API for the vector ranking."
    )
    query_vector: list[float] | None = Field(
        default=None,
        min_length=embeddings.DIMENSIONS,
        max_length=embeddings.DIMENSIONS,
        description="A unit-length all-MiniLM-L6-v2 vector (384 floats), instead of embedding `query`.",
    )
    kinds: list[NodeKind] | None = Field(default=None, max_length=11)
    agent: AgentName | None = Field(default=None, description="Only nodes written by this agent.")
    contact_id: UUID | None = None
    tags: list[Tag] | None = Field(default=None, max_length=50, description="Nodes carrying all of these tags.")
    since: Instant | None = Field(default=None, description="Created at or after.")
    until: Instant | None = Field(default=None, description="Created before.")
    as_of: Instant | None = Field(default=None, description="Valid at this past time (superseded nodes included).")
    include_superseded: bool = False
    anchors: list[UUID] | None = Field(default=None, max_length=100, description="Rank by graph proximity to these.")
    anchor_depth: int = Field(default=2, ge=1, le=6)
    limit: int = Field(default=10, ge=1, le=100)
    weights: SearchWeights | None = None
    record_access: bool = Field(
        default=True,
        description="Count the access of the returned nodes and reinforce their edges; false for a caller that "
        "only looks (or records what it serves itself).",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value


class Rankings(Response):
    """The position of a result in each ranking (1 = first), null where that ranking did not find it."""

    text: int | None
    vector: int | None
    graph: int | None


class SearchHit(Response):
    """One result: the node, its fused score and its place in each ranking."""

    memory: Node
    score: float
    rankings: Rankings


class FusionWeights(Response):
    """The weights the fusion used."""

    text: float
    vector: float
    graph: float


class RankingsUsed(Response):
    """Which rankings ran (vector: false without a vector, e.g. CORTEX_EMBEDDINGS=none)."""

    text: bool
    text_mode: Literal["candidates", "rerank"] | None = Field(
        default=None,
        description="How text found its candidates: `candidates` = the matches of the query's rarest words "
        "(within the tenant's text_candidate_budget); `rerank` = the words are all common and a vector was given, "
        "so text only ranks the vector and graph candidates. Null without a text query.",
    )
    vector: bool
    graph: bool


class MemorySearchResults(Response):
    """POST /memories/search response, best first."""

    results: list[SearchHit]
    k: int = Field(description="rrf_k of score = sum of weight / (k + rank).")
    weights: FusionWeights
    used: RankingsUsed


# --- service -------------------------------------------------------------------------------------


async def query_vector_of(text: str | None) -> list[float] | None:
    """The query's vector from this process's model; None without a query, with the provider
    off, or when the model fails (logged: the search goes on by text and graph)."""
    if text is None or not text.strip():
        return None
    try:
        return await embeddings.aembed_query(text)
    except embeddings.EmbeddingError as exc:
        log.warning("query not embedded, searching by text and graph only: %s", exc)
        return None


def sql_args(search: MemorySearch, vector: list[float] | None) -> dict[str, Any]:
    """public.search_memories' named arguments for a validated request."""
    args = search.model_dump(exclude_none=True, exclude={"weights", "query_vector"})
    if vector is not None:
        args["query_vector"] = db.typed(embeddings.vector_literal(vector), "extensions.vector")
    if search.weights is not None:
        for name, value in search.weights.model_dump(exclude_none=True).items():
            args[f"weight_{name}"] = value
    return args


def search_pool_size() -> int:
    """How many searches this process runs in the database at once (`CORTEX_SEARCH_CONCURRENCY`,
    else the cores it may use; `cortex serve` gives each worker its share)."""
    configured = get_settings().search_concurrency
    return configured if configured > 0 else available_cores()


async def asearch_text(claims: Claims, search: MemorySearch) -> str:
    """Searches the caller's visible memories (embedding the query here unless a vector is given);
    the answer as SQL rendered it, never parsed and re-serialised in Python."""
    vector = search.query_vector if search.query_vector is not None else await query_vector_of(search.query)
    # Searches have a pool of their own, as many connections as the process's share of the cores.
    # A search is CPU-bound on both sides (the model here; the HNSW walk and the ranking in
    # PostgreSQL): more at once only share the cores more finely, so each takes longer and the
    # tail widens, and a few connections used over and over stay warm where ten in turn do not
    # (8 clients on 2 cores: p95 67 ms through the edge's pool, 47 ms through one connection per
    # worker, at the same searches per second: docs/benchmarks.md). Waiters go in arrival order
    # (their queries are embedded meanwhile), and other routes never wait behind a burst of searches.
    pool = await db.get_async_pool("search", search_pool_size())
    return await db.acall_as_text(claims, "search_memories", pool=pool, **sql_args(search, vector))


def search(claims: Claims, search: MemorySearch) -> dict[str, Any]:
    """The search for synchronous callers (the CLI), parsed: the query is embedded in this process."""
    vector = search.query_vector
    if vector is None and search.query is not None:
        try:
            embedder = embeddings.get_embedder()
            vector = None if embedder is None else embedder.embed([search.query])[0]
        except embeddings.EmbeddingError as exc:
            log.warning("query not embedded, searching by text and graph only: %s", exc)
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "search_memories", **sql_args(search, vector))
    return result


# --- route ---------------------------------------------------------------------------------------


@router.route(
    "POST", "/search", name="search_memories", summary="Hybrid search of memories (text, vector, graph)",
    responses={200: MemorySearchResults}, body=MemorySearch,
    description="Three rankings (full text, vector similarity, graph proximity to `anchors`), each its top "
    "max(limit x 4, 40) after the filters, fused by reciprocal rank: score = sum of weight / (k + rank). "
    "The API embeds `query` unless `query_vector` is given. Nodes below the tenant's min_importance come "
    "after the others. A query, a query_vector or anchors is required.",
)  # fmt: skip
async def search_memories(call: Call) -> Reply:
    """Hybrid memory search."""
    return Reply(200, RawJSON(await asearch_text(call.claims, call.body_as(MemorySearch))))
