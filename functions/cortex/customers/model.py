"""One model turn, streamed: the Anthropic Messages API (tool use, streaming, the `anthropic`
SDK) or, offline, a deterministic local agent that uses the same tools and the same handoff rule
(keyword routing). Both yield the same events; closing the iterator aborts the turn (for the
Messages API: the HTTP response is closed, so no more tokens are spent)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anthropic
from anthropic import types

from cortex.config import get_settings
from cortex.customers import agents


@dataclass(frozen=True)
class TextDelta:
    """A piece of the answer's text."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool_use block: its id, the tool and its input (a dict, or the raw text when the
    model wrote invalid JSON)."""

    id: str
    name: str
    input: Any


@dataclass
class TurnEnd:
    """The turn ended: why (end_turn, tool_use, max_tokens) and the tokens it used."""

    stop_reason: str
    input_tokens: int
    output_tokens: int
    model: str


Event = TextDelta | ToolCall | TurnEnd


class ModelStreamError(Exception):
    """The model's stream failed (HTTP status, connection lost mid-way, timeout)."""


@dataclass
class Turn:
    """One request to a model: the agent, its system prompt, the conversation (Messages API
    format) and its tools."""

    agent: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    model: str | None
    max_tokens: int
    extra: dict[str, Any] = field(default_factory=dict)

    def tool_names(self) -> tuple[str, ...]:
        """The names of the tools offered in this turn."""
        return tuple(str(t["name"]) for t in self.tools)


# --- the Messages API ---------------------------------------------------------------------------------

_clients: dict[tuple[str, str], anthropic.AsyncAnthropic] = {}


def _client() -> anthropic.AsyncAnthropic:
    settings = get_settings()
    key = (settings.anthropic_api_key, settings.anthropic_base_url)
    client = _clients.get(key)
    if client is None:
        client = anthropic.AsyncAnthropic(
            api_key=settings.anthropic_api_key,
            base_url=settings.anthropic_base_url or None,
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )
        _clients[key] = client
    return client


