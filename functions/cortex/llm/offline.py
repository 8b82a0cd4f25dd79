"""A deterministic, offline stand-in for Claude.

Used when no Anthropic key is configured (local development, CI, air-gapped installs). Everything
here is a pure function: no I/O, no clock, no randomness, so the same input always gives the same
output and tests can assert on exact results.

The methods are deliberately simple and explainable:
- summaries are extractive: the 1-2 highest scoring sentences of the message, after greetings,
  quoted replies and signatures are stripped;
- sentiment and intent come from small lexicons and ordered rules;
- context, handoff briefings and signals are assembled from the interaction summaries the
  database already holds.

All text work is linear in the input size (regexes without nested unbounded repetition, single
passes over lines and tokens), so a megabyte of pasted logs is handled in well under a second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

# Imported by module, not by name: llm imports this module too (see the note there).
from cortex.llm import results as llm

SUMMARY_MAX_CHARS = 300
KEY_POINT_MAX_CHARS = 120
MAX_KEY_POINTS = 5
HANDOFF_MAX_CHARS = 800
# Whitespace-free runs longer than this (URLs, base64, tracking ids) are not words worth
# quoting; they are shown as "…". Keeping every token this short also guarantees that a
# 300-character cap can always end at a word boundary.
MAX_WORD_CHARS = 60
# Beyond this, content is pasted logs or attachments, not prose worth summarising.
MAX_ANALYSED_CHARS = 200_000
# The point of a message is near its top; scoring further sentences only costs time.
MAX_SCORED_SENTENCES = 400
MAX_SENTENCE_CHARS = 1_000

ELLIPSIS = "…"

RESOLUTION_TYPES = frozenset({"ticket_resolved", "refund_processed", "sequence_completed"})
_TICKET_RESOLUTION_TYPES = frozenset({"ticket_resolved", "refund_processed"})
_OUTBOUND_TYPES = frozenset({"email_sent", "nudge_sent", "sequence_started"})

_TYPE_LABELS = {
    "email_sent": "Email sent",
    "email_received": "Email received",
    "ticket_opened": "Ticket opened",
    "ticket_resolved": "Ticket resolved",
    "call": "Call",
    "note": "Note",
    "order_placed": "Order placed",
    "refund_processed": "Refund processed",
    "nudge_sent": "Nudge sent",
    "sequence_started": "Sequence started",
    "sequence_completed": "Sequence completed",
}

_STAGE_PHRASES = {
    "prospect": "a prospect",
    "qualified": "a qualified lead",
    "opportunity": "an open sales opportunity",
    "customer": "a customer",
    "churning": "a customer at risk of churning",
    "lost": "a lost customer",
    "recovered": "a recovered customer",
}


# --- text hygiene ----------------------------------------------------------------------------

# Control characters become spaces (they separate things); invisible formatting characters
# (zero-width, bidi overrides, BOM) and lone surrogates vanish: they would otherwise hide
# inside words, and Postgres rejects NUL and unpaired surrogates outright.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")
_INVISIBLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\ud800-\udfff]+")
_LINE_SEPARATORS = re.compile("\r\n?|[\u2028\u2029]")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_SPACES = re.compile(r"\s+")
# Words: whitespace-separated, and a CJK full stop also ends one (those scripts use no spaces).
_TOKEN_SPLIT = re.compile(r"\s+|(?<=[\u3002\uff01\uff1f])")
_WORD = re.compile(r"\w+")


def sanitize_text(text: str | None) -> str:
    """Text safe to analyse and to store: no control, invisible or surrogate characters.

    Newlines are normalised to `\\n` and runs of blank lines collapse to one blank line.
    """
    if not text:
        return ""
    text = _LINE_SEPARATORS.sub("\n", text)
    text = _CONTROL.sub(" ", text)
    text = _INVISIBLE.sub("", text)
    return _BLANK_RUNS.sub("\n\n", text)


def _one_line(value: object) -> str:
    """A value from the database as a clean single line ("" for None)."""
    if value is None:
        return ""
    if isinstance(value, datetime | date):
        return value.isoformat()
    return _SPACES.sub(" ", sanitize_text(str(value))).strip()


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN_SPLIT.split(text) if t]


def _tidy_tokens(text: str) -> str:
    """Single-spaced text whose over-long tokens are replaced by one "…"."""
    out: list[str] = []
    for token in _tokens(text):
        if len(token) > MAX_WORD_CHARS:
            if out and out[-1] == ELLIPSIS:
                continue
            token = ELLIPSIS
        out.append(token)
    return " ".join(out)


def truncate_words(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with "…" when cut.

    Assumes single-spaced text whose tokens are shorter than `limit` (as `_tidy_tokens` makes);
    a single longer token is cut hard as a last resort.
    """
    if len(text) <= limit:
        return text
    head = text[: limit - len(ELLIPSIS) + 1]
    cut = head.rfind(" ")
    if cut <= 0:
        return text[: limit - len(ELLIPSIS)] + ELLIPSIS
    return head[:cut].rstrip() + ELLIPSIS


def estimate_tokens(text: str) -> int:
    """Rough token count of `text`: one token per 4 characters, at least 1 when non-empty."""
    if not text:
        return 0
    return max(1, math.ceil(len(text) / 4))


# --- interaction analysis --------------------------------------------------------------------

