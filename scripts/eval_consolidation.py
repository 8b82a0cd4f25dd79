#!/usr/bin/env python3
"""Quality of consolidation (issue 10): precision and recall of the cluster agent, of its merge
candidates and of the relations agent, on a labelled generated set.

usage: eval_consolidation.py [--seed 13] [--companies 10] [--json PATH] [--keep]
       (scripts/eval consolidation [...] runs it with the environment set)

What it does, in order:
1. A fresh database (cortex_eval_consolidation_<seed>), one tenant, its agents. The write-time and
   worker de-duplication are switched off for this tenant (memory_settings dedup_trigram and
   dedup_cosine 1: only identical text is folded), so consolidation is measured on its own.
2. A seeded world: N companies (system entity nodes), and about each, facts from three topic
   families (billing, delivery, contact), two facts a family. Each fact is a labelled group:
   its statement, usually a near-duplicate (a word changed or added) and a paraphrase (other words,
   same meaning). Look-alikes that must never merge: the same template about another company
   (every company has the same kinds of facts) and, per company, one fact restated with another
   number (a contradiction, "within 30 days" / "within 60 days").
3. The worker's indexing with the real local model (embeddings, relates_to, mentions), then the
   agents as `cortex consolidate run --all` runs them (decay, cluster, merge, promote, relations).
4. Scores, over pairs of memories:
   - cluster: a pair is predicted when both are in one cluster item; truth: same group;
   - merge candidates: pairs in clusters whose action is merge; truth: same group;
   - relations: a pair is predicted when the relations agent proposed it (an item); it is right when
     both are about the same company and the same topic family (a duplicate counts as related too).
     Recall is over such pairs of memories not merged away and not already joined by an edge (the
     auto-linker's relates_to among them) before the run: the pairs the agent could still find.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg
from benchlib import base_dsn, machine_info, recreate_database, with_database
from memindex import index_all

from cortex import db
from cortex.consolidation import service
from cortex.consolidation.models import AGENTS

COMPANIES = [
    "Acme Corp",
    "Globex",
    "Initech",
    "Umbrella Health",
    "Stark Logistics",
    "Wayne Foods",
    "Hooli",
    "Vandelay Imports",
    "Soylent Farms",
    "Tyrell Systems",
    "Cyberdyne",
    "Wonka Sweets",
    "Oscorp",
    "Duff Brewing",
]
WAREHOUSES = ["Lyon", "Rotterdam", "Leeds", "Porto", "Gdansk", "Turin"]
# family -> facts; each fact: (statement, near-duplicate, paraphrase);
# {e} company, {n} days, {h} an hour, {w} a warehouse.
FAMILIES: dict[str, list[tuple[str, str, str]]] = {
    "billing": [
        (
            "{e} pays invoices within {n} days.",
            "{e} pays its invoices within {n} days.",
            "Payment terms for {e} are net {n}: they settle a bill {n} days after it is issued.",
        ),
        (
            "{e} wants every invoice sent to the accounts payable mailbox.",
            "{e} wants each invoice sent to the accounts payable mailbox.",
            "Invoices for {e} go to their accounts payable inbox, never to the buyer.",
        ),
    ],
    "delivery": [
        (
            "{e} receives deliveries at the {w} warehouse.",
            "{e} receives its deliveries at the {w} warehouse.",
            "Ship orders for {e} to their warehouse in {w}.",
        ),
        (
            "{e} only accepts trucks arriving before {h} am.",
            "{e} only accepts trucks that arrive before {h} am.",
            "Deliveries to {e} must reach the dock before {h} in the morning.",
        ),
    ],
    "contact": [
        (
            "The buyer at {e} prefers phone calls to email.",
            "The buyer at {e} prefers phone calls over email.",
            "When reaching {e}, call their buyer rather than writing an email.",
        ),
        (
            "The buyer at {e} is on holiday every August.",
            "The buyer at {e} is away on holiday every August.",
            "Nobody answers purchasing questions at {e} in August: the buyer takes the month off.",
        ),
    ],
}


def setup(dsn: str) -> str:
    """The tenant (de-duplication off), its agents; returns the tenant id."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("select cortex.create_tenant('Eval Consolidation', 'evalc', 'UTC')").fetchone()
        assert row is not None
        tid = str(row[0])
        for agent in ("luna", "mia"):
            conn.execute("select cortex.create_agent(%s, %s)", (tid, agent))
        conn.execute(
            "update cortex.memory_settings set dedup_trigram = 1, dedup_cosine = 1 where tenant_id = %s", (tid,)
        )
    return tid


