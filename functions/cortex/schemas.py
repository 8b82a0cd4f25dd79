"""What every capability's HTTP payloads share: the request/response bases, constrained field
types, and the error body.

Request models forbid unknown keys and repeat the SQL check constraints (enums, lengths) so a
bad request is refused before a model is called or a transaction opened, with the field named;
SQL checks everything again, so PostgREST callers get the same rules. Response models describe
the JSON the SQL functions return and allow extra keys, so adding a field in SQL is never a
breaking change. The OpenAPI document is generated from these classes (`cortex.openapi`).
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import phonenumbers
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

# --- limits (docs/api.md "Limits"; SQL enforces the same in 20261122001800_limits.sql) ------------

#: Levels of nesting a JSON value (custom_fields, metadata) may have; the value itself is level 1.
MAX_JSON_DEPTH = 32
#: Bytes a JSON value may take as UTF-8 JSON text.
MAX_JSON_BYTES = 65_536
#: Tags per contact, and characters per tag (a GIN index entry must fit a third of a page).
MAX_TAGS = 100
MAX_TAG_CHARS = 100
#: The largest value of a Postgres `int` (offsets and other integer query parameters).
MAX_INT = 2**31 - 1

#: Characters no email may hold: Unicode Cc, Cf, Zl, Zp, and Zs but the space (every zero-width
#: and bidi control among them), plus invisible fillers and variation selectors. The SQL list,
#: cortex.invisible_characters(), is the same (tests compare them).
INVISIBLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00, 0x1F), (0x7F, 0xA0), (0xAD, 0xAD), (0x34F, 0x34F), (0x600, 0x605), (0x61C, 0x61C),
    (0x6DD, 0x6DD), (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x115F, 0x1160), (0x1680, 0x1680),
    (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2000, 0x200F), (0x2028, 0x202F), (0x205F, 0x2064),
    (0x2066, 0x206F), (0x3000, 0x3000), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F), (0xE0100, 0xE01EF),
)  # fmt: skip
_INVISIBLE_CLASS = "".join(f"{chr(a)}-{chr(b)}" if a != b else chr(a) for a, b in INVISIBLE_RANGES)
#: A usable address: something@domain.tld, no whitespace, no invisible characters (what SQL checks
#: after trimming and lower-casing; cortex.normalise_email).
_ADDRESS_CHAR = f"[^@\\s{_INVISIBLE_CLASS}]"
EMAIL_PATTERN = f"^{_ADDRESS_CHAR}+@{_ADDRESS_CHAR}+\\.{_ADDRESS_CHAR}+$"
_INVISIBLE = re.compile(f"[{_INVISIBLE_CLASS}]")
_EMAIL = re.compile(EMAIL_PATTERN)


def _email(value: str) -> str:
    bad = _INVISIBLE.search(value)
    if bad:
        raise ValueError(f"email contains an invisible or control character (U+{ord(bad.group()):04X})")
    value = unicodedata.normalize("NFC", value.strip(" "))
    if not _EMAIL.match(value):
        raise ValueError("email is not a valid address")
    return value


def json_depth(value: Any) -> int:
    """Levels of nesting of a decoded JSON value (a scalar is 0, `{}` is 1), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _json_limits(value: dict[str, Any]) -> dict[str, Any]:
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    size = len(json.dumps(value, ensure_ascii=False).encode())
    if size > MAX_JSON_BYTES:
        raise ValueError(f"too large: {size} bytes of JSON, at most {MAX_JSON_BYTES}")
    return value


def _utc(value: datetime) -> datetime:
    # Postgres takes UTC offsets up to 15:59 and whole minutes best: send every instant in UTC.
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("out of range once converted to UTC") from None


#: What SQL accepts as stored (cortex.normalise_phone; the contacts table's check): canonical E.164.
E164_PATTERN = r"^\+[1-9][0-9]{6,14}$"
_E164 = re.compile(E164_PATTERN)