_GREETING = r"(?i:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b"
# Who a greeting or sign-off names: capitalised words ("John", "Mr. Smith") or a group.
_NAME_WORDS = r"(?:[ \t]+(?:[A-Z][\w.'\u2019-]*|(?i:team|there|all|everyone|folks|guys|both)))"
_GREETING_LINE = re.compile(rf"{_GREETING}{_NAME_WORDS}{{0,4}}[ \t]*[,!.:]?|(?i:to whom it may concern)[,:]?")
_GREETING_PREFIX = re.compile(rf"{_GREETING}{_NAME_WORDS}{{0,4}}[ \t]*[,!:](?:\s+|$)")
_SIGN_OFF = re.compile(
    r"(?i:thanks|thank you|many thanks|thanks again|thanks in advance|cheers|best|all the best|"
    r"best wishes|(?:best|kind|warm|warmest)? ?regards|sincerely|yours(?: truly| sincerely)?|"
    r"talk soon|speak soon|br|rgds)"
    rf"[ \t]*[,.!]?{_NAME_WORDS}{{0,4}}[ \t]*[,.!]?|(?i:sent from my [\w ]{{1,30}})"
)
_REPLY_HEADER = re.compile(
    r"(?:on\b.{0,200}\bwrote:|-{2,} ?(?:original|forwarded) message ?-{2,}|from: .{0,200})",
    re.IGNORECASE,
)
_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])\s+|(?<=[\u3002\uff01\uff1f])|\n[ \t]*\n|\n(?=[ \t]*[^\sa-z])")
_ABBREVIATIONS = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "vs.", "e.g.", "i.e.", "no.", "approx.", "inc."})
_SUBJECT_PREFIX = re.compile(r"^(?:(?:re|fw|fwd|aw|sv|wg)\s*(?:\[\d+\])?\s*:\s*)+", re.IGNORECASE)


def _weights(words: str, weight: float) -> dict[str, float]:
    return dict.fromkeys(words.split(), weight)


# Sentence scoring: words that carry the business content of CRM messages.
_KEYWORDS: dict[str, float] = {
    **_weights(
        "order orders ordered ordering refund refunded delivery shipment shipping shipped package "
        "invoice price prices pricing quote quotation discount units bulk contract renewal renew "
        "subscription account ticket issue problem delay delayed damaged broken missing replacement "
        "resolved fixed expedited tracked cancel cancellation payment charge charged demo meeting "
        "trial upgrade plan sample samples quantity budget deadline timeline proposal purchase "
        "buy arrive arrived arrival lawyer unacceptable escalate switch competitor",
        1.0,
    ),
    **_weights(
        "monday tuesday wednesday thursday friday saturday sunday january february march april may "
        "june july august september october november december tomorrow today week month quarter "
        "asap urgent",
        0.7,
    ),
    **_weights(
        "disappointed frustrated frustrating angry thrilled happy satisfied pleased interested "
        "confirm confirmed agree agreed decided",
        0.6,
    ),
}
_NUMBER = re.compile(r"\d")
_MONEY = re.compile(r"[$€£¥]\s?\d|\d\s?(?:usd|eur|gbp|dollars|euros|k\b)", re.IGNORECASE)
_ORDER_REF = re.compile(r"#\s?\d|\b(?:order|ticket|invoice|case)\s+(?:no\.?|number)?\s*\d", re.IGNORECASE)
_DATE_WORDS = re.compile(
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|tomorrow|today|tonight|"
    r"next (?:week|month|quarter|year)|this (?:week|month|quarter)|end of (?:the )?(?:week|month|day)|"
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|june?|july?|aug(?:ust)?|sep(?:t|tember)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?)\b",
    re.IGNORECASE,
)
_COMMITMENT = re.compile(
    r"\b(?:will|i'll|we'll|i\u2019ll|we\u2019ll|going to|plan to|planning to|intend to|promise|"
    r"next steps?|follow up|get back to you|"
    r"by (?:monday|tuesday|wednesday|thursday|friday|tomorrow|eod|end of))\b",
    re.IGNORECASE,
)
_PLEASANTRY = re.compile(
    r"\b(?:hope (?:you(?:'re| are)|this|all is)|hope you had|let me know if you have any|"
    r"feel free to|don'?t hesitate|"
    r"thanks? (?:you )?for (?:reaching out|your (?:email|message|patience|time))|"
    r"have a (?:great|nice|good|lovely) (?:day|week|weekend)|looking forward to hearing)\b",
    re.IGNORECASE,
)

# Sentiment lexicon, matched on lower-cased text.
_ESCALATION = re.compile(
    r"\b(?:lawyers?|attorneys?|solicitors?|lawsuit|sue you|suing|legal action|legal proceedings|"
    r"legal steps|take (?:this|it) to legal|involve (?:my|our) legal|"
    r"(?:my|our) legal (?:team|department) will|"
    r"small claims|(?:speak|talk) (?:to|with) (?:a|your|the) (?:manager|supervisor)|"
    r"your (?:manager|supervisor|boss)|cancel my account|unacceptable|chargeback|"
    r"dispute (?:the|this) charge|better business bureau|trading standards|consumer protection|"
    r"report (?:you|this) to)\b"
)
_NEGATIVE_STRONG = re.compile(
    r"\b(?:disappoint\w*|frustrat\w*|angry|furious|annoy\w*|upset|terrible|awful|horrible|worst|"
    r"broken|damaged|defective|faulty|never (?:arrived|received|got)|(?:has|have|had)n['\u2019]?t "
    r"(?:arrived|received|heard|shown up)|still (?:waiting|haven['\u2019]?t|hasn['\u2019]?t|not)|"
    r"not (?:working|received|acceptable|good enough)|(?:doesn|didn|isn)['\u2019]?t work\w*|"
    r"does not work|stopped working|complain\w*|unhappy|dissatisfied|ridiculous|useless|"
    r"waste of|overcharged|charged twice|double charged|rude|ignored|no response|unresolved)\b"
)
_NEGATIVE_WEAK = re.compile(
    r"\b(?:problems?|issues?|concerns?|concerned|delay(?:ed|s)?|late|missing|wrong|incorrect|"
    r"poor(?:ly)?|error|fail(?:ed|ure|s)?|refund|mistake|unfortunately|sorry)\b"
)
_POSITIVE_STRONG = re.compile(
    r"\b(?:great|excellent|happy|pleased|love|loved|loving|perfect|awesome|wonderful|fantastic|"
    r"impressed|delighted|thrilled|excited|amazing|brilliant|satisf(?:ied|action)|"
    r"works? (?:great|perfectly|well)|exactly what)\b"
)
_POSITIVE_WEAK = re.compile(
    r"\b(?:thanks?|thank you|appreciate\w*|glad|good|helpful|interested|looking forward|"
    r"resolved|fixed|sounds good)\b"
)
# "not happy", "never satisfied": a negated positive counts against, not for.
_NEGATED_POSITIVE = re.compile(
    r"\b(?:not|never|no longer|hardly|isn['\u2019]?t|wasn['\u2019]?t|aren['\u2019]?t|"
    r"(?:don|didn)['\u2019]?t)\s+"
    r"(?:\w+\s+)?(?:happy|pleased|satisfied|great|good|impressed|helpful|love|like)\b"
)
# "no problem", "without any issues": a negated negative is not a complaint.
_NEGATED_NEGATIVE = re.compile(
    r"\b(?:no|not an?|not any|without (?:any|an?)?|never had an?)\s*(?:problems?|issues?|worries|concerns?)\b"
)
_RESOLUTION = re.compile(
    r"\b(?:resolved|fixed|sorted(?: out)?|expedited|tracked down|refunded|refund (?:has been |was )?"
    r"(?:processed|issued)|credited|replacement (?:has been |was )?(?:sent|shipped|dispatched)|"
    r"(?:re)?shipped|delivered|back to normal|working again|closing (?:this|the) ticket)\b"
)