def generate(dsn: str, tid: str, rng: random.Random, companies: int) -> list[dict[str, Any]]:
    """Writes the world through public.remember (as luna and mia); returns the labelled memories
    [{id, company, family, group, variant}]."""
    memories: list[dict[str, Any]] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        with db.as_caller(db.agent_claims(tid, "luna"), conn) as c:
            for name in COMPANIES[:companies]:
                db.call(c, "remember", kind="system", title=name, body=f"{name}, a customer company.")
        for company in COMPANIES[:companies]:
            values = {
                "e": company,
                "n": rng.choice([15, 30, 45, 60, 90]),
                "h": rng.choice([6, 7, 8, 9]),
                "w": rng.choice(WAREHOUSES),
            }
            for family, facts in FAMILIES.items():
                for fi, variants in enumerate(facts):
                    group = f"{company}/{family}/{fi}"
                    chosen = [("statement", variants[0])]
                    if rng.random() < 0.8:
                        chosen.append(("near-duplicate", variants[1]))
                    if rng.random() < 0.8:
                        chosen.append(("paraphrase", variants[2]))
                    for variant, template in chosen:
                        memories.append(
                            {
                                "company": company,
                                "family": family,
                                "group": group,
                                "variant": variant,
                                "text": template.format(**values),
                            }
                        )
                    if "{n}" in variants[0] or "{h}" in variants[0]:
                        # The same statement with another number: a contradiction, never a duplicate.
                        other = {**values, "n": values["n"] * 2, "h": values["h"] + 2}
                        memories.append(
                            {
                                "company": company,
                                "family": family,
                                "group": group + "/other-number",
                                "variant": "look-alike",
                                "text": variants[0].format(**other),
                            }
                        )
        rng.shuffle(memories)
        for i, m in enumerate(memories):
            agent = "luna" if i % 2 else "mia"
            with db.as_caller(db.agent_claims(tid, agent), conn) as c:
                written = db.call(c, "remember", kind="fact", title=m["text"], body="")
                m["id"] = str(written["memory"]["id"])
                assert written["created"], m
    return memories


def pairs(sets: Iterable[Iterable[str]]) -> set[frozenset[str]]:
    """Every unordered pair within each set."""
    return {frozenset(p) for s in sets for p in itertools.combinations(sorted(set(s)), 2)}


def prf(predicted: set[frozenset[str]], truth: set[frozenset[str]]) -> dict[str, Any]:
    """Precision, recall and the counts."""
    hit = len(predicted & truth)
    return {
        "predicted": len(predicted),
        "true": len(truth),
        "correct": hit,
        "precision": round(hit / len(predicted), 4) if predicted else None,
        "recall": round(hit / len(truth), 4) if truth else None,
    }


