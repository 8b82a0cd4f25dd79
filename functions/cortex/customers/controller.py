"""The controller: both agents composed into one response, in the Vercel AI SDK's UI message
stream protocol (server-sent events, `data: {json}` parts, `data: [DONE]` last).

One request: the first agent (the last assistant message's metadata.agentType, default
customer_mgmt) answers with its tools and the handoff tool. When it calls handoff, the controller
aborts its stream (closing the model's HTTP response), records a Cortex handoff (completed at
once), and starts the other agent with the handoff context in its system prompt, writing to the
same response. At most MAX_HANDOFFS handoffs; on the last iteration the handoff tool is removed;
an agent that was just handed the conversation sees a ping-pong warning on its handoff tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from cortex.customers import agents, service
from cortex.customers import models as m
from cortex.customers.model import Event, ModelStreamError, TextDelta, ToolCall, Turn, TurnEnd, stream_turn

MAX_STEPS = 6  # model turns per agent (tool call, result, answer...) before the agent must stop
HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
Chunk = dict[str, Any]


def sse(chunk: Chunk) -> bytes:
    """One server-sent event of the UI message stream."""
    return b"data: " + json.dumps(chunk, ensure_ascii=False, default=str).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def initial_agent(messages: Sequence[m.UIMessage]) -> str:
    """The last assistant message's metadata.agentType, default customer_mgmt (seed 002)."""
    for message in reversed(messages):
        if message.role == "assistant":
            if message.metadata is not None and message.metadata.agentType:
                return message.metadata.agentType
            break
    return agents.CUSTOMER_MGMT


def to_model_messages(messages: Sequence[m.UIMessage]) -> list[dict[str, Any]]:
    """The conversation in the Messages API's format: user and assistant text, consecutive turns of
    one role merged (the API alternates roles and starts with the user)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        text = message.text().strip()
        if message.role == "system" or not text:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"][0]["text"] += "\n\n" + text
        else:
            out.append({"role": message.role, "content": [{"type": "text", "text": text}]})
    while out and out[0]["role"] != "user":
        out.pop(0)
    return out


@dataclass
class ChatRun:
    """The state of one request: the chat, who speaks, the handoffs so far and what was recorded."""

    chat: service.ChatStart
    messages: list[dict[str, Any]]
    agent: str
    previous: str | None = None
    handoff: agents.HandoffContext | None = None
    handoffs: list[dict[str, Any]] = field(default_factory=list)
    ids: Any = field(default_factory=lambda: iter(range(1, 10**9)))

    def next_id(self, prefix: str) -> str:
        """A part id unique in this response."""
        return f"{prefix}-{next(self.ids)}"


@dataclass
class AgentOutcome:
    """How an agent's run ended: a handoff (with its arguments) or its answer."""

    handoff: m.Handoff | None = None
    error: str | None = None


async def run_chat(chat: service.ChatStart, messages: Sequence[m.UIMessage]) -> AsyncGenerator[Chunk, None]:
    """The whole response as UI message stream parts (without the final [DONE])."""
    run = ChatRun(chat, to_model_messages(messages), initial_agent(messages))
    yield {"type": "start", "messageId": f"msg-{uuid.uuid4().hex}", "messageMetadata": {"agentType": run.agent}}
    while True:
        final = len(run.handoffs) >= agents.MAX_HANDOFFS
        yield {"type": "data-agent", "id": run.next_id("agent"), "data": {
            "agent": run.agent, "label": agents.LABELS[run.agent], "previous": run.previous,
            "handoffs": len(run.handoffs), "handoffToolAvailable": not final,
        }}  # fmt: skip
        outcome = AgentOutcome()
        # aclosing: a response closed mid-way closes the agent's run at once (which settles its turn).
        async with contextlib.aclosing(run_agent(run, outcome, final=final)) as steps:
            async for chunk in steps:
                yield chunk
        if outcome.error is not None:
            yield {"type": "error", "errorText": outcome.error}
            return
        if outcome.handoff is None:
            break
        target = agents.other(run.agent)
        recorded = await service.record_handoff(chat.claims(run.agent), chat.customer_id, target, outcome.handoff)
        run.handoffs.append(recorded)
        yield {"type": "data-handoff", "id": run.next_id("handoff"), "data": {
            "from": run.agent, "to": target, "reason": outcome.handoff.reason, "summary": outcome.handoff.summary,
            "pendingRequest": outcome.handoff.pendingRequest, "handoffId": recorded.get("handoff_id"),
            "count": len(run.handoffs),
        }}  # fmt: skip
        run.handoff = agents.HandoffContext(
            run.agent, outcome.handoff.reason, outcome.handoff.summary, outcome.handoff.pendingRequest
        )
        run.previous, run.agent = run.agent, target
    yield {"type": "message-metadata", "messageMetadata": {"agentType": run.agent, "handoffs": len(run.handoffs)}}
    yield {"type": "finish", "messageMetadata": {"agentType": run.agent, "handoffs": len(run.handoffs)}}