# Intent rules.
_CHURN = re.compile(
    r"\b(?:cancel\w*|not (?:to )?renew\w*|won['\u2019]?t (?:be )?renew\w*|(?:do not|don['\u2019]?t) renew|"
    r"(?:switch|switching|move|moving|go|going) (?:over )?to (?:another|a different|a new|a cheaper|"
    r"your competitor|a competitor|\w+['\u2019]s)|terminat\w*|close (?:my|our) account|"
    r"end (?:our|the|my) (?:contract|subscription|agreement)|look(?:ing)? (?:at|for|into) "
    r"(?:other|alternative)\w*|competitors?|unsubscribe|remove me from|"
    r"stop (?:using|ordering|buying)|leaving you)\b"
)
_COMPLAINT_WORDS = re.compile(
    r"\b(?:issues?|problems?|complain\w*|delay\w*|late|missing|broken|damaged|defective|faulty|wrong|"
    r"refund|not working|doesn['\u2019]?t work|never arrived|hasn['\u2019]?t arrived|"
    r"overcharged|charged twice|"
    r"unacceptable|disappoint\w*|frustrat\w*|lawyer|attorney|still waiting|poor)\b"
)
_PURCHASE = re.compile(
    r"\b(?:price|prices|pricing|quote|quotation|units|bulk|wholesale|discounts?|volume pricing|"
    r"purchas\w*|buy|buying|how much|costs?|place an order|ordering|re-?order|"
    r"(?:like|want|need|plan|planning|looking) to (?:order|buy|purchase)|proposal|upgrade|"
    r"per (?:unit|month|quarter|year)|add more (?:seats|licen[cs]es|units))\b"
)
_SCHEDULING = re.compile(
    r"\b(?:schedul\w*|reschedul\w*|book (?:a|an|the) (?:call|meeting|demo|time|slot)|"
    r"set up (?:a|an) (?:call|meeting|demo)|calendar|calendly|availability|"
    r"available (?:on|at|for|this|next)|meeting|demo|time slot|hop on a call|"
    r"(?:a|the) call (?:on|at|this|next|tomorrow)|(?:quick|short|brief) (?:chat|call)|"
    r"what time works)\b"
)
_INFO_REQUEST = re.compile(
    r"\b(?:more (?:info|information|details)|(?:send|share) (?:me|us) (?:the|a|an|some|more|your)|"
    r"brochure|catalog(?:ue)?|spec(?:ification)?s? sheet|data ?sheet|documentation|"
    r"details (?:on|about)|information (?:on|about)|learn more|"
    r"(?:could|can|would) you (?:please )?(?:send|share|provide|explain|tell me)|where can i find)\b"
)
_FEEDBACK = re.compile(
    r"\b(?:feedback|suggestions?|review|would be (?:nice|great|helpful) if|love (?:the|your)|"
    r"really (?:like|enjoy)|feature request|testimonial)\b"
)


@dataclass(frozen=True)
class _Sentence:
    text: str
    position: int
    score: float


def _clean_type(interaction_type: str | None) -> str:
    return _one_line(interaction_type)[:60].lower()


def _type_label(interaction_type: str) -> str:
    if interaction_type in _TYPE_LABELS:
        return _TYPE_LABELS[interaction_type]
    label = _tidy_tokens(interaction_type.replace("_", " ")).strip()
    return label[:1].upper() + label[1:] if label else "Interaction"


def clean_subject(subject: str | None) -> str:
    """A subject line without reply/forward prefixes ("RE: FW: x" → "x"), single-spaced."""
    return _SUBJECT_PREFIX.sub("", _tidy_tokens(_one_line(subject)))


def _strip_boilerplate(body: str) -> str:
    """The body without greeting, quoted replies, sign-off and signature."""
    kept: list[str] = []
    has_content = False
    for line in body.split("\n"):
        s = line.strip()
        if not s:
            kept.append("")
            continue
        if s.startswith(">"):
            continue  # quoted text of an earlier message
        if _REPLY_HEADER.fullmatch(s) and has_content:
            break  # everything below is the quoted thread
        if s in ("--", "__") or (has_content and _SIGN_OFF.fullmatch(s)):
            break  # sign-off: what follows is the signature
        if not has_content:
            if _GREETING_LINE.fullmatch(s):
                continue
            s = _GREETING_PREFIX.sub("", s, count=1) if _GREETING_PREFIX.match(s) else s
            if not s:
                continue
        kept.append(s)
        has_content = True
    return "\n".join(kept).strip()


