"""The Claude prompts: the three of the Cortex spec, rendered by hand, and the auto-linker's contradiction check.

The spec writes them as handlebars templates. They are rendered here with plain string building,
following handlebars semantics: a missing value renders as an empty string, `{{#each}}` over an
empty list renders nothing, and a line holding only an `{{#if}}` block is dropped when the value
is empty (handlebars would leave a blank line; dropping it keeps the prompt tidy). Values are not
HTML-escaped: these are prompts, not web pages.

Two additions to the spec's text, both deliberate:
- the context and handoff prompts end with a paragraph asking for a JSON answer, so that the
  reply can be validated like the interaction summary's;
- raw interaction content longer than `MAX_PROMPT_CONTENT_CHARS` is cut, with a marker, because a
  pasted log of a megabyte would exceed the model's context window and fail on every retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

# ~12k tokens: far more than any real email or ticket, far below the model's context window.
MAX_PROMPT_CONTENT_CHARS = 50_000

CONTEXT_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape:\n"
    '{"summary": "...", "key_facts": ["..."], "current_status": "...", "recommended_tone": "..."}'
)

HANDOFF_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape:\n"
    '{"context_summary": "...", "suggested_action": "..."}'
)


def _text(value: object) -> str:
    """Render one template value the way handlebars would (None → ""), dates as ISO 8601."""
    if value is None:
        return ""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return str(value)


def _mapping(value: object) -> Mapping[str, Any]:
    # The material comes from SQL as JSON; any level may be null or, defensively, the wrong type.
    return value if isinstance(value, Mapping) else {}


def _sequence(value: object) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return []


def _truncate_content(content: str) -> str:
    if len(content) <= MAX_PROMPT_CONTENT_CHARS:
        return content
    dropped = len(content) - MAX_PROMPT_CONTENT_CHARS
    return f"{content[:MAX_PROMPT_CONTENT_CHARS]}\n[... {dropped} more characters truncated]"


def interaction_summary_prompt(interaction_type: str, subject: str | None, raw_content: str | None) -> str:
    """Render the spec's "Interaction Summary Prompt" for one interaction.

    The `Subject:` line appears only when `subject` is non-empty; content beyond
    `MAX_PROMPT_CONTENT_CHARS` characters is truncated with a marker.
    """
    lines = [
        f"Summarize this {_text(interaction_type)} in 1-2 sentences. Extract:",
        "- Key points discussed",
        "- Any commitments or next steps",
        "- Sentiment (positive/neutral/negative)",
        "- Intent (question/complaint/purchase_intent/churn_risk/info_request/other)",
        "",
    ]
    if subject:
        lines += [f"Subject: {subject}", ""]
    lines += [
        "Content:",
        _truncate_content(_text(raw_content)),
        "",
        "Respond in JSON:",
        "{",
        '  "summary": "...",',
        '  "key_points": ["...", "..."],',
        '  "sentiment": "...",',
        '  "intent": "..."',
        "}",
    ]
    return "\n".join(lines)


def context_prompt(material: Mapping[str, Any]) -> str:
    """Render the spec's "Working Context Summary Prompt" from a contact's context material.

    `material` is the JSON built by the database: `contact`, `interaction_count`,
    `recent_interactions` (newest first) and `existing_context`; any of them may be null.
    """
    contact = _mapping(material.get("contact"))
    lines = [
        "You are generating a working context summary for an AI agent about to interact with a contact.",
        "",
        f"Contact: {_text(contact.get('name'))} ({_text(contact.get('email'))})",
        f"Company: {_text(contact.get('company_name'))}",
        f"Stage: {_text(contact.get('stage'))}",
        f"First contact: {_text(contact.get('first_touch_at'))}",
        f"Source: {_text(contact.get('source'))}",
        "",
        "Recent interactions (newest first):",
    ]
    for item in _sequence(material.get("recent_interactions")):
        it = _mapping(item)
        lines.append(
            f"- [{_text(it.get('date'))}] {_text(it.get('agent'))}: {_text(it.get('type'))}"
            f" — {_text(it.get('summary'))}"
        )
    lines += [
        "",
        "Generate a concise briefing with:",
        "1. A 2-3 sentence summary paragraph (who they are, key history, current relationship)",
        "2. 4-6 bullet point key facts (things the agent needs to know)",
        "3. Current status (one line)",
        "4. Recommended tone for communication",
        "",
        "Keep total output under 300 tokens. Be specific and actionable.",
        "",
        CONTEXT_JSON_INSTRUCTION,
    ]
    return "\n".join(lines)


def handoff_prompt(
    from_agent: str | None,
    to_agent: str | None,
    reason: str | None,
    reason_detail: str | None,
    material: Mapping[str, Any],
) -> str:
    """Render the spec's "Handoff Context Prompt".

    `to_agent` is the receiving agent, or a description of the human for escalations. The
    `DETAIL:` line appears only when `reason_detail` is non-empty.
    """
    contact = _mapping(material.get("contact"))
    existing = _mapping(material.get("existing_context"))
    lines = [
        "You are creating a handoff summary for an AI agent receiving a contact from another agent.",
        "",
        f"FROM: {_text(from_agent)}",
        f"TO: {_text(to_agent)}",
        f"REASON: {_text(reason)}",
    ]
    if reason_detail:
        lines.append(f"DETAIL: {reason_detail}")
    lines += [
        "",
        f"Contact: {_text(contact.get('name'))} at {_text(contact.get('company_name'))}",
        f"Current stage: {_text(contact.get('stage'))}",
        "",
        "Recent relevant interactions:",
    ]
    for item in _sequence(material.get("recent_interactions")):
        it = _mapping(item)
        lines.append(f"- [{_text(it.get('date'))}] {_text(it.get('summary'))}")
    lines += [
        "",
        "Working context summary:",
        _text(existing.get("summary")),
        "",
        "Key facts:",
    ]
    lines += [f"- {_text(fact)}" for fact in _sequence(existing.get("key_facts"))]
    lines += [
        "",
        "Generate a handoff briefing (150-200 tokens) that:",
        "1. Explains why this handoff is happening",
        "2. Summarizes what the receiving agent needs to know",
        "3. Suggests an immediate next action",
        "",
        f"Focus on actionable context for {_text(to_agent)}.",
        "",
        HANDOFF_JSON_INSTRUCTION,
    ]
    return "\n".join(lines)


CONTRADICTION_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape (one verdict per pair, by its number):\n"
    '{"verdicts": [{"pair": 0, "contradicts": true, "reason": "..."}]}'
)


def contradiction_prompt(pairs: Sequence[Mapping[str, Any]]) -> str:
    """The auto-linker's question: which numbered pairs of memories contradict each other. Each pair
    is {"newer": {kind, title, body}, "older": {...}, "similarity", "heuristic": reason or None}."""
    lines = [
        "You are checking an AI agent's memory for contradictions.",
        "For each numbered pair below, decide whether the newer and the older memory contradict each other:"
        " they cannot both be true at the same time about the same subject. A pair marked 'flagged' was"
        " found by a rule (different numbers or an opposite negation): confirm or reject it. Similar or"
        " related memories that can both be true do not contradict.",
        "",
    ]
    for i, pair in enumerate(pairs):
        newer, older = _mapping(pair.get("newer")), _mapping(pair.get("older"))
        flag = f" (flagged: {_text(pair.get('heuristic'))})" if pair.get("heuristic") else ""
        lines.append(f"Pair {i}{flag}")
        for label, node in (("Newer", newer), ("Older", older)):
            body = _truncate_content(_text(node.get("body")))[:1000]
            head = f"  {label} {_text(node.get('kind'))}: {_text(node.get('title'))}"
            lines.append(head + (f" - {body}" if body else ""))
        lines.append("")
    lines.append(CONTRADICTION_JSON_INSTRUCTION)
    return "\n".join(lines)
