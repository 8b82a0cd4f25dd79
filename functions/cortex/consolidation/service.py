"""Consolidation service: runs of the agents, processing one item, and the audit trail's calls.

A run (`run_agents`) starts a row in cortex.consolidation_runs (one at a time per tenant: a second
run is refused with 409, or waits up to `wait_seconds` for the first), runs the agents in pipeline
order (decay, cluster, merge, promote, relations) with one rate limiter, keeps its lease alive
between batches, and finishes with a report: per agent what was scanned, processed and failed. A
dry run records no run and writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

from cortex import db
from cortex.config import Settings
from cortex.consolidation.agents import (
    AGENT_CLASSES,
    ConsolidationAgent,
    LTMPromoter,
    RateLimiter,
    SemanticMerge,
    Session,
)
from cortex.consolidation.models import AGENTS, ConfidenceConfig
from cortex.errors import CortexError

Claims = Mapping[str, Any]
LEASE_SECONDS = 600


def agent_names(names: Sequence[str]) -> list[str]:
    """The given agents in pipeline order; 422 naming `agent` for an unknown one."""
    unknown = [n for n in names if n not in AGENTS]
    if unknown or not names:
        raise CortexError(422, "invalid_parameter_value", f"unknown agent {unknown[0]!r}" if unknown else
                          "no agent given", "agent", f"agents: {', '.join(AGENTS)}")  # fmt: skip
    return [a for a in AGENTS if a in names]


def make_agent(
    name: str,
    session: Session,
    *,
    rate_limit: int = 100,
    confidence: ConfidenceConfig | None = None,
    limiter: RateLimiter | None = None,
    heartbeat: Callable[[], None] | None = None,
    limit: int = 1000,
    vault_dir: Path | None = None,
    options: Mapping[str, Any] | None = None,
) -> ConsolidationAgent[Any]:
    """An agent of this name on the session (the dry-run flag is the session's); `options` are its
    own keyword arguments (cluster: pair_min, merge_min; relations: min_lift)."""
    cls = AGENT_CLASSES[agent_names([name])[0]]
    kwargs: dict[str, Any] = {"session": session, "limiter": limiter, "heartbeat": heartbeat, "limit": limit}
    kwargs.update(options or {})
    if cls is LTMPromoter:
        kwargs["vault_dir"] = vault_dir
    return cls(session.dry_run, rate_limit, confidence, **kwargs)


def _start(session: Session, names: list[str], wait_seconds: float, sleep: Callable[[float], None]) -> str:
    deadline = time.monotonic() + max(0.0, wait_seconds)
    while True:
        try:
            run = session.call("cortex.consolidation_start_run", p_agents=db.typed(names, "text[]"),
                               p_lease_seconds=LEASE_SECONDS)  # fmt: skip
            return str(run["id"])
        except CortexError as exc:
            if exc.sqlstate != "55000" or time.monotonic() >= deadline:
                raise
            sleep(1.0)


def run_agents(
    claims: Claims,
    names: Sequence[str],
    *,
    dry_run: bool = False,
    rate_limit: int = 100,
    confidence: ConfidenceConfig | None = None,
    wait_seconds: float = 0.0,
    limit: int = 1000,
    vault_dir: Path | None = None,
    conn: psycopg.Connection[Any] | None = None,
    settings: Settings | None = None,
    sleep: Callable[[float], None] = time.sleep,
    agent_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Runs these agents (pipeline order) for the claims' tenant and returns the report
    {run_id, dry_run, agents: {name: {scanned, processed, failed, failures, results, seconds}}}.
    agent_options: per agent, its own keyword arguments (see make_agent)."""
    chosen = agent_names(list(names))
    with Session(claims, dry_run=dry_run, conn=conn, settings=settings) as session:
        run_id = None if dry_run else _start(session, chosen, wait_seconds, sleep)
        session.run_id = run_id
        limiter = RateLimiter(rate_limit, session, sleep=sleep)

        def heartbeat() -> None:
            """Keeps the run's lease alive (between batches)."""
            if run_id is not None:
                session.call("cortex.consolidation_heartbeat", p_run_id=run_id, p_lease_seconds=LEASE_SECONDS)

        report: dict[str, Any] = {"run_id": run_id, "dry_run": dry_run, "agents": {}}
        status = "failed"
        try:
            for name in chosen:
                started = time.monotonic()
                agent = make_agent(name, session, rate_limit=rate_limit, confidence=confidence, limiter=limiter,
                                   heartbeat=heartbeat, limit=limit, vault_dir=vault_dir,
                                   options=(agent_options or {}).get(name))  # fmt: skip
                results = agent.run()
                report["agents"][name] = {
                    "scanned": agent.scanned,
                    "processed": len(results),
                    "failed": len(agent.failures),
                    "failures": agent.failures,
                    "results": [r.model_dump(mode="json") for r in results],
                    "seconds": round(time.monotonic() - started, 3),
                }
            report["rate_limit_waited_seconds"] = round(limiter.waited_seconds, 3)
            status = "done"
        finally:
            if run_id is not None:
                summary = {n: {k: v for k, v in a.items() if k != "results"} for n, a in report["agents"].items()}
                session.call("cortex.consolidation_finish_run", p_run_id=run_id, p_status=status,
                             p_report={"agents": summary})  # fmt: skip
    return report


def process_item(
    claims: Claims,
    item_id: str,
    *,
    dry_run: bool = False,
    vault_dir: Path | None = None,
    conn: psycopg.Connection[Any] | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """A person processes one item now (`cortex consolidate process ITEM`): a merge item is merged
    (a blocked one reopened, whatever its confidence), a decay, cluster-link or relations item is
    applied, a promote item promotes its memory (a no-op when done). A dry run says what would be
    done. Returns {item, result}."""
    with Session(claims, dry_run=dry_run, conn=conn, settings=settings) as session:
        item = session.call("get_consolidation_item", item_id=item_id)
        if "consolidation:merge" in item["labels"]:
            agent = make_agent("merge", session)
            assert isinstance(agent, SemanticMerge)
            result: Any = agent.process_item(item_id, force=True).model_dump(mode="json")
        elif item["agent"] == "promote":
            result = make_agent("promote", session, vault_dir=vault_dir).process_item(str(item["memory_ids"][0]))
            result = result.model_dump(mode="json")
        elif dry_run:
            result = {"would_apply": item["action"], "status": item["status"]}
        else:
            if item["status"] == "blocked":
                session.call("cortex.consolidation_reopen_item", p_item_id=item_id)
            result = session.call("cortex.consolidation_apply_item", p_item_id=item_id)
        return {"item": session.call("get_consolidation_item", item_id=item_id), "result": result}


def status(claims: Claims, agent: str | None = None, rate_limit: int = 100) -> dict[str, Any]:
    """Seed 003's status: items per agent (pending, in_progress, blocked), total_pending and
    rate_limit_remaining (public.consolidation_status)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "consolidation_status", agent=agent, rate_limit=rate_limit)
    return result


def items(claims: Claims, **filters: Any) -> list[dict[str, Any]]:
    """Items matching every filter (agent, status, urgency, limit): public.list_consolidation_items."""
    with db.as_caller(claims) as conn:
        result: list[dict[str, Any]] = db.call(conn, "list_consolidation_items", **filters)["items"]
    return result


def undo_merge(claims: Claims, item_id: str, reason: str | None = None) -> dict[str, Any]:
    """Undoes a merge: the originals restored, the merged memory retired (public.undo_consolidation_merge)."""
    with db.as_caller(claims) as conn:
        result: dict[str, Any] = db.call(conn, "undo_consolidation_merge", item_id=item_id, reason=reason)
    return result