def _split_sentences(body: str) -> list[str]:
    """The first sentences of `body` (about `MAX_SCORED_SENTENCES`), tidied, wordless ones dropped."""
    limit = 4 * MAX_SCORED_SENTENCES
    raws = _SENTENCE_BREAK.split(body, maxsplit=limit)
    if len(raws) > limit:
        raws.pop()  # the unsplit remainder of a long text, beyond what is scored
    pieces: list[str] = []
    for raw in raws:
        # A "sentence" of thousands of characters is a log line or a table, never a summary;
        # shortening it here bounds the cost of scoring it.
        text = truncate_words(_tidy_tokens(raw), MAX_SENTENCE_CHARS)
        if not text:
            continue
        # "Mr. Smith" is one sentence, not two.
        if pieces and pieces[-1].rsplit(" ", 1)[-1].lower() in _ABBREVIATIONS:
            pieces[-1] = f"{pieces[-1]} {text}"
        else:
            pieces.append(text)
    return [p for p in pieces if _WORD.search(p)]


def _score_sentence(text: str, position: int) -> float:
    lower = text.lower()
    words = _WORD.findall(lower)
    weight = sum(_KEYWORDS.get(w, 0.0) for w in words)
    if _NUMBER.search(text):
        weight += 0.8
    if _MONEY.search(text):
        weight += 0.8
    if _COMMITMENT.search(text):
        weight += 1.0
    if "?" in text:
        weight += 0.5
    if _PLEASANTRY.search(text):
        weight -= 3.0
    count = len(words)
    if count < 4 or count > 50:
        weight -= 1.0
    # Density rather than sum, so long rambling sentences do not win by length alone;
    # earlier sentences carry the point of most business messages.
    position_bonus = 0.6 if position == 0 else 0.3 if position == 1 else 0.0
    return weight / math.sqrt(max(count, 6)) + position_bonus


def _capitalised(text: str) -> str:
    # ASCII only: other scripts' case mappings can change a word's length or identity.
    return text[0].upper() + text[1:] if text[:1].isascii() and text[:1].islower() else text


def _summary_from(sentences: list[_Sentence]) -> str:
    ranked = sorted(sentences, key=lambda s: (-s.score, s.position))
    best = ranked[0]
    chosen = [best]
    second = next((s for s in ranked[1:] if s.text != best.text), None)
    if second is not None:
        fits = len(best.text) + 1 + len(second.text) <= SUMMARY_MAX_CHARS
        if fits and best.score > 0 and second.score >= 0.5 * best.score:
            chosen.append(second)
    chosen.sort(key=lambda s: s.position)
    return truncate_words(" ".join(_capitalised(s.text) for s in chosen), SUMMARY_MAX_CHARS)


def _empty_summary(interaction_type: str, subject: str, had_text: bool) -> str:
    label = _type_label(interaction_type)
    base = f"{label} logged with no readable text." if had_text else f"{label} logged with no content."
    if subject:
        base = f"{base} Subject: {subject}"
    return truncate_words(base, SUMMARY_MAX_CHARS)


def _key_points(sentences: list[_Sentence], subject: str) -> list[str]:
    points: list[str] = []
    seen: set[str] = set()

    def add(text: str) -> None:
        point = truncate_words(_capitalised(text), KEY_POINT_MAX_CHARS)
        if point.casefold() not in seen:
            seen.add(point.casefold())
            points.append(point)

    if subject and _WORD.search(subject):
        add(subject)
    for sentence in sentences:
        if len(points) >= MAX_KEY_POINTS:
            break
        text = sentence.text
        if _PLEASANTRY.search(text):
            continue
        if (
            _NUMBER.search(text)
            or _ORDER_REF.search(text)
            or _DATE_WORDS.search(text)
            or _COMMITMENT.search(text)
            or "?" in text
        ):
            add(text)
    # A message with nothing marked still has a point: its best sentences.
    for sentence in sorted(sentences, key=lambda s: (-s.score, s.position)):
        if len(points) >= min(2, MAX_KEY_POINTS) or sentence.score <= 0:
            break
        add(sentence.text)
    return points[:MAX_KEY_POINTS]


@dataclass(frozen=True)
class _Lexicon:
    escalation: bool
    positive: float
    negative: float


def _lexicon(lower: str, interaction_type: str) -> _Lexicon:
    negated_neg = len(_NEGATED_NEGATIVE.findall(lower))
    negated_pos = len(_NEGATED_POSITIVE.findall(lower))
    positive = 1.0 * len(_POSITIVE_STRONG.findall(lower)) + 0.5 * len(_POSITIVE_WEAK.findall(lower))
    weak_negative = 0.6 * max(0, len(_NEGATIVE_WEAK.findall(lower)) - negated_neg)
    negative = 1.2 * len(_NEGATIVE_STRONG.findall(lower)) + weak_negative
    positive = max(0.0, positive - 0.75 * negated_pos)
    negative += 1.0 * negated_pos
    if interaction_type in _TICKET_RESOLUTION_TYPES:
        # A resolution message describes the problem it solved; the fix is what counts.
        positive += 0.5 + 1.0 * len(_RESOLUTION.findall(lower))
        negative *= 0.5
    elif interaction_type == "ticket_opened":
        negative += 0.5
    elif interaction_type == "order_placed":
        positive += 0.7
    return _Lexicon(bool(_ESCALATION.search(lower)), positive, negative)


def _sentiment(lex: _Lexicon) -> llm.Sentiment:
    if lex.escalation:
        return "escalation"
    net = lex.positive - lex.negative
    if lex.negative >= 1.0 and net <= -0.5:
        return "negative"
    if lex.positive >= 0.8 and net >= 0.5:
        return "positive"
    return "neutral"


def _intent(lower: str, interaction_type: str, sentiment: llm.Sentiment) -> llm.Intent:
    churn = bool(_CHURN.search(lower))
    if interaction_type in _TICKET_RESOLUTION_TYPES and not churn:
        return "complaint_resolved"
    if churn:
        return "churn_risk"
    complaint_words = bool(_COMPLAINT_WORDS.search(lower))
    if _RESOLUTION.search(lower) and complaint_words and sentiment == "positive":
        return "complaint_resolved"
    if sentiment == "escalation" or (sentiment == "negative" and complaint_words):
        return "complaint"
    if interaction_type == "ticket_opened" and complaint_words and sentiment != "positive":
        return "complaint"
    if interaction_type == "order_placed" or _PURCHASE.search(lower):
        return "purchase_intent"
    if _SCHEDULING.search(lower):
        return "scheduling"
    if _INFO_REQUEST.search(lower):
        return "info_request"
    if _FEEDBACK.search(lower):
        return "feedback"
    if "?" in lower:
        return "question"
    return "other"


