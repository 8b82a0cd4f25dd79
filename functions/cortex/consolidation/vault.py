"""The long-term vault: promoted memories as markdown files with YAML front matter.

Where: `<CORTEX_VAULT_DIR or <data_dir>/vault>/<tenant id>/<kind>/<slug>-<first 8 of the id>.md`,
the relative part chosen in SQL (cortex.consolidation_promote_candidates), so a memory always has
the same path. A file is written atomically (a temporary file, then a rename) and only when absent;
one that exists for the same memory id is left alone: a re-run never writes a second file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from cortex.config import Settings, get_settings
from cortex.errors import CortexError


def vault_root(tenant_id: str, settings: Settings | None = None) -> Path:
    """The tenant's vault folder (not created here)."""
    settings = settings or get_settings()
    base = Path(settings.vault_dir) if settings.vault_dir else Path(settings.data_dir) / "vault"
    return base / str(tenant_id)


def render(memory: Mapping[str, Any], criteria: Sequence[str], promoted_at: datetime | None = None) -> str:
    """The markdown of a promoted memory: YAML front matter (id, kind, title, importance, confidence,
    tags, source agent, times, criteria met), then the title as a heading and the body."""
    front = {
        "id": str(memory["id"]),
        "kind": memory.get("kind"),
        "title": memory.get("title"),
        "importance": memory.get("importance"),
        "confidence": memory.get("confidence"),
        "tags": list(memory.get("tags") or []),
        "source_agent": memory.get("source_agent"),
        "contact_id": memory.get("contact_id"),
        "created_at": str(memory.get("created_at")),
        "valid_from": str(memory.get("valid_from")),
        "access_count": memory.get("access_count"),
        "promoted_at": (promoted_at or datetime.now(UTC)).isoformat(),
        "criteria_met": list(criteria),
        "status": "promoted",
    }
    head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True).strip()
    body = str(memory.get("body") or "").strip()
    return f"---\n{head}\n---\n\n# {memory.get('title')}\n" + (f"\n{body}\n" if body else "")


def front_matter(text: str) -> dict[str, Any]:
    """The YAML front matter of a markdown text ({} when it has none)."""
    if not text.startswith("---\n"):
        return {}
    end = text.find("\n---\n", 4)
    if end < 0:
        return {}
    loaded = yaml.safe_load(text[4:end])
    return loaded if isinstance(loaded, dict) else {}


def write_note(root: Path, relative: str, text: str, memory_id: str) -> bool:
    """Writes `text` at root/relative unless that file exists for this memory already (False: left
    alone). A file there for another memory is an error (409); a path leaving the vault too (422)."""
    target = (root / relative).resolve()
    if not target.is_relative_to(root.resolve()):
        raise CortexError(422, "invalid_vault_path", f"vault path {relative!r} leaves the vault", "vault_path")
    if target.exists():
        if str(front_matter(target.read_text(encoding="utf-8")).get("id")) == str(memory_id):
            return False
        raise CortexError(409, "vault_conflict", f"{target} belongs to another memory", "vault_path")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".promote-", suffix=".md", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True