def _tool_input(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError:
        return raw


async def anthropic_turn(turn: Turn) -> AsyncGenerator[Event]:
    """Streams one turn from the Messages API: text deltas as they come, each tool_use block once
    complete, then TurnEnd. Closing this iterator closes the HTTP response (the abort)."""
    assert turn.model is not None
    input_tokens = output_tokens = 0
    stop_reason = "end_turn"
    blocks: dict[int, dict[str, Any]] = {}
    try:
        created = await _client().messages.create(
            model=turn.model, max_tokens=turn.max_tokens, system=turn.system, messages=turn.messages,  # type: ignore[arg-type]
            tools=turn.tools, stream=True,  # type: ignore[arg-type]
        )  # fmt: skip
        stream = cast("anthropic.AsyncStream[types.RawMessageStreamEvent]", created)
    except anthropic.APIStatusError as exc:
        raise ModelStreamError(f"Claude answered HTTP {exc.status_code}: {exc.message}") from exc
    except Exception as exc:  # the SDK's own HTTP client may raise its transport's errors
        raise ModelStreamError(f"cannot reach Claude: {exc}") from exc
    try:
        async for event in stream:
            if isinstance(event, types.RawMessageStartEvent):
                input_tokens = event.message.usage.input_tokens
            elif isinstance(event, types.RawContentBlockStartEvent) and isinstance(
                event.content_block, types.ToolUseBlock
            ):
                blocks[event.index] = {"id": event.content_block.id, "name": event.content_block.name, "json": ""}
            elif isinstance(event, types.RawContentBlockDeltaEvent):
                if isinstance(event.delta, types.TextDelta):
                    yield TextDelta(event.delta.text)
                elif isinstance(event.delta, types.InputJSONDelta) and event.index in blocks:
                    blocks[event.index]["json"] += event.delta.partial_json
            elif isinstance(event, types.RawContentBlockStopEvent) and event.index in blocks:
                block = blocks.pop(event.index)
                yield ToolCall(block["id"], block["name"], _tool_input(block["json"]))
            elif isinstance(event, types.RawMessageDeltaEvent):
                stop_reason = event.delta.stop_reason or stop_reason
                output_tokens = event.usage.output_tokens
    except Exception as exc:  # an error event (APIStatusError) or the transport's (connection lost)
        raise ModelStreamError(f"Claude's stream broke: {exc}") from exc
    finally:
        await stream.close()
    yield TurnEnd(stop_reason, input_tokens, output_tokens, turn.model)


# --- the local agent ------------------------------------------------------------------------------------

PRODUCT_WORDS = re.compile(
    r"\b(artifacts?|strateg\w*|roadmaps?|prds?|specs?|research|personas?|competit\w*|projects?|deliverables?|"
    r"positioning|launch|features?|prioriti\w*|kpis?)\b",
    re.IGNORECASE,
)
CUSTOMER_WORDS = re.compile(
    r"\b(status|invoices?|agreements?|contracts?|log|note|meeting|email|call|churn\w*|renewal|negotiat\w*|"
    r"pricing|health|overdue|relationship)\b",
    re.IGNORECASE,
)
_STATUS = re.compile(r"\b(lead|prospect|active|paused|churned|archived)\b", re.IGNORECASE)
_EVENT = re.compile(r"\b(meeting|email|call|task|milestone|note)\b", re.IGNORECASE)
_ARTIFACT = {
    "roadmap": "roadmap", "strategy": "strategy", "research": "research", "prd": "spec", "spec": "spec",
    "analysis": "analysis", "competit": "analysis", "report": "report", "persona": "research",
}  # fmt: skip
LOCAL_MODEL = "local-customer-agent-v1"


def _user_text(messages: Sequence[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
        if texts:
            return " ".join(texts)
    return ""


def _last_tool_result(messages: Sequence[dict[str, Any]]) -> tuple[str, Any, bool] | None:
    """(tool name, its result, is_error) when the conversation ends with tool results."""
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return None
    content = messages[-1].get("content")
    if not isinstance(content, list) or not content or content[-1].get("type") != "tool_result":
        return None
    result = content[-1]
    names = {b["id"]: b["name"] for b in messages[-2].get("content", []) if b.get("type") == "tool_use"}
    try:
        value = json.loads(result.get("content") or "null")
    except ValueError:
        value = result.get("content")
    return names.get(result.get("tool_use_id"), ""), value, bool(result.get("is_error"))


def _out_of_domain(agent: str, text: str) -> bool:
    product, customer = bool(PRODUCT_WORDS.search(text)), bool(CUSTOMER_WORDS.search(text))
    return (product and not customer) if agent == agents.CUSTOMER_MGMT else (customer and not product)


def _artifact_type(text: str) -> str:
    lowered = text.lower()
    return next((kind for word, kind in _ARTIFACT.items() if word in lowered), "other")


def _call(n: int, name: str, args: dict[str, Any]) -> ToolCall:
    return ToolCall(f"toolu_local_{n:04d}", name, args)


def local_plan(turn: Turn) -> tuple[str, list[ToolCall]]:
    """What the local agent says and which tools it calls for this turn (deterministic)."""
    text = _user_text(turn.messages)
    step = sum(1 for msg in turn.messages if msg.get("role") == "assistant")
    last = _last_tool_result(turn.messages)
    offered = turn.tool_names()
    if last is not None:
        return _after_tool(turn, text, step, *last)
    if agents.HANDOFF_TOOL in offered and _out_of_domain(turn.agent, text):
        target = agents.other(turn.agent)
        return (
            f"This is a question for the {agents.LABELS[target]}; handing you over.",
            [_call(step, agents.HANDOFF_TOOL, {
                "reason": f"The request needs the {agents.LABELS[target]}'s tools",
                "summary": f"The user asked: {text[:500]}", "pendingRequest": text[:2000] or "(no text)",
            })],
        )  # fmt: skip
    if turn.agent == agents.CUSTOMER_MGMT:
        status = _STATUS.search(text)
        if status and "status" in text.lower():
            args = {"newStatus": status.group(1).lower(), "reason": text[:1000]}
            return "Updating the customer's status.", [_call(step, "updateCustomerStatus", args)]
        event = _EVENT.search(text)
        if event and re.search(r"\b(log|record|add)\b", text, re.IGNORECASE):
            args = {"eventType": event.group(1).lower(), "description": text[:10000]}
            return "Logging that on the customer's timeline.", [_call(step, "createEventLogEntry", args)]
        return "Let me look at the account.", [_call(step, "getCustomerSummary", {})]
    if PRODUCT_WORDS.search(text):
        return "Let me check the customer's projects.", [_call(step, "listProjects", {})]
    return "Let me see what has been made for this customer.", [_call(step, "listArtifacts", {})]


def _after_tool(turn: Turn, text: str, step: int, name: str, value: Any, is_error: bool) -> tuple[str, list[ToolCall]]:
    if is_error:
        return f"That did not work: {str(value)[:300]}. Want me to try it another way?", []
    if (
        name == "listProjects"
        and PRODUCT_WORDS.search(text)
        and re.search(r"\b(create|draft|write|new|make)\b", text, re.I)
    ):
        items = value.get("items") if isinstance(value, dict) else None
        if items:
            return "", [_call(step, "createArtifact", _artifact_args(items[0]["id"], text))]
        return "", [_call(step, "createProject", {"name": "Product Strategy", "description": text[:4000]})]
    if (
        name == "createProject"
        and isinstance(value, dict)
        and re.search(r"\b(create|draft|write|make)\b", text, re.I)
        and (_artifact_type(text) != "other" or re.search(r"\bartifact", text, re.I))
    ):
        return "", [_call(step, "createArtifact", _artifact_args(value["id"], text))]
    return _summary_of(turn.agent, name, value), []


def _artifact_args(project_id: str, text: str) -> dict[str, Any]:
    kind = _artifact_type(text)
    title = f"{kind.title()} draft" if kind != "other" else "Working document"
    content = f"# {title}\n\nRequested: {text[:2000]}\n\n## Next steps\n\n- Review with the customer\n"
    return {"projectId": project_id, "title": title, "type": kind, "content": content}


def _summary_of(agent: str, name: str, value: Any) -> str:
    if name == "getCustomerSummary" and isinstance(value, dict):
        summary = str(value.get("summary") or "")
        signals = [ln[2:] for ln in summary.splitlines() if ln.startswith("- ⚠️")]
        health = " ".join(signals) if signals else "No health warnings right now."
        return f"Here is where the account stands. {health} Want me to draft a follow-up email?"
    if name == "updateCustomerStatus" and isinstance(value, dict):
        return (f"Done: the status went from {value.get('previous_status')} to {value.get('status')}, and the "
                "change is logged. Want me to log a note about the reason?")  # fmt: skip
    if name == "createEventLogEntry":
        return "Logged on the timeline. Want me to draft a follow-up email?"
    if name == "updateCustomerInfo":
        return "The customer's info is updated. Want me to summarise the account?"
    if name == "createArtifact" and isinstance(value, dict):
        return f'I created "{value.get("title")}" ({value.get("type")}, draft). Want me to turn it into a roadmap next?'
    if name == "createProject" and isinstance(value, dict):
        return f'The project "{value.get("name")}" is set up. Want me to draft a strategy document in it?'
    if name in ("listProjects", "listArtifacts") and isinstance(value, dict):
        n = len(value.get("items") or [])
        return f"There are {n} on record. Want me to draft a new artifact?"
    return "Done. Want me to summarise the account?"


async def local_turn(turn: Turn) -> AsyncGenerator[Event]:
    """The deterministic local agent's turn, streamed word by word like a model's."""
    text, calls = local_plan(turn)
    for word in re.findall(r"\S+\s*", text):
        yield TextDelta(word)
    for call in calls:
        yield ToolCall(call.id, call.name, call.input)
    prompt = turn.system + json.dumps(turn.messages, default=str)
    yield TurnEnd(
        "tool_use" if calls else "end_turn",
        -(-len(prompt) // 4),
        -(-len(text + json.dumps([c.input for c in calls], default=str)) // 4),
        LOCAL_MODEL,
    )


def stream_turn(turn: Turn) -> AsyncGenerator[Event]:
    """The turn from Claude when the budget chose a model, else from the local agent."""
    return anthropic_turn(turn) if turn.model else local_turn(turn)