def analyse_interaction(interaction_type: str, subject: str | None, raw_content: str | None) -> llm.InteractionAnalysis:
    """Summary, key points, sentiment and intent of one interaction, computed locally.

    Never raises on odd input: empty, whitespace-only, megabytes long or full of control and
    invisible characters. The summary is at most 300 characters and ends on a word boundary.
    """
    itype = _clean_type(interaction_type)
    subject_text = clean_subject(subject)
    body = sanitize_text((raw_content or "")[:MAX_ANALYSED_CHARS])
    content = _strip_boilerplate(body)
    texts = _split_sentences(content)[:MAX_SCORED_SENTENCES]
    if not texts and _WORD.search(body):
        # Nothing but a greeting or a sign-off ("Thanks!"): that is the message.
        texts = _split_sentences(body)[:MAX_SCORED_SENTENCES]
    sentences = [_Sentence(t, i, _score_sentence(t, i)) for i, t in enumerate(texts)]

    lower = f"{subject_text}\n{content or body}".lower()
    lex = _lexicon(lower, itype)
    sentiment = _sentiment(lex)
    intent = _intent(lower, itype, sentiment)

    if sentences:
        summary = _summary_from(sentences)
    else:
        summary = _empty_summary(itype, subject_text, had_text=bool(body.strip()))
    return llm.InteractionAnalysis(
        summary=summary,
        key_points=_key_points(sentences, subject_text),
        sentiment=sentiment,
        intent=intent,
    )


# --- contact material ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Interaction:
    id: str
    date: str
    agent: str
    type: str
    direction: str
    subject: str
    summary: str
    sentiment: str
    intent: str
    key_points: tuple[str, ...]
    thread_id: str


@dataclass(frozen=True)
class _Contact:
    name: str
    email: str
    company: str
    stage: str
    phone: str
    source: str
    first_touch: str
    last_touch: str
    tags: tuple[str, ...]

    @property
    def display_name(self) -> str:
        return self.name or self.email or self.phone or "This contact"


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: object) -> Sequence[Any]:
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return value
    return []


def _contact(material: Mapping[str, Any]) -> _Contact:
    c = _mapping(material.get("contact"))
    return _Contact(
        name=_one_line(c.get("name")),
        email=_one_line(c.get("email")),
        company=_one_line(c.get("company_name")),
        phone=_one_line(c.get("phone")),
        stage=_one_line(c.get("stage")).lower(),
        source=_one_line(c.get("source")),
        first_touch=_one_line(c.get("first_touch_at")),
        last_touch=_one_line(c.get("last_touch_at")),
        tags=tuple(t for t in (_one_line(x) for x in _sequence(c.get("tags"))) if t),
    )


def _interactions(material: Mapping[str, Any]) -> list[_Interaction]:
    items: list[_Interaction] = []
    for raw in _sequence(material.get("recent_interactions")):
        it = _mapping(raw)
        items.append(
            _Interaction(
                id=_one_line(it.get("id")),
                date=_one_line(it.get("date")),
                agent=_one_line(it.get("agent")),
                type=_one_line(it.get("type")).lower(),
                direction=_one_line(it.get("direction")).lower(),
                subject=clean_subject(_one_line(it.get("subject"))),
                summary=_tidy_tokens(_one_line(it.get("summary"))),
                sentiment=_one_line(it.get("sentiment")).lower(),
                intent=_one_line(it.get("intent")).lower(),
                key_points=tuple(p for p in (_tidy_tokens(_one_line(x)) for x in _sequence(it.get("key_points"))) if p),
                thread_id=_one_line(it.get("thread_id")),
            )
        )
    return items


def _interaction_count(material: Mapping[str, Any], items: list[_Interaction]) -> int:
    count = material.get("interaction_count")
    if isinstance(count, int) and not isinstance(count, bool) and count >= len(items):
        return count
    return len(items)


def _parse_date(value: str) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _day(value: str) -> str:
    parsed = _parse_date(value)
    return parsed.date().isoformat() if parsed else value[:40]


def _month_year(value: str) -> str:
    parsed = _parse_date(value)
    return parsed.strftime("%B %Y") if parsed else ""


def _stage_phrase(stage: str) -> str:
    return _STAGE_PHRASES.get(stage, f"a contact at stage {stage}" if stage else "a contact of unknown stage")


def _sentence_end(text: str) -> str:
    text = text.strip()
    if not text:
        return text
    return text if text[-1] in ".!?…" else f"{text}."


def _label_lower(interaction_type: str) -> str:
    return _type_label(interaction_type).lower()


def _is_notable(item: _Interaction) -> bool:
    return (
        item.sentiment in ("negative", "escalation")
        or item.intent
        in (
            "complaint",
            "churn_risk",
            "purchase_intent",
            "complaint_resolved",
        )
        or item.type in ("order_placed", "refund_processed", "ticket_opened")
    )


