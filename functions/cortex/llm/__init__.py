"""The one place where Cortex asks a model for text.

Three operations, each returning a validated result and the token usage to record:
`summarise_interaction`, `generate_context` and `generate_handoff_summary`. With an Anthropic
key configured they call Claude through the official SDK; without one the deterministic
`cortex.llm.offline` stands in, so the service works offline and in tests. Every failure of the
remote path (network, HTTP status, timeout, unparsable or off-schema answer) surfaces as
`LLMError`, so callers have exactly one exception to handle.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import ValidationError

from cortex.config import Settings, get_settings

if TYPE_CHECKING:
    # Imported where a model is called: the SDK takes seconds to import, and clients of the
    # models (cortex.client, the CLI) never call one.
    import anthropic

__all__ = [
    "ChunkKind",
    "ChunkKinds",
    "ContradictionVerdict",
    "ContradictionVerdicts",
    "GeneratedContext",
    "HandoffSummary",
    "Intent",
    "InteractionAnalysis",
    "LLMError",
    "MergedMemory",
    "Operation",
    "Sentiment",
    "Signals",
    "Usage",
    "VoiceSentiment",
    "VoiceState",
    "classify_chunks",
    "extract_json_object",
    "generate_context",
    "generate_handoff_summary",
    "generate_voice_state",
    "judge_contradictions",
    "merge_memories",
    "summarise_interaction",
]
from cortex.llm import offline, prompts
from cortex.llm.results import (
    ChunkKind,
    ChunkKinds,
    ContradictionVerdict,
    ContradictionVerdicts,
    GeneratedContext,
    HandoffSummary,
    Intent,
    InteractionAnalysis,
    LLMError,
    MergedMemory,
    ModelResult,
    Operation,
    Sentiment,
    Signals,
    Usage,
    VoiceSentiment,
    VoiceState,
)

# Output budgets per operation: the prompts ask for well under these, so a cut-off answer
# means the model rambled and the JSON would be incomplete anyway.
_MAX_TOKENS: dict[Operation, int] = {
    "summarize": 600,
    "generate_context": 800,
    "handoff_summary": 600,
    "contradiction_check": 800,
    "ingest_classify": 1200,
    "voice_greeting": 500,
    "consolidation_merge": 1500,
}


_ResultT = TypeVar("_ResultT", bound=ModelResult)


# --- public operations -----------------------------------------------------------------------


def summarise_interaction(
    interaction_type: str,
    subject: str | None,
    raw_content: str | None,
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    local: bool = False,
) -> tuple[InteractionAnalysis, Usage]:
    """Summarise one interaction: 1-2 sentence summary, key points, sentiment and intent.

    `model` and `max_tokens` override the settings (the budget's choice, `cortex.usage.budget`);
    `local` asks for the local generator even with a key. Raises `LLMError` when the remote
    model fails or answers off-schema.
    """
    settings = settings or get_settings()
    prompt = prompts.interaction_summary_prompt(interaction_type, subject, raw_content)
    if local or not settings.use_remote_llm:
        result = offline.analyse_interaction(interaction_type, subject, raw_content)
        return result, _local_usage(settings, prompt, result, "summarize")
    return _remote(settings, model or settings.summary_model, prompt, InteractionAnalysis, "summarize", max_tokens)


def generate_context(
    material: Mapping[str, Any],
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    local: bool = False,
) -> tuple[GeneratedContext, Usage]:
    """Generate a contact's working-context briefing from its material (see `cortex.prompts`).

    `model`, `max_tokens` and `local` as for `summarise_interaction`. Raises `LLMError` when the
    remote model fails or answers off-schema.
    """
    settings = settings or get_settings()
    prompt = prompts.context_prompt(material)
    if local or not settings.use_remote_llm:
        result = offline.generate_context(material)
        return result, _local_usage(settings, prompt, result, "generate_context")
    return _remote(settings, model or settings.context_model, prompt, GeneratedContext, "generate_context", max_tokens)


def generate_handoff_summary(
    from_agent: str,
    to_party: str | None,
    reason: str,
    reason_detail: str | None,
    material: Mapping[str, Any],
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    local: bool = False,
) -> tuple[HandoffSummary, Usage]:
    """Write the briefing for a handoff from `from_agent` to `to_party` (an agent or a human).

    `model`, `max_tokens` and `local` as for `summarise_interaction`. Raises `LLMError` when the
    remote model fails or answers off-schema.
    """
    settings = settings or get_settings()
    prompt = prompts.handoff_prompt(from_agent, to_party, reason, reason_detail, material)
    if local or not settings.use_remote_llm:
        result = offline.generate_handoff_summary(from_agent, to_party, reason, reason_detail, material)
        return result, _local_usage(settings, prompt, result, "handoff_summary")
    return _remote(settings, model or settings.context_model, prompt, HandoffSummary, "handoff_summary", max_tokens)


def judge_contradictions(
    pairs: Sequence[Mapping[str, Any]],
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
) -> tuple[ContradictionVerdicts, Usage]:
    """Ask the model which of these pairs of memories contradict each other (the auto-linker's
    check; `prompts.contradiction_prompt` describes a pair). Remote only: offline, the heuristics
    already ran and there is nothing to ask, so this raises `LLMError`. Verdicts are validated
    against `ContradictionVerdicts`; the caller keeps only those naming a pair it sent."""
    settings = settings or get_settings()
    if not settings.use_remote_llm:
        raise LLMError("contradiction_check: no model configured (ANTHROPIC_API_KEY)")
    prompt = prompts.contradiction_prompt(pairs)
    return _remote(
        settings, model or settings.summary_model, prompt, ContradictionVerdicts, "contradiction_check", max_tokens
    )


def classify_chunks(
    chunks: Sequence[Mapping[str, Any]],
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
) -> tuple[ChunkKinds, Usage]:
    """Ask the model which kind of memory each chunk of an ingested file is (ingest's
    classification; `prompts.ingest_classification_prompt` describes a chunk). Remote only:
    offline, SQL's keyword heuristics classify, so this raises `LLMError`. The answer is validated
    against `ChunkKinds`; the caller keeps only kinds naming a chunk it sent."""
    settings = settings or get_settings()
    if not settings.use_remote_llm:
        raise LLMError("ingest_classify: no model configured (ANTHROPIC_API_KEY)")
    prompt = prompts.ingest_classification_prompt(chunks)
    return _remote(settings, model or settings.summary_model, prompt, ChunkKinds, "ingest_classify", max_tokens)


def generate_voice_state(
    agent_profile: Mapping[str, Any],
    caller_profile: Mapping[str, Any],
    turns: Sequence[tuple[str, str]],
    metadata: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
    local: bool = False,
) -> tuple[VoiceState, Usage]:
    """A voice agent's next state with a caller after a call (seed 004's greeting generation): the
    XML-structured prompt of `prompts.voice_state_prompt` to Claude (the summary model, Haiku), or
    the deterministic local generator offline or when `local`. The answer is validated against
    `VoiceState` (3-5 topics, the five sentiments); `LLMError` when the model fails or answers off-schema."""
    settings = settings or get_settings()
    prompt = prompts.voice_state_prompt(agent_profile, caller_profile, turns, metadata)
    if local or not settings.use_remote_llm:
        result = offline.generate_voice_state(agent_profile, caller_profile, turns)
        return result, _local_usage(settings, prompt, result, "voice_greeting")
    return _remote(settings, model or settings.summary_model, prompt, VoiceState, "voice_greeting", max_tokens)


def merge_memories(
    members: Sequence[Mapping[str, Any]],
    settings: Settings | None = None,
    *,
    model: str | None = None,
    max_tokens: int | None = None,
) -> tuple[MergedMemory, Usage]:
    """Ask the model to write one memory from several similar ones (consolidation's merge;
    `prompts.merge_prompt` describes a member). Remote only: offline, the deterministic merge of
    `cortex.consolidation.merge` does the work, so this raises `LLMError`. The answer is validated
    against `MergedMemory`; the caller then checks that every sentence and entity survived."""
    settings = settings or get_settings()
    if not settings.use_remote_llm:
        raise LLMError("consolidation_merge: no model configured (ANTHROPIC_API_KEY)")
    prompt = prompts.merge_prompt(members)
    return _remote(settings, model or settings.summary_model, prompt, MergedMemory, "consolidation_merge", max_tokens)


# --- local path ------------------------------------------------------------------------------


def _local_usage(settings: Settings, prompt: str, result: ModelResult, operation: Operation) -> Usage:
    # Estimates, so budgets and dashboards behave the same with and without a key.
    return Usage(
        model=settings.local_model,
        input_tokens=offline.estimate_tokens(prompt),
        output_tokens=offline.estimate_tokens(result.model_dump_json()),
        operation=operation,
    )


# --- remote path -----------------------------------------------------------------------------

_clients: dict[tuple[str, str], anthropic.Anthropic] = {}
_clients_lock = threading.Lock()


def _client(settings: Settings) -> anthropic.Anthropic:
    """One SDK client (and so one connection pool) per key and base URL, shared by threads."""
    import anthropic

    key = (settings.anthropic_api_key, settings.anthropic_base_url)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = anthropic.Anthropic(
                api_key=settings.anthropic_api_key,
                base_url=settings.anthropic_base_url or None,
                timeout=settings.llm_timeout_seconds,
                max_retries=settings.llm_max_retries,
            )
            _clients[key] = client
    # Timeout and retries may differ between Settings sharing a key; with_options reuses the pool.
    return client.with_options(timeout=settings.llm_timeout_seconds, max_retries=settings.llm_max_retries)


def _remote(
    settings: Settings,
    model: str,
    prompt: str,
    result_type: type[_ResultT],
    operation: Operation,
    max_tokens: int | None = None,
) -> tuple[_ResultT, Usage]:
    import anthropic

    try:
        response = _client(settings).messages.create(
            model=model,
            max_tokens=max_tokens or _MAX_TOKENS[operation],
            messages=[{"role": "user", "content": prompt}],
        )
    except anthropic.APITimeoutError as exc:
        raise LLMError(
            f"{operation}: Claude request timed out after {settings.llm_timeout_seconds}s", retryable=True
        ) from exc
    except anthropic.APIConnectionError as exc:
        raise LLMError(f"{operation}: cannot reach Claude: {exc}", retryable=True) from exc
    except anthropic.APIStatusError as exc:
        retryable = exc.status_code in (408, 409, 429) or exc.status_code >= 500
        detail = exc.api_message or str(exc)
        raise LLMError(
            f"{operation}: Claude answered HTTP {exc.status_code} ({exc.type or 'error'}): {detail}",
            retryable=retryable,
        ) from exc
    except anthropic.AnthropicError as exc:
        raise LLMError(f"{operation}: Claude request failed: {type(exc).__name__}: {exc}") from exc

    usage = Usage(
        model=response.model or model,
        input_tokens=response.usage.input_tokens,
        output_tokens=response.usage.output_tokens,
        operation=operation,
    )
    text = "".join(block.text for block in response.content if block.type == "text")
    try:
        payload = extract_json_object(text)
        result = result_type.model_validate(payload)
    except (ValueError, ValidationError) as exc:
        # A sampled answer may be malformed once and fine the next time, so this may be retried.
        # The tokens were spent all the same: the error carries them, to be recorded.
        raise LLMError(
            f"{operation}: Claude's answer does not match the {result_type.__name__} schema: {exc}",
            retryable=True,
            usage=usage,
        ) from exc
    return result, usage


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_MAX_DECODE_ATTEMPTS = 50


def extract_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a model's answer, tolerating code fences and prose around it.

    Raises `ValueError` when the text holds no JSON object.
    """
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        attempts = 0
        # Bounded so that prose full of stray braces cannot make this quadratic.
        while start != -1 and attempts < _MAX_DECODE_ATTEMPTS:
            attempts += 1
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    snippet = text[:200].replace("\n", " ")
    raise ValueError(f"no JSON object in the answer: {snippet!r}")