def evaluate(
    dsn: str, tid: str, memories: list[dict[str, Any]], rate_limit: int, options: dict[str, dict[str, float]]
) -> dict[str, Any]:
    """Runs every agent and scores cluster, merge candidates and relations."""
    by_id = {m["id"]: m for m in memories}
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        # Pairs already joined by an edge: the relations agent must never propose them.
        joined = {
            frozenset((str(a), str(b)))
            for a, b in conn.execute(
                "select source_id, target_id from cortex.memory_edges where relation <> 'mentions'"
            )
        }
        report = service.run_agents(
            db.agent_claims(tid, "system"),
            list(AGENTS),
            rate_limit=rate_limit,
            limit=100_000,
            conn=conn,
            agent_options=options,
        )
    seconds = time.perf_counter() - started
    with psycopg.connect(dsn, autocommit=True) as conn:
        items = [
            {"agent": r[0], "action": r[1], "ids": [str(x) for x in r[2]], "labels": list(r[3])}
            for r in conn.execute("select agent, action, memory_ids, labels from cortex.consolidation_items")
        ]
    clusters = [i["ids"] for i in items if i["agent"] == "cluster"]
    merges = [i["ids"] for i in items if i["agent"] == "cluster" and "consolidation:merge" in i["labels"]]
    relations = {frozenset(i["ids"]) for i in items if i["agent"] == "relations"}
    groups: dict[str, list[str]] = {}
    for m in memories:
        groups.setdefault(m["group"], []).append(m["id"])
    same_group = pairs(groups.values())

    def related(p: frozenset[str]) -> bool:
        a, b = (by_id[x] for x in p)
        return a["company"] == b["company"] and a["family"] == b["family"]

    merged_away = {x for ids in merges for x in ids}
    alive = [m["id"] for m in memories if m["id"] not in merged_away]
    relation_truth = {p for p in pairs([alive]) if related(p) and p not in joined}
    relation_hits = {p for p in relations if related(p)}
    variants: dict[str, int] = {}
    for m in memories:
        variants[m["variant"]] = variants.get(m["variant"], 0) + 1
    return {
        "memories": len(memories),
        "variants": variants,
        "groups": len(groups),
        "run_seconds": round(seconds, 2),
        "agents": {
            n: {k: a[k] for k in ("scanned", "processed", "failed", "seconds")} for n, a in report["agents"].items()
        },
        "cluster": prf(pairs(clusters), same_group),
        "merge_candidates": prf(pairs(merges), same_group),
        "relations": {
            "predicted": len(relations),
            "true": len(relation_truth),
            "correct": len(relation_hits),
            "precision": round(len(relation_hits) / len(relations), 4) if relations else None,
            "recall": round(len(relation_hits & relation_truth) / len(relation_truth), 4) if relation_truth else None,
        },
        "lookalikes_merged": sum(
            1 for ids in merges for a, b in itertools.combinations(ids, 2) if by_id[a]["group"] != by_id[b]["group"]
        ),
    }


def markdown(result: dict[str, Any]) -> str:
    """The tables for docs/benchmarks.md."""
    rows = ["| | predicted pairs | correct | precision | recall |", "|---|---:|---:|---:|---:|"]
    for name in ("cluster", "merge_candidates", "relations"):
        s = result["scores"][name]
        rows.append(
            f"| {name.replace('_', ' ')} | {s['predicted']} | {s['correct']} | {s['precision']} | {s['recall']} |"
        )
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Builds the world, indexes it, runs the agents, prints and writes the scores."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--companies", type=int, default=10, choices=range(2, len(COMPANIES) + 1), metavar="2..14")
    parser.add_argument("--rate-limit", type=int, default=100_000, help="operations per minute (default: no wait)")
    parser.add_argument("--json", type=Path, default=Path("bench-results/eval_consolidation.json"))
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--pair-min", type=float, default=0.8, help="cluster: cosine of a pair (default 0.8)")
    parser.add_argument("--merge-min", type=float, default=0.85, help="cluster: cohesion of a merge (default 0.85)")
    parser.add_argument("--min-lift", type=float, default=0.2, help="relations: lift to propose (default 0.2)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    name = f"cortex_eval_consolidation_{args.seed}"
    dsn = with_database(base_dsn(), name)
    started = time.perf_counter()
    recreate_database(dsn, "cortex_eval")
    tid = setup(dsn)
    print(f"generating the labelled world (seed {args.seed}, {args.companies} companies)", flush=True)
    memories = generate(dsn, tid, rng, args.companies)
    print(f"  {len(memories)} memories; indexing with the local model", flush=True)
    indexing = index_all(dsn, worker_id="eval-consolidation", max_seconds=1800)
    print(f"  {indexing}", flush=True)
    options = {
        "cluster": {"pair_min": args.pair_min, "merge_min": args.merge_min},
        "relations": {"min_lift": args.min_lift},
    }
    scores = evaluate(dsn, tid, memories, args.rate_limit, options)
    with psycopg.connect(dsn, autocommit=True) as conn:
        machine = machine_info(conn)
    if not args.keep:
        with psycopg.connect(with_database(dsn, "postgres"), autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')
    result = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seed": args.seed,
        "companies": args.companies,
        "thresholds": options,
        "machine": machine,
        "indexing": indexing,
        "scores": scores,
        "seconds": round(time.perf_counter() - started, 1),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2, default=str))
    print(
        json.dumps({k: scores[k] for k in ("cluster", "merge_candidates", "relations", "lookalikes_merged")}, indent=2)
    )
    print(markdown(result))
    ok = (scores["relations"]["precision"] or 0) > 0.8
    print(f"relations precision > 0.8: {'yes' if ok else 'NO'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