def compute_signals(material: Mapping[str, Any]) -> llm.Signals:
    """Churn risk, upsell potential, their reasons, and the open threads of a contact.

    Scores start from a prior set by the contact's stage and move with the sentiment and intent
    of recent interactions, newer ones weighing more (each step back counts 0.85 times the one
    after it). Both are clamped to [0, 1] and rounded to 2 decimals.
    """
    contact = _contact(material)
    items = _interactions(material)
    churn = {"churning": 0.6, "lost": 0.8, "recovered": 0.3}.get(contact.stage, 0.1)
    upsell = {
        "prospect": 0.1,
        "qualified": 0.2,
        "opportunity": 0.35,
        "customer": 0.3,
        "churning": 0.05,
        "lost": 0.02,
        "recovered": 0.2,
    }.get(contact.stage, 0.1)
    risks: list[str] = []
    opportunities: list[str] = []
    if contact.stage in ("churning", "lost"):
        risks.append(f"Stage is {contact.stage}")
    if contact.stage == "opportunity":
        opportunities.append("Open sales opportunity")

    negatives = escalations = churn_mentions = purchases = positives = orders = 0
    scaling = False
    for i, item in enumerate(items):
        w = 0.85**i
        if item.sentiment == "escalation":
            escalations += 1
            churn += 0.25 * w
            upsell -= 0.15 * w
        elif item.sentiment == "negative":
            negatives += 1
            churn += 0.12 * w
            upsell -= 0.08 * w
        elif item.sentiment == "positive":
            positives += 1
            churn -= 0.05 * w
            upsell += 0.08 * w
        if item.intent == "churn_risk":
            churn_mentions += 1
            churn += 0.3 * w
            upsell -= 0.2 * w
        elif item.intent == "complaint":
            churn += 0.1 * w
        elif item.intent == "complaint_resolved":
            churn -= 0.05 * w
        elif item.intent == "purchase_intent":
            purchases += 1
            upsell += 0.2 * w
        if item.type == "order_placed":
            orders += 1
            upsell += 0.1 * w
        text = " ".join((item.summary, *item.key_points)).lower()
        if re.search(r"\b(?:scal\w+ up|bulk|per quarter|/quarter|more units|expand\w*|grow\w*|volume)\b", text):
            scaling = True

    open_threads = _open_threads(items)
    open_complaints = [t for t in open_threads if t["last_type"] == "ticket_opened"]
    if open_complaints:
        churn += 0.1
        risks.append(f"Open ticket: {open_complaints[0]['subject'] or 'untitled'}")
    if escalations:
        risks.append("Escalation in recent interactions")
    if negatives:
        risks.append(f"{negatives} negative recent interaction{'s' if negatives > 1 else ''}")
    if churn_mentions:
        risks.append("Churn language in recent messages (cancel, switch, not renewing)")
    if scaling:
        upsell += 0.1
        opportunities.append("Mentioned scaling up")
    if purchases:
        opportunities.append("Purchase intent expressed")
    if orders:
        opportunities.append(f"Placed {orders} order{'s' if orders > 1 else ''} recently")
    if items and items[0].sentiment == "positive":
        opportunities.append("Positive recent interaction")
    elif positives:
        opportunities.append(f"{positives} positive recent interaction{'s' if positives > 1 else ''}")

    return llm.Signals(
        churn_risk=round(min(1.0, max(0.0, churn)), 2),
        upsell_potential=round(min(1.0, max(0.0, upsell)), 2),
        risk_factors=risks,
        opportunity_factors=opportunities,
        open_threads=open_threads,
    )


def _open_threads(items: Iterable[_Interaction]) -> list[dict[str, object]]:
    """Threads whose newest interaction is not a resolution, newest thread first."""
    latest: dict[str, _Interaction] = {}
    subjects: dict[str, str] = {}
    for item in items:  # newest first, so the first one seen per thread is its latest
        if not item.thread_id:
            continue
        latest.setdefault(item.thread_id, item)
        if item.subject and item.thread_id not in subjects:
            subjects[item.thread_id] = item.subject
    return [
        {
            "thread_id": thread_id,
            "subject": subjects.get(thread_id) or None,
            "last_type": item.type,
            "last_date": item.date or None,
        }
        for thread_id, item in latest.items()
        if item.type not in RESOLUTION_TYPES
    ]


def _current_status(contact: _Contact, items: list[_Interaction], signals: llm.Signals) -> str:
    tickets = [t for t in signals.open_threads if t["last_type"] == "ticket_opened"]
    if tickets:
        subject = tickets[0]["subject"] or "untitled"
        more = f" (+{len(tickets) - 1} more)" if len(tickets) > 1 else ""
        return truncate_words(f"Open ticket: {subject}{more}", 150)
    if not items:
        stage = contact.stage or "new contact"
        return f"{stage.capitalize()}, no interactions logged yet"
    latest = items[0]
    when = f" ({_day(latest.date)})" if latest.date else ""
    if latest.type in _OUTBOUND_TYPES or (latest.direction == "outbound" and latest.type not in RESOLUTION_TYPES):
        by = f" from {latest.agent}" if latest.agent else ""
        return f"Awaiting reply to {_label_lower(latest.type)}{by}{when}"
    if latest.type == "email_received" or latest.direction == "inbound":
        return f"Contact wrote last{when}; reply pending"
    n = len(signals.open_threads)
    threads = f"{n} open thread{'s' if n > 1 else ''}" if n else "no open threads"
    if contact.stage == "customer":
        return "Active customer, no open tickets" + (f"; {threads}" if n else "")
    stage = contact.stage or "contact"
    return f"{stage.capitalize()}, {threads}"


def _recommended_tone(contact: _Contact, items: list[_Interaction]) -> str:
    recent = items[:5]
    sentiments = [i.sentiment for i in recent]
    if "escalation" in sentiments[:3]:
        return "Calm, apologetic and concrete: acknowledge the frustration and give a clear resolution path"
    if any(i.intent == "churn_risk" for i in recent[:3]) or contact.stage == "churning":
        return "Attentive and reassuring: listen to their concerns and focus on the value delivered"
    negative = sentiments.count("negative")
    positive = sentiments.count("positive")
    if negative > positive:
        return "Empathetic and solution-focused: acknowledge past issues before anything else"
    if positive > negative:
        if any(i.intent == "purchase_intent" for i in recent):
            return "Warm and professional: emphasise value and reliability"
        return "Warm and professional: build on the positive relationship"
    if not items and contact.stage in ("", "prospect", "qualified"):
        return "Friendly and concise: lead with relevance and value"
    return "Professional and friendly"


