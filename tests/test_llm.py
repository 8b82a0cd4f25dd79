"""Tests of the model layer: prompts, the local stand-in, and the Claude path over real HTTP.

No database needed. The remote path runs the official SDK against `FakeAnthropic`, a local
HTTP server speaking the Messages API.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from cortex import llm
from cortex.config import Settings
from cortex.llm import offline as local_model
from cortex.llm import prompts
from tests.fake_anthropic import ANALYSIS_ANSWER, CONTEXT_ANSWER, HANDOFF_ANSWER, FakeAnthropic

SENTIMENTS = {"positive", "neutral", "negative", "escalation"}
INTENTS = {
    "question",
    "complaint",
    "complaint_resolved",
    "purchase_intent",
    "churn_risk",
    "info_request",
    "scheduling",
    "feedback",
    "other",
}

RESOLVED = (
    "Hi John,\n\nI've tracked down your package: it was stuck at the regional hub. I've arranged "
    "expedited delivery and it should arrive tomorrow. Thanks for your patience!\n\nBest regards,\nLuna"
)
COMPLAINT = (
    "Hi,\n\nMy order #1234 still hasn't arrived and it's been two weeks. This is really frustrating. "
    "Can you tell me what's going on?\n\nThanks,\nJohn"
)
ESCALATION = (
    "This is the third time I've written about the broken units. If this isn't fixed by Friday "
    "I'm handing it to my lawyer."
)
PURCHASE = (
    "Hello Anna,\n\nThanks for the info. We're interested in ordering 2000 units per quarter. "
    "Could you send a quote with bulk pricing? Our budget is around $40k.\n\nKind regards,\nJohn Smith"
)
CHURN = (
    "Hi team, we've decided not to renew our contract and will be switching to another supplier "
    "next month. Please confirm the end date."
)

MATERIAL: dict[str, Any] = {
    "contact": {
        "id": "c1",
        "name": "John Smith",
        "email": "john@acme.com",
        "company_name": "Acme Corp",
        "stage": "customer",
        "source": "anna_outbound",
        "first_touch_at": "2025-01-05T10:00:00Z",
        "last_touch_at": "2025-01-20T16:45:00Z",
        "tags": ["eco"],
    },
    "interaction_count": 7,
    "recent_interactions": [
        {
            "id": "i3",
            "date": "2025-01-20T16:45:00Z",
            "agent": "luna",
            "type": "ticket_resolved",
            "direction": "outbound",
            "subject": "RE: Shipping delay on order #1234",
            "summary": "Resolved shipping delay. Package located and expedited.",
            "sentiment": "positive",
            "intent": "complaint_resolved",
            "key_points": ["Shipping delay on order #1234"],
            "thread_id": "t1",
        },
        {
            "id": "i2",
            "date": "2025-01-19T09:00:00Z",
            "agent": "luna",
            "type": "ticket_opened",
            "direction": "inbound",
            "subject": "Shipping delay on order #1234",
            "summary": "Customer reports order #1234 is late.",
            "sentiment": "negative",
            "intent": "complaint",
            "key_points": ["Order #1234 late"],
            "thread_id": "t1",
        },
        {
            "id": "i1",
            "date": "2025-01-15T09:30:00Z",
            "agent": "anna",
            "type": "email_received",
            "direction": "inbound",
            "subject": "First order",
            "summary": "Customer confirmed a first order of 500 units and hinted at 2000 per quarter.",
            "sentiment": "positive",
            "intent": "purchase_intent",
            "key_points": ["Ordered 500 units"],
            "thread_id": None,
        },
    ],
    "existing_context": {"summary": "John runs procurement at Acme Corp.", "key_facts": ["Price-conscious"]},
}

EMPTY_MATERIAL: dict[str, Any] = {
    "contact": None,
    "interaction_count": None,
    "recent_interactions": None,
    "existing_context": None,
}

LOCAL = Settings(anthropic_api_key="")


# --- prompts ---------------------------------------------------------------------------------


def test_summary_prompt_renders_subject_only_when_present() -> None:
    with_subject = prompts.interaction_summary_prompt("email_received", "Order status", "Where is it?")
    without = prompts.interaction_summary_prompt("email_received", None, "Where is it?")
    blank = prompts.interaction_summary_prompt("email_received", "", "Where is it?")

    assert with_subject.startswith("Summarize this email_received in 1-2 sentences. Extract:\n")
    assert "\n\nSubject: Order status\n\nContent:\nWhere is it?\n\nRespond in JSON:\n{" in with_subject
    assert "Subject:" not in without
    assert without == blank
    assert "- Intent (question/complaint/purchase_intent/churn_risk/info_request/other)\n\nContent:\n" in without


def test_summary_prompt_truncates_huge_content() -> None:
    prompt = prompts.interaction_summary_prompt("note", None, "x" * (prompts.MAX_PROMPT_CONTENT_CHARS + 10))
    assert "[... 10 more characters truncated]" in prompt
    assert len(prompt) < prompts.MAX_PROMPT_CONTENT_CHARS + 1000


def test_context_prompt_renders_material_and_asks_for_json() -> None:
    prompt = prompts.context_prompt(MATERIAL)
    assert "Contact: John Smith (john@acme.com)\nCompany: Acme Corp\nStage: customer\n" in prompt
    assert "First contact: 2025-01-05T10:00:00Z\nSource: anna_outbound\n" in prompt
    assert (
        "Recent interactions (newest first):\n"
        "- [2025-01-20T16:45:00Z] luna: ticket_resolved — "
        "Resolved shipping delay. Package located and expedited.\n"
    ) in prompt
    assert prompt.endswith(prompts.CONTEXT_JSON_INSTRUCTION)
    assert '"recommended_tone"' in prompt


def test_context_prompt_with_null_material_renders_empty_values() -> None:
    prompt = prompts.context_prompt(EMPTY_MATERIAL)
    assert "Contact:  ()\nCompany: \n" in prompt
    assert "Recent interactions (newest first):\n\nGenerate a concise briefing" in prompt


def test_handoff_prompt_detail_line_only_when_present() -> None:
    with_detail = prompts.handoff_prompt("anna", "jasper", "warm_reply", "Asked about pricing", MATERIAL)
    without = prompts.handoff_prompt("anna", "jasper", "warm_reply", None, MATERIAL)

    assert "FROM: anna\nTO: jasper\nREASON: warm_reply\nDETAIL: Asked about pricing\n\nContact:" in with_detail
    assert "REASON: warm_reply\n\nContact: John Smith at Acme Corp\nCurrent stage: customer\n" in without
    assert "DETAIL" not in without
    assert "Working context summary:\nJohn runs procurement at Acme Corp.\n\nKey facts:\n- Price-conscious\n" in without
    assert "Focus on actionable context for jasper." in without
    assert without.endswith(prompts.HANDOFF_JSON_INSTRUCTION)


# --- local analysis --------------------------------------------------------------------------


def test_local_analysis_is_deterministic_and_valid() -> None:
    first = local_model.analyse_interaction("ticket_resolved", "RE: Shipping delay on order #1234", RESOLVED)
    second = local_model.analyse_interaction("ticket_resolved", "RE: Shipping delay on order #1234", RESOLVED)
    assert first == second
    assert first.sentiment in SENTIMENTS and first.intent in INTENTS
    assert 0 < len(first.summary) <= 300
    assert 1 <= len(first.key_points) <= 5


def test_resolved_ticket() -> None:
    result = local_model.analyse_interaction("ticket_resolved", "RE: Shipping delay on order #1234", RESOLVED)
    assert result.sentiment == "positive"
    assert result.intent == "complaint_resolved"
    # Extractive: the greeting and sign-off are gone, the substance stays.
    assert result.summary.startswith("I've tracked down your package")
    assert "Hi John" not in result.summary and "Best regards" not in result.summary
    assert result.key_points[0] == "Shipping delay on order #1234"
    assert any("tomorrow" in point for point in result.key_points)


def test_complaint() -> None:
    result = local_model.analyse_interaction("email_received", "Where is my order?", COMPLAINT)
    assert result.sentiment == "negative"
    assert result.intent == "complaint"
    assert "#1234" in result.summary
    assert result.summary[0].isupper()
    assert any("#1234" in p for p in result.key_points)


def test_escalation_with_lawyer() -> None:
    result = local_model.analyse_interaction("email_received", None, ESCALATION)
    assert result.sentiment == "escalation"
    assert result.intent == "complaint"
    assert "lawyer" in result.summary


def test_purchase_inquiry() -> None:
    result = local_model.analyse_interaction("email_received", "Bulk order", PURCHASE)
    assert result.intent == "purchase_intent"
    assert result.sentiment in {"positive", "neutral"}
    assert "2000 units" in result.summary
    assert "Kind regards" not in " ".join(result.key_points)
    assert "Our budget is around $40k." in result.key_points


def test_churn_message() -> None:
    result = local_model.analyse_interaction("email_received", "Contract", CHURN)
    assert result.intent == "churn_risk"
    assert "not to renew" in result.summary


@pytest.mark.parametrize(
    ("text", "intent"),
    [
        ("Could we schedule a call next Tuesday at 10am to go over the rollout?", "scheduling"),
        ("Could you send me the spec sheet for the blue model?", "info_request"),
        ("Is the warehouse open on public holidays?", "question"),
        ("Just a note: the new onboarding docs are much clearer, great feedback from the team.", "feedback"),
        ("Thanks, no problem at all with the last delivery.", "other"),
    ],
)
def test_other_intents(text: str, intent: str) -> None:
    assert local_model.analyse_interaction("email_received", None, text).intent == intent


def test_no_problem_is_not_negative() -> None:
    result = local_model.analyse_interaction("email_received", None, "Thanks, no problem at all with the delivery.")
    assert result.sentiment != "negative"


def test_empty_content_is_summarised_from_type_and_subject() -> None:
    assert local_model.analyse_interaction("call", None, None).summary == "Call logged with no content."
    result = local_model.analyse_interaction("note", "Pricing follow-up", "   \n\t ")
    assert result.summary == "Note logged with no content. Subject: Pricing follow-up"
    assert result.key_points == ["Pricing follow-up"]
    assert local_model.analyse_interaction("weird_type", None, "").summary == "Weird type logged with no content."


def test_summary_is_capped_at_a_word_boundary() -> None:
    text = " ".join(f"Order number {i} will ship on Friday with tracking code {i * 7}." for i in range(60))
    result = local_model.analyse_interaction("email_sent", None, text)
    assert len(result.summary) <= 300
    words = set(text.split())
    for token in result.summary.split():
        assert token.rstrip("…") in words


def test_huge_input_is_fast() -> None:
    body = ("We ordered 500 units and the shipment is late again, please fix it by Friday. " * 13_000)[:1_000_000]
    start = time.perf_counter()
    result = local_model.analyse_interaction("email_received", "Late again", body)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"1 MB took {elapsed:.2f}s"
    assert len(result.summary) <= 300
    assert result.sentiment == "negative"


@pytest.mark.parametrize(
    "body",
    [
        "a" * 1_000_000,
        "\n" * 1_000_000,
        "你好。" * 300_000,
        "\x00\ud800\u202e" * 300_000,
        "Hi " * 300_000,
        "{" * 1_000_000,
    ],
    ids=["one-long-word", "newlines", "cjk", "controls-surrogates-bidi", "greetings", "braces"],
)
def test_pathological_megabytes(body: str) -> None:
    start = time.perf_counter()
    result = local_model.analyse_interaction("email_received", "x", body)
    assert time.perf_counter() - start < 1.0
    assert 0 < len(result.summary) <= 300
    assert not re.search("[\x00\ud800-\udfff\u202e]", result.summary + "".join(result.key_points))


def _words(text: str) -> set[str]:
    # Same notion of a word as the summariser: whitespace-separated, CJK full stops end one.
    tokens = [t for t in re.split(r"\s+|(?<=[\u3002\uff01\uff1f])", text) if t]
    return {t.lower() for t in tokens} | {t.rstrip("…").lower() for t in tokens}


@hsettings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(subject=st.one_of(st.none(), st.text(max_size=80)), body=st.one_of(st.none(), st.text()))
def test_any_unicode_never_crashes_and_never_cuts_words(subject: str | None, body: str | None) -> None:
    result = local_model.analyse_interaction("email_received", subject, body)
    assert result.sentiment in SENTIMENTS and result.intent in INTENTS
    assert 0 < len(result.summary) <= 300
    assert len(result.key_points) <= 5
    assert all(len(p) <= 120 for p in result.key_points)
    # Every word of the summary is a whole word of the input (or of the fixed fallback text),
    # so a cut always falls between words.
    source = local_model.sanitize_text(f"{subject or ''} {body or ''}")
    allowed = _words(source) | _words("Email received logged with no content. readable text. Subject:") | {"…"}
    for token in result.summary.split():
        stripped = token.rstrip("…").lower()
        assert not stripped or stripped in allowed, (token, result.summary)
    json.dumps(result.model_dump())  # storable


@hsettings(max_examples=100, deadline=None, database=None)
@given(
    st.recursive(
        st.none() | st.text(max_size=30) | st.integers() | st.booleans(),
        lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
        max_leaves=20,
    )
)
def test_material_of_any_shape_never_crashes(junk: Any) -> None:
    material = {"contact": junk, "recent_interactions": [junk, {"summary": junk}], "existing_context": junk}
    context = local_model.generate_context(material)
    assert 4 <= len(context.key_facts) <= 6
    handoff = local_model.generate_handoff_summary("anna", None, "other", None, material)
    assert len(handoff.context_summary) <= 800
    signals = local_model.compute_signals(material)
    assert 0 <= signals.churn_risk <= 1 and 0 <= signals.upsell_potential <= 1


# --- local context, handoff, signals ---------------------------------------------------------


def test_generate_context_names_who_and_history() -> None:
    context = local_model.generate_context(MATERIAL)
    assert context.summary.startswith(
        "John Smith is a customer at Acme Corp, first in touch in January 2025 via anna outbound."
    )
    assert "Of 7 logged interactions" in context.summary
    assert "Resolved shipping delay" in context.summary
    assert 4 <= len(context.key_facts) <= 6
    assert "Stage: customer (source: anna_outbound)" in context.key_facts
    assert context.current_status == "Active customer, no open tickets"
    assert context.recommended_tone.startswith("Warm and professional")
    assert local_model.generate_context(MATERIAL) == context


def test_generate_context_for_an_empty_contact() -> None:
    context = local_model.generate_context(EMPTY_MATERIAL)
    assert context.summary == "No details are on record for this contact yet. No interactions have been logged yet."
    assert 4 <= len(context.key_facts) <= 6
    assert context.current_status == "New contact, no interactions logged yet"


def test_open_ticket_drives_status_and_signals() -> None:
    opened = {
        "id": "i4",
        "date": "2025-02-01T08:00:00Z",
        "agent": "luna",
        "type": "ticket_opened",
        "direction": "inbound",
        "subject": "Damaged pallet",
        "summary": "Customer says a pallet arrived damaged and threatens to cancel.",
        "sentiment": "escalation",
        "intent": "churn_risk",
        "key_points": [],
        "thread_id": "t2",
    }
    material = {**MATERIAL, "recent_interactions": [opened, *MATERIAL["recent_interactions"]]}
    signals = local_model.compute_signals(material)
    base = local_model.compute_signals(MATERIAL)
    assert signals.open_threads == [
        {
            "thread_id": "t2",
            "subject": "Damaged pallet",
            "last_type": "ticket_opened",
            "last_date": "2025-02-01T08:00:00Z",
        }
    ]
    assert base.open_threads == []  # t1 ended with ticket_resolved; i1 has no thread
    assert signals.churn_risk > base.churn_risk
    assert signals.upsell_potential < base.upsell_potential
    assert "Escalation in recent interactions" in signals.risk_factors
    assert "Open ticket: Damaged pallet" in signals.risk_factors
    context = local_model.generate_context(material)
    assert context.current_status == "Open ticket: Damaged pallet"
    assert context.recommended_tone.startswith("Calm, apologetic")


def test_signals_for_a_happy_customer() -> None:
    signals = local_model.compute_signals(MATERIAL)
    assert signals.churn_risk < 0.3
    assert signals.upsell_potential > 0.5
    assert "Mentioned scaling up" in signals.opportunity_factors
    assert signals.churn_risk == round(signals.churn_risk, 2)


def test_handoff_summary() -> None:
    handoff = local_model.generate_handoff_summary(
        "luna", "jasper", "upsell_opportunity", "Asked about 2000 units per quarter", MATERIAL
    )
    assert handoff.context_summary.startswith(
        "Luna is handing John Smith (Acme Corp) to jasper — upsell opportunity: Asked about 2000 units per quarter."
    )
    assert "John runs procurement at Acme Corp." in handoff.context_summary
    assert len(handoff.context_summary) <= 800
    assert handoff.suggested_action is not None and "offer" in handoff.suggested_action


def test_estimate_tokens() -> None:
    assert local_model.estimate_tokens("") == 0
    assert local_model.estimate_tokens("a") == 1
    assert local_model.estimate_tokens("abcd") == 1
    assert local_model.estimate_tokens("abcde") == 2


# --- llm.py, local path ----------------------------------------------------------------------


def test_llm_local_path_reports_estimated_usage() -> None:
    analysis, usage = llm.summarise_interaction("email_received", "Bulk order", PURCHASE, settings=LOCAL)
    assert analysis == local_model.analyse_interaction("email_received", "Bulk order", PURCHASE)
    prompt = prompts.interaction_summary_prompt("email_received", "Bulk order", PURCHASE)
    assert usage == llm.Usage(
        model=LOCAL.local_model,
        input_tokens=local_model.estimate_tokens(prompt),
        output_tokens=local_model.estimate_tokens(analysis.model_dump_json()),
        operation="summarize",
    )
    _, usage = llm.generate_context(MATERIAL, settings=LOCAL)
    assert usage.operation == "generate_context" and usage.input_tokens > 100
    handoff, usage = llm.generate_handoff_summary("anna", "jasper", "warm_reply", None, MATERIAL, settings=LOCAL)
    assert usage.operation == "handoff_summary" and handoff.context_summary


# --- llm.py, remote path against the fake API -------------------------------------------------


@pytest.fixture
def fake(claude: FakeAnthropic) -> FakeAnthropic:
    """The conftest stand-in under the name these tests use."""
    return claude


def _remote(fake: FakeAnthropic, **overrides: Any) -> Settings:
    options: dict[str, Any] = {
        "anthropic_api_key": "test",
        "anthropic_base_url": fake.base_url,
        "llm_max_retries": 0,
        "summary_model": "claude-test-summary",
        "context_model": "claude-test-context",
    }
    options.update(overrides)
    return Settings(**options)


def test_remote_summary_is_validated_with_real_usage(fake: FakeAnthropic) -> None:
    settings = _remote(fake)
    analysis, usage = llm.summarise_interaction("email_received", "Where is my order?", COMPLAINT, settings)

    assert analysis == llm.InteractionAnalysis(**ANALYSIS_ANSWER)
    request = fake.requests[0]
    assert request["model"] == "claude-test-summary"
    assert request["messages"][0]["role"] == "user"
    prompt = request["messages"][0]["content"]
    assert prompt == prompts.interaction_summary_prompt("email_received", "Where is my order?", COMPLAINT)
    # Depending on the SDK version the key travels as x-api-key or as a bearer token.
    headers = fake.headers[0]
    assert "test" in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
    # The usage is the server's count, not an estimate.
    answer = "Here is the analysis:\n```json\n" + json.dumps(ANALYSIS_ANSWER, indent=2) + "\n```"
    assert usage == llm.Usage(
        model="claude-test-summary",
        input_tokens=-(-len(prompt) // 4),
        output_tokens=-(-len(answer) // 4),
        operation="summarize",
    )


def test_remote_context_and_handoff(fake: FakeAnthropic) -> None:
    settings = _remote(fake)
    context, usage = llm.generate_context(MATERIAL, settings)
    assert context == llm.GeneratedContext(**CONTEXT_ANSWER)
    assert usage.operation == "generate_context" and usage.model == "claude-test-context"
    handoff, usage = llm.generate_handoff_summary(
        "anna", "jasper", "warm_reply", "Asked about pricing", MATERIAL, settings
    )
    assert handoff == llm.HandoffSummary(**HANDOFF_ANSWER)
    assert usage.operation == "handoff_summary"
    assert [r["model"] for r in fake.requests] == ["claude-test-context", "claude-test-context"]
    assert fake.requests[1]["messages"][0]["content"].startswith("You are creating a handoff summary")


def test_remote_answer_in_prose_is_extracted(fake: FakeAnthropic) -> None:
    fake.reply = lambda _: (
        'Sure! {"summary": "Asked for a quote.", "key_points": [], '
        '"sentiment": "Neutral", "intent": "purchase_intent", "confidence": 0.9} Hope that helps {.'
    )
    analysis, _ = llm.summarise_interaction("email_received", None, PURCHASE, _remote(fake))
    assert analysis.summary == "Asked for a quote."
    assert analysis.sentiment == "neutral"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("I am not able to help with that.", "no JSON object"),
        ('{"summary": "x", "key_points": [], "sentiment": "ecstatic", "intent": "other"}', "sentiment"),
        ('{"summary": "x", "key_points": [], "sentiment": "positive", "intent": "gossip"}', "intent"),
        ('{"summary": "", "key_points": [], "sentiment": "positive", "intent": "other"}', "summary"),
        ('["summary", "x"]', "no JSON object"),
    ],
)
def test_remote_bad_answer_raises(fake: FakeAnthropic, answer: str, message: str) -> None:
    fake.reply = lambda _: answer
    with pytest.raises(llm.LLMError, match=message) as info:
        llm.summarise_interaction("note", None, "Some note.", _remote(fake))
    assert "InteractionAnalysis" in str(info.value)


def test_remote_overloaded_raises_without_retries(fake: FakeAnthropic) -> None:
    fake.fail_next(1, status=529)
    with pytest.raises(llm.LLMError, match="HTTP 529 \\(overloaded_error\\)") as info:
        llm.summarise_interaction("note", None, "Some note.", _remote(fake))
    assert info.value.retryable
    assert len(fake.requests) == 1


def test_remote_retries_then_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    with FakeAnthropic(retry_after_ms=10) as fake:
        fake.fail_next(2, status=500)
        analysis, _ = llm.summarise_interaction("note", None, "Some note.", _remote(fake, llm_max_retries=2))
    assert analysis.intent == "complaint"
    assert len(fake.requests) == 3


def test_remote_client_error_is_not_retryable(fake: FakeAnthropic) -> None:
    fake.always_fail = True
    fake.fail_status = 401
    with pytest.raises(llm.LLMError, match="HTTP 401") as info:
        llm.summarise_interaction("note", None, "Some note.", _remote(fake, llm_max_retries=2))
    assert not info.value.retryable
    assert len(fake.requests) == 1


def test_remote_timeout_raises(fake: FakeAnthropic) -> None:
    fake.delay_seconds = 2.0
    start = time.perf_counter()
    with pytest.raises(llm.LLMError, match="timed out"):
        llm.summarise_interaction("note", None, "Some note.", _remote(fake, llm_timeout_seconds=0.3))
    assert time.perf_counter() - start < 1.5


def test_remote_unreachable_raises() -> None:
    with FakeAnthropic() as fake:
        url = fake.base_url
    settings = Settings(anthropic_api_key="test", anthropic_base_url=url, llm_max_retries=0)
    with pytest.raises(llm.LLMError, match="cannot reach Claude") as info:
        llm.summarise_interaction("note", None, "Some note.", settings)
    assert info.value.retryable


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('Answer: {"a": {"b": [1, 2]}} and {"c": 3}', {"a": {"b": [1, 2]}}),
        ('{not json} then {"a": "}"}', {"a": "}"}),
    ],
)
def test_extract_json_object(text: str, expected: dict[str, Any]) -> None:
    assert llm.extract_json_object(text) == expected
