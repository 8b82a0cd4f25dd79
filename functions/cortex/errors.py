"""One error type for every failure a caller can cause, mapped from SQLSTATEs.

SQL functions raise with a SQLSTATE, a message, the offending column (RAISE ... USING COLUMN)
and a hint; the HTTP edge and the CLI turn that into a status code and a JSON body naming the
field, so both say exactly what the database said.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

import psycopg

# SQLSTATE -> (HTTP status, short code)
_STATUS: dict[str, tuple[int, str]] = {
    "22023": (422, "invalid_parameter_value"),
    "22P02": (422, "invalid_text_representation"),
    "22007": (422, "invalid_datetime_format"),
    "22008": (422, "datetime_field_overflow"),
    "22001": (422, "string_data_right_truncation"),
    "22009": (422, "invalid_time_zone_displacement_value"),
    "22021": (422, "character_not_in_repertoire"),
    "22P05": (422, "untranslatable_character"),
    "22003": (422, "numeric_value_out_of_range"),
    "23502": (422, "not_null_violation"),
    "23514": (422, "check_violation"),
    "23503": (422, "foreign_key_violation"),
    "23505": (409, "unique_violation"),
    "55000": (409, "object_not_in_prerequisite_state"),
    "25006": (409, "read_only_transaction"),  # a write attempted in a dry run (consolidation)
    "P0002": (404, "not_found"),
    "42501": (403, "insufficient_privilege"),
    "28000": (401, "invalid_authorization"),
    "40001": (503, "serialization_failure"),
    "40P01": (503, "deadlock_detected"),
    "57014": (503, "query_canceled"),
}
_CHECK_NAME = re.compile(r"^[a-z_]+?_([a-z_]+)_check$")


@dataclass
class CortexError(Exception):
    """A failure with an HTTP status, a machine code, a message and (when known) the field."""

    status: int
    code: str
    message: str
    field: str | None = None
    hint: str | None = None
    sqlstate: str | None = None
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __str__(self) -> str:
        return self.message

    def to_json(self) -> dict[str, Any]:
        """The error body: {"error": {code, message, field, hint, sqlstate, ...}}."""
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        for key in ("field", "hint", "sqlstate"):
            if getattr(self, key):
                body[key] = getattr(self, key)
        body.update(self.details)
        return {"error": body}


def field_of(diag: psycopg.errors.Diagnostic) -> str | None:
    """The column a database error is about: RAISE ... COLUMN, or the <table>_<column>_check name."""
    if diag.column_name:
        return diag.column_name
    if diag.constraint_name:
        m = _CHECK_NAME.match(diag.constraint_name)
        if m:
            return m.group(1)
    return None


def from_db_error(exc: psycopg.Error) -> CortexError:
    """Maps a database error to a CortexError; unknown SQLSTATEs become 500s."""
    state = exc.sqlstate or ""
    # Class 22 is "data exception": the caller's data, never the server's fault.
    status, code = _STATUS.get(state, (422, "data_exception") if state.startswith("22") else (500, "internal_error"))
    diag = exc.diag
    message = diag.message_primary or str(exc)
    if status == 500:
        message = "internal database error"
    details: dict[str, Any] = {}
    if diag.message_detail and status < 500:
        details["detail"] = diag.message_detail
        # A JSON object as detail (e.g. the allowed status moves) is passed on as structured fields.
        if diag.message_detail.startswith("{"):
            try:
                parsed = json.loads(diag.message_detail)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                details.update({k: v for k, v in parsed.items() if k not in ("code", "message", "field")})
    return CortexError(
        status,
        code,
        message,
        field_of(diag) if status < 500 else None,
        diag.message_hint if status < 500 else None,
        state or None,
        details,
    )


def bad_request(
    message: str, field: str | None = None, code: str = "validation_error", status: int = 422
) -> CortexError:
    """A caller error found before the database was asked."""
    return CortexError(status, code, message, field)