def generate_context(material: Mapping[str, Any]) -> llm.GeneratedContext:
    """The working-context briefing of a contact, assembled from its material.

    A 2-3 sentence summary, 4-6 key facts, a one-line current status and a recommended tone.
    """
    contact = _contact(material)
    items = _interactions(material)
    count = _interaction_count(material, items)
    signals = compute_signals(material)

    # Sentence 1: who they are.
    if contact.name or contact.email or contact.company or contact.stage:
        stage = _stage_phrase(contact.stage)
        at = f" at {contact.company}" if contact.company else ""
        since = _month_year(contact.first_touch)
        origin = f", first in touch in {since}" if since else ""
        via = f" via {contact.source.replace('_', ' ')}" if contact.source else ""
        sentences = [f"{contact.display_name} is {stage}{at}{origin}{via}."]
    else:
        sentences = ["No details are on record for this contact yet."]

    # Sentence 2: history highlights.
    if items:
        latest = items[0]
        about = ", ".join(x for x in (_label_lower(latest.type), latest.agent, _day(latest.date)) if x)
        what = f": {truncate_words(latest.summary, 160)}" if latest.summary else ""
        plural = "s" if count != 1 else ""
        history = f"Of {count} logged interaction{plural}, the latest ({about}){what}"
        sentences.append(_sentence_end(history))
        notable = next((i for i in items[1:] if _is_notable(i) and i.summary), None)
        if notable is not None:
            when = f" ({_day(notable.date)})" if notable.date else ""
            sentences.append(_sentence_end(f"Earlier{when}: {truncate_words(notable.summary, 140)}"))
    else:
        sentences.append("No interactions have been logged yet.")

    # Sentence 3 (when there is room): the relationship.
    mood = _mood(items)
    if mood and len(sentences) < 3:
        sentences.append(mood)

    return llm.GeneratedContext(
        summary=truncate_words(" ".join(sentences), 900),
        key_facts=_key_facts(contact, items, count, signals),
        current_status=_current_status(contact, items, signals),
        recommended_tone=_recommended_tone(contact, items),
    )


def _mood(items: list[_Interaction]) -> str:
    sentiments = [i.sentiment for i in items[:10]]
    pos, neg, esc = sentiments.count("positive"), sentiments.count("negative"), sentiments.count("escalation")
    if not sentiments:
        return ""
    if esc:
        return f"Recent interactions include {esc} escalation{'s' if esc > 1 else ''}; handle with care."
    if neg > pos:
        return "Recent interactions have been mostly negative."
    if pos > neg:
        return "Recent interactions have been mostly positive."
    return "Recent interactions have been mixed or neutral."


def _key_facts(contact: _Contact, items: list[_Interaction], count: int, signals: llm.Signals) -> list[str]:
    facts: list[str] = []
    if contact.stage:
        facts.append(f"Stage: {contact.stage}" + (f" (source: {contact.source})" if contact.source else ""))
    if contact.company:
        facts.append(f"Company: {contact.company}")
    if items:
        latest = items[0]
        who = f" by {latest.agent}" if latest.agent else ""
        when = f"; last touch {_day(latest.date)}{who}" if latest.date else ""
        facts.append(f"{count} interaction{'s' if count != 1 else ''} logged{when}")
    seen: set[str] = set()
    for item in items:
        if len(facts) >= 5:
            break
        point = item.key_points[0] if item.key_points else ""
        if point and point.casefold() not in seen:
            seen.add(point.casefold())
            when = f" ({_day(item.date)})" if item.date else ""
            facts.append(f"{truncate_words(point, 100)}{when}")
    if signals.open_threads:
        t = signals.open_threads[0]
        facts.append(f"Open thread: {t['subject'] or t['thread_id']} (last: {_label_lower(str(t['last_type']))})")
    if any(i.intent == "churn_risk" for i in items[:5]):
        facts.append("Used churn language recently (cancel, switch, not renewing)")
    if contact.tags:
        facts.append("Tags: " + ", ".join(contact.tags[:8]))
    # Pad to the four facts the prompt asks for with what is always known.
    fillers = [
        f"Email: {contact.email}" if contact.email else "",
        f"First contact: {_day(contact.first_touch)}" if contact.first_touch else "",
        "No interactions logged yet" if not items else "",
        "No open threads" if not signals.open_threads else "",
        "Stage unknown" if not contact.stage else "",
        "No tags recorded" if not contact.tags else "",
    ]
    for filler in fillers:
        if len(facts) >= 4:
            break
        if filler and filler not in facts:
            facts.append(filler)
    return [truncate_words(f, 160) for f in facts[:6]]


_SUGGESTED_ACTIONS = {
    "warm_reply": "Reply today: answer their questions and propose a short discovery call",
    "escalation": "Contact {name} promptly, acknowledge the issue and own the resolution",
    "complex_question": "Answer the question in the latest interaction with a detailed, specific reply",
    "upsell_opportunity": "Reach out with a tailored offer (e.g. volume pricing) based on recent orders",
    "churn_risk": "Call {name} to understand their concerns and offer a concrete retention plan",
    "completed_sequence": "Review engagement and decide between a personal follow-up and nurture",
    "customer_request": "Fulfil {name}'s request and confirm back to them",
}


