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


CLASSIFY_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape (one entry per chunk, by its number):\n"
    '{"kinds": [{"chunk": 0, "kind": "decision"}]}'
)


def ingest_classification_prompt(chunks: Sequence[Mapping[str, Any]]) -> str:
    """Ingest's question: the kind of memory each numbered chunk of a file is. Each chunk is
    {"title", "body", "section"}; bodies are cut at 600 characters."""
    lines = [
        "You are sorting chunks of an AI agent's notes (MEMORY.md, AGENTS.md, logs) into kinds of memory.",
        "Kinds: fact (something true), decision (a choice that was made), event (something that happened at a"
        " time), preference (what someone likes or wants), pattern (a rule, convention or lesson that recurs),"
        " goal (something to achieve), observation (something noticed).",
        "",
    ]
    for i, c in enumerate(chunks):
        section = _text(c.get("section"))
        head = f"Chunk {i}" + (f" (under {section[:200]})" if section else "") + f": {_text(c.get('title'))[:300]}"
        lines.append(head)
        body = _truncate_content(_text(c.get("body")))[:600]
        if body:
            lines.append(f"  {body}")
        lines.append("")
    lines.append(CLASSIFY_JSON_INSTRUCTION)
    return "\n".join(lines)


# --- voice (seed 004): the next greeting of a voice agent -------------------------------------------

VOICE_PROMPT_OPENING = "You are preparing a voice agent's memory of a caller for their next call."
VOICE_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape:\n"
    '{"next_greeting": "...", "key_topics": ["...", "...", "..."], "sentiment": "engaged", '
    '"conversation_summary": "..."}'
)


def _xml(value: object) -> str:
    # Values inside the XML-structured prompt: & < > escaped so a transcript cannot close a section.
    return _text(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def voice_transcript(turns: Sequence[tuple[str, str]], limit: int = MAX_PROMPT_CONTENT_CHARS) -> str:
    """The call as `Agent: ...` / `User: ...` lines; over `limit` characters, the start is cut (the
    end of a call is what the next greeting continues from) with a marker."""
    text = "\n".join(f"{'Agent' if role == 'agent' else 'User'}: {message}" for role, message in turns)
    if len(text) <= limit:
        return text
    return "[... the start of the call is cut ...]\n" + text[-limit:]


def voice_state_prompt(
    agent_profile: Mapping[str, Any],
    caller_profile: Mapping[str, Any],
    turns: Sequence[tuple[str, str]],
    metadata: Mapping[str, Any] | None = None,
) -> str:
    """Seed 004's greeting prompt, XML-structured: <agent_profile>, <caller_profile>,
    <conversation_metadata>, <conversation_transcript>, <explicit_instructions>, <constraints> and
    <examples>, then the JSON answer asked for (validated as `VoiceState`)."""
    meta = metadata or {}
    name = _text(caller_profile.get("name"))
    system_prompt = _truncate_content(_text(agent_profile.get("system_prompt")))[:8000]
    return "\n".join(
        [
            VOICE_PROMPT_OPENING,
            "",
            "<agent_profile>",
            f"  <agent_id>{_xml(agent_profile.get('agent_id'))}</agent_id>",
            f"  <agent_name>{_xml(agent_profile.get('agent_name'))}</agent_name>",
            f"  <first_message>{_xml(agent_profile.get('first_message'))}</first_message>",
            f"  <system_prompt>{_xml(system_prompt)}</system_prompt>",
            "</agent_profile>",
            "<caller_profile>",
            f"  <name>{_xml(name) or '(unknown)'}</name>",
            f"  <phone_number>{_xml(caller_profile.get('phone_number'))}</phone_number>",
            f"  <total_interactions>{_xml(caller_profile.get('total_interactions'))}</total_interactions>",
            f"  <conversations_with_this_agent>{_xml(caller_profile.get('conversation_count'))}"
            "</conversations_with_this_agent>",
            "</caller_profile>",
            "<conversation_metadata>",
            f"  <duration_secs>{_xml(meta.get('duration_secs'))}</duration_secs>",
            f"  <call_date>{_xml(meta.get('call_date'))}</call_date>",
            "</conversation_metadata>",
            "<conversation_transcript>",
            _xml(voice_transcript(turns)),
            "</conversation_transcript>",
            "<explicit_instructions>",
            "1. next_greeting: what this agent says first when this caller calls again. In the agent's own voice"
            " and role (agent_profile). Refer to one specific topic of THIS conversation and invite the caller to"
            " continue. Use the caller's name only if caller_profile gives one. One or two sentences, under 200"
            " characters.",
            "2. key_topics: 3 to 5 specific topics of this conversation, a few words each.",
            "3. sentiment: the caller's sentiment, exactly one of satisfied, neutral, frustrated, confused, engaged.",
            "4. conversation_summary: one sentence on what this conversation covered.",
            "</explicit_instructions>",
            "<constraints>",
            "- Use only this transcript: never mention topics of other agents or calls you were not shown.",
            "- Do not invent facts, names, dates or promises.",
            '- No generic greeting such as "Hello, how can I help you today?".',
            "- Do not guess a name: without one in caller_profile, greet without a name.",
            "- Output only the JSON object.",
            "</constraints>",
            "<examples>",
            '  <good>{"next_greeting": "Hi Stefan! I\'ve been thinking about your Arbez founding story - ready to'
            ' continue where we left off?", "key_topics": ["Arbez founding details", "childhood memories",'
            ' "business challenges"], "sentiment": "engaged", "conversation_summary": "Explored early'
            ' entrepreneurial journey and formative childhood experiences."}</good>',
            '  <bad>{"next_greeting": "Hello! How can I help you today?"} (generic, no topic, no continuity)</bad>',
            '  <bad>{"next_greeting": "Hi Stefan, how is your medication working?"} (a topic from another agent'
            "'s calls)</bad>",
            "</examples>",
            "",
            VOICE_JSON_INSTRUCTION,
        ]
    )


MERGE_JSON_INSTRUCTION = (
    "Respond with only a JSON object, no prose around it, in this shape:\n"
    '{"title": "one line naming what the memories say", "body": "the merged text"}'
)


def merge_prompt(members: Sequence[Mapping[str, Any]]) -> str:
    """Consolidation's merge request: several similar memories to be written as one. Each member is
    {"kind", "title", "body", "entities"}; bodies are cut at 2,000 characters."""
    lines = [
        "You are merging near-duplicate memories of an AI agent team into one memory.",
        "Keep every fact: every sentence's content, every name, number, date and negation must still be in"
        " the merged text (you may reword, reorder and drop exact repetitions, nothing else). Do not add facts.",
        "",
    ]
    for i, m in enumerate(members):
        entities = ", ".join(_text(e) for e in (m.get("entities") or []))
        lines.append(f"Memory {i} ({_text(m.get('kind'))}): {_text(m.get('title'))}")
        body = _text(m.get("body"))[:2000]
        if body:
            lines.append(f"  {body}")
        if entities:
            lines.append(f"  Entities: {entities}")
        lines.append("")
    lines.append(MERGE_JSON_INSTRUCTION)
    return "\n".join(lines)