async def run_agent(run: ChatRun, outcome: AgentOutcome, *, final: bool) -> AsyncGenerator[Chunk, None]:
    """One agent's steps (model turn, its tool calls, the next turn...) until it answers, hands
    off (the stream is aborted at once) or fails (outcome.error)."""
    claims = run.chat.claims(run.agent)
    tools = agents.tools_for(run.agent, with_handoff=not final, previous=run.previous)
    allowed = tuple(t["name"] for t in tools)
    system = agents.system_prompt(run.agent, run.chat.customer_id, run.chat.context, run.handoff, final=final)
    messages = [dict(msg) for msg in run.messages]
    for _ in range(MAX_STEPS):
        prompt_tokens = service.estimate(system + json.dumps(messages, default=str) + json.dumps(tools))
        plan = await service.reserve_turn(claims, run.chat.tenant_id, run.agent, prompt_tokens)
        turn = Turn(run.agent, system, messages, tools, plan.model, plan.max_tokens)
        yield {"type": "start-step"}
        step = StepState(run.next_id("text"))
        events = stream_turn(turn)
        try:
            async for event in events:
                for chunk in step.on_event(event, run, allowed):
                    yield chunk
                if step.handoff is not None:
                    break  # abort: the model's stream is closed below, no more tokens are spent
        except ModelStreamError as exc:
            await service.settle_turn(claims, plan, plan.model or "unknown", prompt_tokens, step.output_tokens(),
                                      str(exc))  # fmt: skip
            for chunk in step.close_text():
                yield chunk
            outcome.error = f"The model's stream failed: {exc}"
            return
        except (asyncio.CancelledError, GeneratorExit):
            # The client left mid-turn: what the model spent is settled now, not left to expire with the
            # reservation. Shielded: the request's cancel scope would cancel the settle too.
            with anyio.CancelScope(shield=True):
                await service.settle_turn(claims, plan, plan.model or "unknown", prompt_tokens, step.output_tokens(),
                                          "the client disconnected mid-turn")  # fmt: skip
            raise
        finally:
            await events.aclose()
        for chunk in step.close_text():
            yield chunk
        end = step.end or TurnEnd("aborted", prompt_tokens, step.output_tokens(), plan.model or "unknown")
        await service.settle_turn(claims, plan, end.model, end.input_tokens or prompt_tokens, end.output_tokens)
        if step.handoff is not None:
            # Tools the model called before handing off are not run: the other agent takes over.
            for call in step.calls:
                yield {"type": "tool-output-error", "toolCallId": call.id, "errorText": "not run: handed off"}
            outcome.handoff = step.handoff
            yield {"type": "finish-step"}
            return
        if not step.calls:
            yield {"type": "finish-step"}
            return
        results = []
        for call in step.calls:
            output, is_error = await _execute(run, claims, call, allowed)
            yield (
                {"type": "tool-output-error", "toolCallId": call.id, "errorText": output}
                if is_error
                else {"type": "tool-output-available", "toolCallId": call.id, "output": output}
            )
            content = output if is_error else json.dumps(output, ensure_ascii=False, default=str)
            results.append({"type": "tool_result", "tool_use_id": call.id, "is_error": is_error, "content": content})
        yield {"type": "finish-step"}
        messages.append({"role": "assistant", "content": step.assistant_content()})
        messages.append({"role": "user", "content": results})
    yield {"type": "text-start", "id": (tid := run.next_id("text"))}
    yield {"type": "text-delta", "id": tid, "delta": "(I stopped after too many steps; ask me to continue.)"}
    yield {"type": "text-end", "id": tid}