def e164(value: str) -> str:
    """A phone number in canonical E.164 (`+16125551234`), validated with the `phonenumbers`
    library (country code, length and number ranges), formatting removed; ValueError otherwise.
    A number must be international: `+` (or `00`) and the country code."""
    text = value.strip()
    if not text:
        raise ValueError("phone is empty")
    if text.startswith("00"):
        text = "+" + text[2:]
    if not text.startswith("+"):
        raise ValueError("phone must be an international (E.164) number: + and the country code")
    try:
        number = phonenumbers.parse(text, None)
    except phonenumbers.NumberParseException as exc:
        raise ValueError(f"phone is not a phone number: {exc}") from None
    if not phonenumbers.is_valid_number(number):
        raise ValueError("phone is not a valid number for its country code")
    canonical = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    if not _E164.match(canonical):  # never seen; SQL would refuse it all the same
        raise ValueError("phone is not an E.164 number")
    return canonical


def not_null(schema: dict[str, Any]) -> None:
    """`json_schema_extra` of an optional field that may be absent but not null: the schema
    leaves out the null its `X | None` type would state (a validator refuses null)."""
    options = schema.get("anyOf")
    if isinstance(options, list):
        kept = [o for o in options if o != {"type": "null"}]
        schema.pop("anyOf")
        schema.pop("default", None)
        if len(kept) == 1:
            schema.update(kept[0])
        else:
            schema["anyOf"] = kept


AgentName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,62}$")]
Email = Annotated[
    str,
    StringConstraints(min_length=1, max_length=320),
    AfterValidator(_email),
    Field(json_schema_extra={"pattern": EMAIL_PATTERN}),
]
#: A JSON object callers store (custom_fields, metadata): at most MAX_JSON_DEPTH deep, MAX_JSON_BYTES big.
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_limits)]
JSON_LIMITS = f"A JSON object nested at most {MAX_JSON_DEPTH} levels deep and at most {MAX_JSON_BYTES} bytes as JSON."
Tag = Annotated[str, StringConstraints(max_length=MAX_TAG_CHARS)]
Tags = Annotated[list[Tag], Field(max_length=MAX_TAGS)]
#: An instant; without a zone it is UTC; any offset Python can represent is converted to UTC.
Instant = Annotated[datetime, AfterValidator(_utc)]
Name = Annotated[str, StringConstraints(max_length=500)]
#: A phone number as a person writes it (formatting allowed), stored as E.164 (`e164`).
Phone = Annotated[
    str,
    StringConstraints(max_length=50),
    AfterValidator(e164),
    Field(description="An international number, e.g. +16125551234 (formatting is removed); stored as E.164."),
]
Source = Annotated[str, StringConstraints(max_length=100)]
Ref = Annotated[str, StringConstraints(max_length=200)]  # owner_human_id, human_id, external_id, ...
Subject = Annotated[str, StringConstraints(max_length=1000)]
RawContent = Annotated[str, StringConstraints(max_length=1_000_000)]
SearchText = Annotated[str, StringConstraints(max_length=200)]


class Request(BaseModel):
    """Base of request models: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    """Base of response models: extra keys are allowed (adding a field in SQL is not breaking)."""

    model_config = ConfigDict(extra="allow")


class FieldError(Response):
    """One validation failure."""

    field: str
    message: str
    type: str


class ErrorDetail(Response):
    """What went wrong: a machine code, a message, the field at fault and how to fix it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    code: str = Field(examples=["validation_error", "not_found", "unauthorized"])
    message: str
    field: str | None = Field(default=None, description="Dotted location of the offending input.")
    hint: str | None = None
    sqlstate: str | None = Field(default=None, description="SQLSTATE when the database refused.")
    detail: str | None = None
    errors: list[FieldError] | None = Field(default=None, description="Every validation failure (422).")
    in_: Literal["path", "query", "body"] | None = Field(
        default=None, alias="in", description="Where the invalid input was (422 validation errors)."
    )
    allowed: list[str] | None = Field(default=None, description="The methods a path accepts (405).")
    request_id: str | None = None


class ErrorResponse(Response):
    """Every error response has this body."""

    error: ErrorDetail
