"""The five consolidation agents on seed 003's contract (scan / process_item / run).

Postgres does the set work (scans, scores, clusters, the merge transaction, items and changes:
supabase/migrations/20261122002650_consolidation_agents.sql); an agent here drives it: `scan()`
reads candidates (never writes), `process_item()` processes one (writing nothing in a dry run, and
recording its audit item), `run()` scans, then processes in batches under the rate limit, one SQL
call per batch, and isolates failures: a batch that fails is retried item by item, and each item
that still fails is reported in `failures` while the others go on.

Ids: decay, cluster and promote scan memory ids; merge scans audit items (seed: "only from beads
issues", label consolidation:merge); relations scans candidate pairs, "<from id>:<to id>".

A dry run uses a read-only session (`default_transaction_read_only`): any write, even one a bug
would attempt, fails with SQLSTATE 25006 and changes nothing; the promote agent writes no file.
"""

from __future__ import annotations

import logging
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb
from pydantic import BaseModel

from cortex import db, llm
from cortex.config import Settings, get_settings
from cortex.consolidation import merge as merging
from cortex.consolidation import vault
from cortex.consolidation.models import (
    ClusterResult,
    ConfidenceConfig,
    DecayResult,
    MergeResult,
    PromotionResult,
    RelationResult,
)
from cortex.errors import CortexError
from cortex.llm import prompts
from cortex.usage import budget

log = logging.getLogger("cortex.consolidation")

T = TypeVar("T", bound=BaseModel)
Claims = Mapping[str, Any]
MERGE_OPERATION = "consolidation_merge"


# --- the session: one connection acting as an admin of one tenant ---------------------------------