async def _execute(run: ChatRun, claims: dict[str, str], call: ToolCall, allowed: tuple[str, ...]) -> tuple[Any, bool]:
    """A domain tool call: its output, or (message, True) for a tool error the model is told about."""
    try:
        args = service.parse_args(call.name, call.input, allowed)
        return await service.run_tool(claims, call.name, args, run.chat.customer_id), False
    except service.ToolError as exc:
        return str(exc), True


class StepState:
    """The parts one model turn writes: its text block, tool inputs, a handoff when one is called."""

    def __init__(self, text_id: str) -> None:
        self.text_id = text_id
        self.text_open = False
        self.text = ""
        self.calls: list[ToolCall] = []
        self.handoff: m.Handoff | None = None
        self.end: TurnEnd | None = None

    def output_tokens(self) -> int:
        """Tokens of what this turn produced so far (for an aborted or broken turn)."""
        return service.estimate(self.text + json.dumps([c.input for c in self.calls], default=str))

    def close_text(self) -> list[Chunk]:
        """The text-end part when a text block is open."""
        if not self.text_open:
            return []
        self.text_open = False
        return [{"type": "text-end", "id": self.text_id}]

    def assistant_content(self) -> list[dict[str, Any]]:
        """The turn as the assistant message the next turn sees (text, then tool_use blocks)."""
        content: list[dict[str, Any]] = [{"type": "text", "text": self.text}] if self.text.strip() else []
        content += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.input if isinstance(c.input, dict) else {}}
            for c in self.calls
        ]
        return content

    def on_event(self, event: Event, run: ChatRun, allowed: tuple[str, ...]) -> list[Chunk]:
        """The UI parts for one model event."""
        if isinstance(event, TextDelta):
            out: list[Chunk] = []
            if not self.text_open:
                self.text_open = True
                out.append({"type": "text-start", "id": self.text_id})
            self.text += event.text
            out.append({"type": "text-delta", "id": self.text_id, "delta": event.text})
            return out
        if isinstance(event, TurnEnd):
            self.end = event
            return []
        out = self.close_text()
        input_part = {"type": "tool-input-available", "toolCallId": event.id, "toolName": event.name,
                      "input": event.input}  # fmt: skip
        if event.name == agents.HANDOFF_TOOL and agents.HANDOFF_TOOL in allowed:
            try:
                args = service.parse_args(event.name, event.input, allowed)
            except service.ToolError:
                self.calls.append(event)  # answered to the model as a tool error
                return [*out, input_part]
            assert isinstance(args, m.Handoff)
            self.handoff = args
            output = agents.handoff_output(run.agent, args.model_dump())
            return [*out, input_part, {"type": "tool-output-available", "toolCallId": event.id, "output": output}]
        self.calls.append(event)
        return [*out, input_part]


async def stream_chat(chat: service.ChatStart, messages: Sequence[m.UIMessage]) -> AsyncIterator[bytes]:
    """The response body: every part as an SSE event, an error part for any failure after the
    stream started (the stream then closes cleanly), and `data: [DONE]`."""
    try:
        async with contextlib.aclosing(run_chat(chat, messages)) as chunks:
            async for chunk in chunks:
                yield sse(chunk)
    except Exception as exc:  # the status line is sent: a failure can only be reported in the stream
        yield sse({"type": "error", "errorText": f"{type(exc).__name__}: {exc}"[:500]})
    yield DONE
