"""The text of a merge: the deterministic merge, the check that nothing was lost, and the diff.

A merge may be written by the model (when a Claude key is configured) or, offline, by
`deterministic_merge`: the most important member's title, then every unique sentence of the
members (titles included) in order of importance. Whoever wrote it, `missing_content` checks the
result before anything changes: every unique sentence of the originals must survive (verbatim
after normalising case and spaces, or reworded: all its numbers and negation kept and at least 80 %
of its content words present), and every entity named in the originals' text must still be named.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[0-9a-zà-ÿ']+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_NEGATION = re.compile(r"\b(not|no|never|none|nothing|cannot|without|neither|nor)\b|n['\u2019]t\b")
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "by",
        "with",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "as",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "into",
        "over",
        "under",
        "about",
        "than",
        "then",
        "so",
        "such",
    ]
)
MIN_WORD_COVERAGE = 0.8


@dataclass(frozen=True)
class MergedText:
    """A merged memory's text and what it preserves."""

    title: str
    body: str
    entities: list[str]


def normalise(text: str) -> str:
    """Lower case, single spaces, no trailing punctuation: how sentences are compared."""
    return " ".join(text.lower().split()).rstrip(" .!?;:")


def sentences(text: str) -> list[str]:
    """The sentences of a text (split after . ! ? and at line breaks), stripped, empty ones dropped."""
    return [s.strip(" -*\t") for s in _SENTENCE.split(text or "") if s.strip(" -*\t")]


def unique_sentences(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every distinct sentence of the members, titles included, in member order (most important first)."""
    seen: set[str] = set()
    out: list[str] = []
    for m in members:
        for s in [str(m.get("title") or ""), *sentences(str(m.get("body") or ""))]:
            key = normalise(s)
            if key and key not in seen:
                seen.add(key)
                out.append(s.strip())
    return out


def entities(members: Sequence[Mapping[str, Any]]) -> list[str]:
    """The entities the members name: the names of the entity nodes they link to that appear in their text."""
    text = " ".join(f"{m.get('title', '')} {m.get('body', '')}" for m in members).lower()
    names = {str(e) for m in members for e in (m.get("entities") or []) if str(e).strip()}
    return sorted(n for n in names if n.lower() in text)


def deterministic_merge(members: Sequence[Mapping[str, Any]]) -> MergedText:
    """The offline merge: the first (most important) member's title, and every unique sentence of the
    members as the body, each once. Keeps everything by construction."""
    if len(members) < 2:
        raise ValueError("a merge needs at least two memories")
    title = str(members[0]["title"]).strip()
    body_sentences = [s for s in unique_sentences(members) if normalise(s) != normalise(title)]
    body = " ".join(s if s.rstrip()[-1:] in ".!?" else s.rstrip() + "." for s in body_sentences)
    return MergedText(title=title, body=body or title, entities=entities(members))


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP]


def _covered(sentence: str, merged_norm: str, merged_words: set[str], merged_numbers: set[str]) -> bool:
    key = normalise(sentence)
    if key in merged_norm:
        return True
    if not set(_NUMBER.findall(sentence)) <= merged_numbers:
        return False
    if _NEGATION.search(sentence.lower()) and not _NEGATION.search(merged_norm):
        return False
    words = _words(sentence)
    if not words:
        return True
    return sum(w in merged_words for w in words) / len(words) >= MIN_WORD_COVERAGE


def missing_content(members: Sequence[Mapping[str, Any]], title: str, body: str) -> list[str]:
    """What a merged title + body lost: each unique sentence of the originals not covered, and each
    entity no longer named ("entity: NAME"). An empty list means the merge keeps everything."""
    merged = f"{title}\n{body}"
    merged_norm = " ".join(merged.lower().split())
    merged_words = set(_words(merged))
    merged_numbers = set(_NUMBER.findall(merged))
    lost = [s for s in unique_sentences(members) if not _covered(s, merged_norm, merged_words, merged_numbers)]
    lost += [f"entity: {e}" for e in entities(members) if e.lower() not in merged.lower()]
    return lost


def content_diff(members: Sequence[Mapping[str, Any]], title: str, body: str) -> str:
    """A unified diff from the originals (one sentence a line, member by member) to the merged text."""
    before: list[str] = []
    for m in members:
        before += [f"# {m.get('id')}: {m.get('title')}", *sentences(str(m.get("body") or ""))]
    after = [f"# merged: {title}", *sentences(body)]
    return "\n".join(difflib.unified_diff(before, after, "originals", "merged", lineterm="", n=1))