class Session:
    """A connection acting with `claims` (an admin of the tenant: the system agent by default),
    one transaction per `tx()`, read-only for a dry run. `run_id` is the run its changes belong to."""

    def __init__(
        self,
        claims: Claims,
        *,
        dry_run: bool = False,
        conn: psycopg.Connection[Any] | None = None,
        dsn: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.claims = dict(claims)
        self.tenant_id = str(claims["tenant_id"])
        self.dry_run = dry_run
        self.settings = settings or get_settings()
        self.run_id: str | None = None
        self._own = conn is None
        self.conn = conn or psycopg.connect(
            dsn or self.settings.database_url, autocommit=True, row_factory=dict_row, connect_timeout=5
        )
        if dry_run:
            self.conn.execute("set default_transaction_read_only = on")

    @contextmanager
    def tx(self) -> Iterator[psycopg.Connection[Any]]:
        """One transaction as the caller (read-only in a dry run)."""
        with db.as_caller(self.claims, self.conn) as c:
            yield c

    def call(self, function: str, /, **args: Any) -> Any:
        """`db.call` in its own transaction."""
        with self.tx() as c:
            return db.call(c, function, **args)

    def rows(self, function: str, /, **args: Any) -> list[dict[str, Any]]:
        """`db.rows` in its own transaction."""
        with self.tx() as c:
            return db.rows(c, function, **args)

    def close(self) -> None:
        """Closes the connection if the session opened it (else resets the dry-run setting)."""
        if self._own:
            self.conn.close()
        elif self.dry_run:
            self.conn.execute("reset default_transaction_read_only")

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- the rate limit ---------------------------------------------------------------------------------


class RateLimiter:
    """At most `per_minute` operations per clock minute. A real run counts them in Postgres
    (cortex.consolidation_take_ops: shared by every process of the tenant, shown by `status`); a
    dry run, which writes nothing, counts in this process. `clock` and `sleep` are injectable."""

    def __init__(
        self,
        per_minute: int,
        session: Session | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if per_minute < 1:
            raise CortexError(422, "invalid_parameter_value", "rate_limit must be at least 1 per minute", "rate_limit")
        self.per_minute = per_minute
        self.session = session if session is not None and not session.dry_run else None
        self.clock = clock
        self.sleep = sleep
        self._minute = -1
        self._used = 0
        self.waited_seconds = 0.0

    def _take(self, n: int) -> int:
        if self.session is not None:
            at = datetime.fromtimestamp(self.clock(), UTC)
            return int(self.session.call("cortex.consolidation_take_ops", p_limit=self.per_minute, p_ops=n, p_at=at))
        minute = int(self.clock() // 60)
        if minute != self._minute:
            self._minute, self._used = minute, 0
        granted = max(0, min(n, self.per_minute - self._used))
        self._used += granted
        return granted

    def acquire(self, n: int) -> int:
        """Takes between 1 and n operations, waiting for the next minute while none are left."""
        while True:
            granted = self._take(max(1, n))
            if granted > 0:
                return granted
            wait = 60 - (self.clock() % 60) + 0.01
            self.waited_seconds += wait
            self.sleep(wait)


# --- the base contract ------------------------------------------------------------------------------


class ConsolidationAgent(ABC, Generic[T]):
    """Seed 003's abstract agent: `scan()` finds items (reads only), `process_item()` processes one
    (nothing written in a dry run; an audit item recorded), `run()` does both under the rate limit
    with per-item failure isolation. Subclasses may process a batch in one SQL call
    (`process_batch`); `process_item` is then the batch of one."""

    name: ClassVar[str]
    batch_size: ClassVar[int] = 50

    def __init__(
        self,
        dry_run: bool = False,
        rate_limit: int = 100,
        confidence_config: ConfidenceConfig | None = None,
        *,
        session: Session,
        limit: int = 1000,
        limiter: RateLimiter | None = None,
        heartbeat: Callable[[], None] | None = None,
    ) -> None:
        """dry_run: preview without changes (the session must be a dry-run one too); rate_limit:
        operations per minute; confidence_config: auto / log / wait thresholds; session: the tenant
        connection; limit: at most this many candidates per scan; heartbeat: called between batches."""
        if dry_run != session.dry_run:
            raise ValueError("an agent's dry_run must match its session's")
        self.dry_run = dry_run
        self.rate_limit = rate_limit
        self.confidence = confidence_config or ConfidenceConfig()
        self.session = session
        self.limit = limit
        self.limiter = limiter or RateLimiter(rate_limit, session)
        self.heartbeat = heartbeat
        self.failures: list[dict[str, str]] = []
        self.scanned = 0

    @abstractmethod
    def scan(self) -> list[str]:
        """The ids to process (may be empty); never writes."""

    @abstractmethod
    def process_item(self, memory_id: str) -> T:
        """Processes one id; returns its result model or raises. Writes nothing in a dry run."""

    def process_batch(self, ids: Sequence[str]) -> list[T]:
        """Processes several ids; by default one by one. Raising fails the whole batch (run() then
        retries its items one by one)."""
        return [self.process_item(i) for i in ids]

    def run(self) -> list[T]:
        """scan(), then process every id in batches, each taken from the rate limit; a failing
        batch is retried item by item, and an item that fails is recorded in `failures` (never
        aborting the others). Returns the results of the items that succeeded."""
        ids = self.scan()
        self.scanned = len(ids)
        self.failures = []
        results: list[T] = []
        pending = list(ids)
        while pending:
            granted = self.limiter.acquire(min(self.batch_size, len(pending)))
            batch, pending = pending[:granted], pending[granted:]
            try:
                results.extend(self.process_batch(batch))
            except Exception as exc:
                if len(batch) == 1:  # nothing to isolate: the item failed
                    self.failures.append({"id": batch[0], "error": _describe(exc)})
                    continue
                log.info("%s: a batch of %d failed (%s); retrying one by one", self.name, len(batch), exc)
                for item in batch:
                    try:
                        results.extend(self.process_batch([item]))
                    except Exception as item_exc:
                        self.failures.append({"id": item, "error": _describe(item_exc)})
            if self.heartbeat is not None:
                self.heartbeat()
        return results

    # helpers

    def _flag(self) -> dict[str, Any]:
        return {"p_run_id": self.session.run_id, "p_dry_run": self.dry_run}


def _real(value: float) -> db.Typed:
    # A Python float is a double precision; the SQL thresholds are real.
    return db.typed(value, "real")


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CortexError):
        return f"{exc.message}" + (f" (SQLSTATE {exc.sqlstate})" if exc.sqlstate else "")
    return f"{type(exc).__name__}: {exc}"


# --- decay ----------------------------------------------------------------------------------------


class DecayAnalyzer(ConsolidationAgent[DecayResult]):
    """Memories approaching the forget threshold (score < 0.35), most urgent (< 0.10) first;
    permanent memories never. Recommends reinforce, consolidate, promote or gc; an item for each
    urgent one; gc archives when confident (never deletes)."""

    name = "decay"
    batch_size = 100

    def scan(self) -> list[str]:
        """Memories in the danger zone, lowest score first (cortex.consolidation_decay_candidates)."""
        rows = self.session.rows("cortex.consolidation_decay_candidates", p_limit=self.limit)
        return [str(r["memory_id"]) for r in rows]

    def process_batch(self, ids: Sequence[str]) -> list[DecayResult]:
        """Scores, recommends and records a batch in one call (cortex.consolidation_decay_process)."""
        out = self.session.call("cortex.consolidation_decay_process", p_ids=db.typed(list(ids), "uuid[]"),
                                p_auto=_real(self.confidence.auto_threshold), **self._flag())  # fmt: skip
        return [DecayResult.model_validate(r) for r in out]

    def process_item(self, memory_id: str) -> DecayResult:
        """One memory's decay analysis."""
        return self.process_batch([memory_id])[0]


# --- cluster --------------------------------------------------------------------------------------


class ClusterDetector(ConsolidationAgent[ClusterResult]):
    """Clusters of similar memories (embedding similarity and shared entities) with a cohesion
    score; action merge, link or ignore; an item from cohesion 0.4, never two for the same set."""

    name = "cluster"
    batch_size = 50

    def __init__(self, *args: Any, pair_min: float = 0.8, merge_min: float = 0.85, **kwargs: Any) -> None:
        """pair_min: the cosine a pair needs to join a cluster; merge_min: the cohesion of a merge."""
        super().__init__(*args, **kwargs)
        self.pair_min = pair_min
        self.merge_min = merge_min
        self._clusters: dict[str, dict[str, Any]] = {}

    def _candidates(self, seed: str | None = None) -> list[dict[str, Any]]:
        return self.session.rows("cortex.consolidation_cluster_candidates", p_seed=seed, p_limit=self.limit,
                                 p_pair_min=_real(self.pair_min), p_merge_min=_real(self.merge_min))  # fmt: skip

    def scan(self) -> list[str]:
        """One id per candidate cluster (its smallest member id), most cohesive first."""
        self._clusters = {str(c["seed_id"]): c for c in self._candidates()}
        return list(self._clusters)

    def process_batch(self, ids: Sequence[str]) -> list[ClusterResult]:
        """Records the clusters of these seed ids in one call (cortex.consolidation_cluster_process)."""
        clusters = []
        for seed in ids:
            found = self._clusters.get(seed) or next(iter(self._candidates(seed)), None)
            if found is None:
                raise CortexError(404, "not_found", f"memory {seed} is in no cluster candidate", "memory_id")
            clusters.append(
                {**{k: found[k] for k in ("cohesion", "mean_cosine", "action", "confidence")},
                 "cluster_id": str(found["cluster_id"]), "memory_ids": [str(m) for m in found["memory_ids"]],
                 "shared_entities": list(found["shared_entities"] or [])}
            )  # fmt: skip
        out = self.session.call("cortex.consolidation_cluster_process", p_clusters=Jsonb(clusters),
                                p_auto=_real(self.confidence.auto_threshold), **self._flag())  # fmt: skip
        return [ClusterResult.model_validate(r) for r in out]

    def process_item(self, memory_id: str) -> ClusterResult:
        """The cluster of one memory (the seed id of a scan, or any member)."""
        return self.process_batch([memory_id])[0]


# --- merge ----------------------------------------------------------------------------------------


class SemanticMerge(ConsolidationAgent[MergeResult]):
    """Merges the clusters of consolidation:merge items: the model's text (schema-checked) or the
    deterministic merge, checked to keep every unique sentence and entity, applied in one SQL
    transaction (originals superseded, consolidated_from edges, content diff kept)."""

    name = "merge"
    batch_size = 1

    def scan(self) -> list[str]:
        """Open consolidation:merge items confident enough to merge without a person (others wait)."""
        items = self.session.call("list_consolidation_items", status="open", limit=500)["items"]
        ready = [
            i
            for i in items
            if "consolidation:merge" in i["labels"]
            and self.confidence.decide(float(i.get("confidence") or 0)) != "wait"
        ]
        return [str(i["id"]) for i in ready][: self.limit]

    def merged_text(self, members: list[dict[str, Any]]) -> tuple[merging.MergedText, str, Any]:
        """The merged text, who wrote it ('deterministic' or the model id) and the budget plan (None
        offline). A model answer failing the schema raises LLMError with its usage."""
        fallback = merging.deterministic_merge(members)
        settings = self.session.settings
        if not settings.use_remote_llm or self.dry_run:
            return fallback, "deterministic", None
        prompt = prompts.merge_prompt(members)
        with self.session.tx() as c:
            plan = budget.reserve(c, self.session.tenant_id, "system", MERGE_OPERATION, budget.estimate(prompt),
                                  settings=settings)  # fmt: skip
        if plan.model is None:  # over budget: the deterministic merge, and the reservation released
            with self.session.tx() as c:
                budget.settle(c, plan, None)
            return fallback, "deterministic", None
        try:
            answer, usage = llm.merge_memories(members, settings, model=plan.model, max_tokens=plan.max_tokens)
        except llm.LLMError as exc:
            with self.session.tx() as c:
                budget.settle(c, plan, budget.failed_usage(plan, exc))
            raise
        text = merging.MergedText(answer.title.strip(), answer.body.strip(), fallback.entities)
        return text, usage.model, (plan, usage)

    def process_item(self, memory_id: str, force: bool = False) -> MergeResult:
        """Merges the memories of one consolidation:merge item (`memory_id` is the item id): claims
        it, writes the merged text, checks it, applies it; a failure blocks the item with its error.
        force: a person asked (`process`), so a blocked item is reopened and confidence ignored."""
        item_id = memory_id
        material = self.session.call("cortex.consolidation_merge_material", p_item_id=item_id)
        item, members = material["item"], material["members"]
        if not force and self.confidence.decide(float(item.get("confidence") or 0)) == "wait":
            raise CortexError(409, "needs_person", f"item {item_id} waits for a person (confidence "
                              f"{item.get('confidence')})", "item_id",
                              "run `cortex consolidate process ITEM`")  # fmt: skip
        if self.dry_run:
            text = merging.deterministic_merge(members)
            return MergeResult(
                new_memory_id=uuid.uuid5(uuid.NAMESPACE_URL, f"cortex:merge:{item_id}"),
                source_ids=[m["id"] for m in members], relation_ids=[],
                content_diff=merging.content_diff(members, text.title, text.body),
                entities_preserved=len(text.entities), success=True, beads_issue_id=str(item_id),
            )  # fmt: skip
        if force and item["status"] == "blocked":
            self.session.call("cortex.consolidation_reopen_item", p_item_id=item_id)
        claimed = self.session.call("claim_consolidation_item", item_id=item_id)
        if not claimed["claimed"]:
            raise CortexError(409, "already_claimed", f"item {item_id} is {claimed['item']['status']}: "
                              "another run has it, or it is done", "item_id")  # fmt: skip
        spent: Any = None
        try:
            text, writer, spent = self.merged_text(members)
            lost = merging.missing_content(members, text.title, text.body)
            if lost:
                raise CortexError(422, "merge_lost_content", f"the merged text lost {len(lost)} sentence(s) or "
                                  f"entit(ies): {'; '.join(lost)[:500]}", "body")  # fmt: skip
            diff = merging.content_diff(members, text.title, text.body)
            with self.session.tx() as c:
                result = db.call(c, "cortex.consolidation_merge_apply", p_item_id=item_id, p_title=text.title,
                                 p_body=text.body, p_entities=db.typed(text.entities, "text[]"),
                                 p_content_diff=diff, p_model=writer, p_run_id=self.session.run_id)  # fmt: skip
                if spent is not None:
                    budget.settle(c, spent[0], spent[1])
        except (CortexError, llm.LLMError) as exc:
            if spent is not None:  # the model answered but its text was refused: recorded with the error
                with self.session.tx() as c:
                    budget.settle(c, spent[0], budget.failed_usage(spent[0], exc, spent[1]))
            error = exc.message if isinstance(exc, CortexError) else str(exc)
            self.session.call("block_consolidation_item", item_id=item_id, error=f"merge failed: {error}"[:4000])
            raise
        return MergeResult.model_validate(result)


# --- promote --------------------------------------------------------------------------------------


class LTMPromoter(ConsolidationAgent[PromotionResult]):
    """Promotes high-value memories (importance >= 0.7, confidence >= 0.7, and used 3 times or 7
    days old) to the vault: a markdown file with front matter, status promoted and its path
    recorded; never two files for one memory."""

    name = "promote"
    batch_size = 50

    def __init__(self, *args: Any, vault_dir: Path | None = None, **kwargs: Any) -> None:
        """vault_dir: the tenant's vault folder (default: `vault.vault_root` of the settings)."""
        super().__init__(*args, **kwargs)
        self.vault_dir = vault_dir or vault.vault_root(self.session.tenant_id, self.session.settings)

    def scan(self) -> list[str]:
        """Memories meeting the criteria that are not promoted yet, most important first."""
        rows = self.session.rows("cortex.consolidation_promote_candidates", p_limit=self.limit)
        return [str(r["memory_id"]) for r in rows]

    def process_batch(self, ids: Sequence[str]) -> list[PromotionResult]:
        """Writes each memory's file (unless there for it already) and records the promotions."""
        rows = {str(r["memory_id"]): r for r in self.session.rows(
            "cortex.consolidation_promote_candidates", p_ids=db.typed(list(ids), "uuid[]"))}  # fmt: skip
        results: list[PromotionResult] = []
        written: list[dict[str, Any]] = []
        for memory_id in ids:
            row = rows.get(memory_id)
            if row is None:
                raise CortexError(404, "not_found", f"memory {memory_id} not found (or not a written memory)",
                                  "memory_id")  # fmt: skip
            if not row["eligible"] and not (row["memory"].get("metadata") or {}).get("promoted"):
                raise CortexError(422, "not_eligible", f"memory {memory_id} does not meet the promotion criteria "
                                  f"(meets: {', '.join(row['criteria_met']) or 'none'})", "memory_id")  # fmt: skip
            criteria = list(row["criteria_met"])
            if self.dry_run:
                results.append(PromotionResult(memory_id=uuid.UUID(memory_id), vault_path=row["vault_path"],
                                               criteria_met=criteria, success=True))  # fmt: skip
                continue
            # The file first (kept when it is there for this memory), then one call records the batch.
            vault.write_note(self.vault_dir, row["vault_path"], vault.render(row["memory"], criteria), memory_id)
            written.append({"memory_id": memory_id, "vault_path": row["vault_path"], "criteria_met": criteria})
        if written:
            recorded = self.session.call("cortex.consolidation_record_promotions", p_items=Jsonb(written),
                                         p_run_id=self.session.run_id)  # fmt: skip
            results += [PromotionResult.model_validate(r) for r in recorded]
        return results

    def process_item(self, memory_id: str) -> PromotionResult:
        """Promotes one memory (a no-op returning the first record when it was promoted already)."""
        return self.process_batch([memory_id])[0]


# --- relations ------------------------------------------------------------------------------------


class RelationshipDiscovery(ConsolidationAgent[RelationResult]):
    """Finds implicit relations: memories about a shared entity that read more alike than that
    entity's memories do on average and are not yet related, with strength, reasoning and
    confidence; applied at the log threshold, else waiting for a person."""

    name = "relations"
    batch_size = 100

    def __init__(self, *args: Any, min_lift: float = 0.2, **kwargs: Any) -> None:
        """min_lift: how much more alike than its entity's memories on average a pair must read
        ((cosine - baseline) / (1 - baseline)) to be proposed."""
        super().__init__(*args, **kwargs)
        self.min_lift = min_lift
        self._pairs: dict[str, dict[str, Any]] = {}

    def scan(self) -> list[str]:
        """Candidate pairs "<from id>:<to id>", strongest first; never an already related pair."""
        rows = self.session.rows("cortex.consolidation_relation_candidates", p_limit=self.limit,
                                 p_min_lift=_real(self.min_lift))  # fmt: skip
        self._pairs = {f"{r['from_memory_id']}:{r['to_memory_id']}": r for r in rows}
        return list(self._pairs)

    def process_batch(self, ids: Sequence[str]) -> list[RelationResult]:
        """Records (and, when confident, applies) a batch of pairs in one call."""
        pairs = []
        for key in ids:
            found = self._pairs.get(key)
            if found is None:
                raise CortexError(404, "not_found", f"pair {key} is not a relation candidate (scan first)", "pair")
            pairs.append({k: (str(v) if isinstance(v, uuid.UUID) else v) for k, v in found.items()})
        out = self.session.call("cortex.consolidation_relations_process", p_pairs=Jsonb(pairs),
                                p_log=_real(self.confidence.log_threshold), **self._flag())  # fmt: skip
        return [RelationResult.model_validate(r) for r in out]

    def process_item(self, memory_id: str) -> RelationResult:
        """One candidate pair ("<from id>:<to id>")."""
        return self.process_batch([memory_id])[0]


AGENT_CLASSES: dict[str, type[ConsolidationAgent[Any]]] = {
    "decay": DecayAnalyzer,
    "cluster": ClusterDetector,
    "merge": SemanticMerge,
    "promote": LTMPromoter,
    "relations": RelationshipDiscovery,
}