def generate_handoff_summary(
    from_agent: str | None,
    to_agent_or_human: str | None,
    reason: str | None,
    reason_detail: str | None,
    material: Mapping[str, Any],
) -> llm.HandoffSummary:
    """The briefing for a handoff: why, what the receiver must know, and a first action.

    `context_summary` is capped at 800 characters (~200 tokens).
    """
    contact = _contact(material)
    items = _interactions(material)
    existing = _mapping(material.get("existing_context"))
    count = _interaction_count(material, items)
    signals = compute_signals(material)

    source = _capitalised(_one_line(from_agent)) or "Another agent"
    target = _one_line(to_agent_or_human) or "a human teammate"
    reason_key = _one_line(reason).lower()
    why = reason_key.replace("_", " ") or "unspecified reason"
    detail = _tidy_tokens(_one_line(reason_detail))
    if detail:
        why = f"{why}: {truncate_words(detail, 200)}"
    at = f" ({contact.company})" if contact.company else ""
    who = contact.name or contact.email or "this contact"
    parts = [f"{source} is handing {who}{at} to {target} — {why}."]

    plural = "s" if count != 1 else ""
    logged = f"{count} logged interaction{plural}" if count else "no logged interactions yet"
    parts.append(f"They are {_stage_phrase(contact.stage)} with {logged}.")
    existing_summary = _tidy_tokens(_one_line(existing.get("summary")))
    if existing_summary:
        parts.append(_sentence_end(truncate_words(existing_summary, 250)))
    if items and items[0].summary:
        when = f" ({_day(items[0].date)})" if items[0].date else ""
        parts.append(_sentence_end(f"Latest{when}: {truncate_words(items[0].summary, 200)}"))
    facts = [_tidy_tokens(_one_line(f)) for f in _sequence(existing.get("key_facts"))]
    facts = [truncate_words(f, 100) for f in facts if f][:3]
    if facts:
        parts.append(_sentence_end("Key facts: " + "; ".join(facts)))
    if signals.open_threads:
        subjects = [str(t["subject"] or t["thread_id"]) for t in signals.open_threads[:2]]
        parts.append(_sentence_end("Open: " + "; ".join(subjects)))

    name = contact.name or contact.email or "the customer"
    action = _SUGGESTED_ACTIONS.get(reason_key, "Review the context and follow up with {name}")
    if reason_key not in _SUGGESTED_ACTIONS and items and items[0].intent == "question":
        action = "Answer {name}'s open question from the latest interaction"
    return llm.HandoffSummary(
        context_summary=truncate_words(" ".join(parts), HANDOFF_MAX_CHARS),
        suggested_action=truncate_words(action.format(name=name), 200),
    )


# --- voice (seed 004): a voice agent's next state with a caller, without a model -------------------

_VOICE_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
    each few for from further get got had hadn't has hasn't have haven't having he her here hers herself him
    himself his how i i'd i'll i'm i've if in into is isn't it it's its itself just know let like me more most
    much my myself need no nor not now of off ok okay on once only or other ought our ours ourselves out over own
    really right same say said she should shouldn't so some such sure than thank thanks that that's the their
    theirs them themselves then there there's these they they're think this those through to too under until up
    us very want was wasn't way we we're well were weren't what what's when where which while who whom why will
    with won't would wouldn't yeah yes you you're your yours yourself going hello hi bye goodbye great good fine
    call calling today tomorrow yesterday something anything thing things time maybe actually please sorry one
    two three back still tell talk talked speak little bit lot kind sort mean name""".split()  # noqa: SIM905
)
_VOICE_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
_VOICE_FRUSTRATED = re.compile(
    r"\b(frustrat\w*|annoy\w*|angry|furious|ridiculous|unacceptable|fed up|waste of (my )?time|terrible|"
    r"still (not|no|hasn't|haven't)|complain\w*|upset)\b",
    re.IGNORECASE,
)
_VOICE_CONFUSED = re.compile(
    r"\b(confus\w*|(don't|do not|didn't) (understand|get it)|not sure (what|how|why)|what do you mean|"
    r"lost me|unclear|makes no sense)\b",
    re.IGNORECASE,
)
_VOICE_SATISFIED = re.compile(
    r"\b(thank you|thanks|perfect|wonderful|helpful|appreciate\w*|that's great|sounds good|brilliant)\b",
    re.IGNORECASE,
)
#: Fewer topics than three in a short call: these fill the list (tier 2 keeps 3-5).
VOICE_FALLBACK_TOPICS = ("the reason for this call", "questions to follow up", "next steps")


def voice_topics(turns: Sequence[tuple[str, str]], limit: int = 5) -> list[str]:
    """3-5 topics of a call: the caller's most frequent content words (the agent's as a tie-break
    and fallback), first mention first among equals; padded with VOICE_FALLBACK_TOPICS."""
    counts: dict[str, float] = {}
    first: dict[str, int] = {}
    position = 0
    for role, message in turns:
        weight = 1.0 if role == "user" else 0.4
        for match in _VOICE_WORD.finditer(message or ""):
            word = match.group().lower().strip("'-")
            if len(word) < 4 or word in _VOICE_STOPWORDS:
                continue
            counts[word] = counts.get(word, 0.0) + weight
            first.setdefault(word, position)
            position += 1
    ranked = sorted(counts, key=lambda w: (-counts[w], first[w]))[:limit]
    topics = list(ranked)
    for filler in VOICE_FALLBACK_TOPICS:
        if len(topics) >= 3:
            break
        topics.append(filler)
    return topics


def voice_sentiment(turns: Sequence[tuple[str, str]]) -> llm.VoiceSentiment:
    """The caller's sentiment from what the caller said: frustrated, confused, engaged (a long or
    questioning call), satisfied (thanks, praise), else neutral."""
    said = [message for role, message in turns if role == "user" and message]
    text = " ".join(said)
    if _VOICE_FRUSTRATED.search(text):
        return "frustrated"
    if _VOICE_CONFUSED.search(text):
        return "confused"
    if len(said) >= 6 or len(text) >= 600 or text.count("?") >= 3:
        return "engaged"
    if _VOICE_SATISFIED.search(text):
        return "satisfied"
    return "neutral"


def generate_voice_state(
    agent_profile: Mapping[str, Any], caller_profile: Mapping[str, Any], turns: Sequence[tuple[str, str]]
) -> llm.VoiceState:
    """The deterministic stand-in for the greeting model: topics from the caller's words, a greeting
    that names the caller (when known) and the first topic, a rule-based sentiment and a one-sentence
    summary. The same input always gives the same state."""
    topics = voice_topics(turns)
    name = _one_line(caller_profile.get("name"))
    agent = _one_line(agent_profile.get("agent_name")) or "the agent"
    hello = f"Hi {name}!" if name else "Welcome back!"
    greeting = truncate_words(
        f"{hello} Last time we talked about {topics[0]} - shall we pick up where we left off?", 300
    )
    listed = ", ".join(topics[:2]) + f" and {topics[2]}"
    summary = truncate_words(f"Talked with {agent} about {listed}.", 400)
    return llm.VoiceState(
        next_greeting=greeting, key_topics=topics, sentiment=voice_sentiment(turns), conversation_summary=summary
    )
