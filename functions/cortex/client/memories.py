"""The SDK's memories methods (routes under /api/v1/memories)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any
from uuid import UUID

from cortex.client._core import AsyncRunner, Op, Runner, amethod, checked, dump, method, parser, query_of, segment
from cortex.graph.models import Node
from cortex.memories.models import (
    MemoryCreate,
    MemoryForgetQuery,
    MemoryGetQuery,
    MemoryList,
    MemoryListQuery,
    MemoryPatch,
    MemoryPath,
    MemorySupersede,
    MemorySuperseded,
    MemoryWithEdges,
    MemoryWritten,
)
from cortex.memories.search import MemorySearch, MemorySearchResults


def remember(body: MemoryCreate | None = None, /, **fields: Any) -> Op[MemoryWritten]:
    """POST /memories: Remember something (de-duplicated, superseding its key slot)."""
    body = checked(MemoryCreate, body, fields, "body")
    return Op("remember", "POST", "/memories", parser(MemoryWritten), body=dump(body))


def list_memories(query: MemoryListQuery | None = None, /, **fields: Any) -> Op[MemoryList]:
    """GET /memories: List memories (filters, as of a time, keyset pages)."""
    query = checked(MemoryListQuery, query, fields, "query")
    return Op("list_memories", "GET", "/memories", parser(MemoryList), query=query_of(query))


def get_memory(id: UUID | str, query: MemoryGetQuery | None = None, /, **fields: Any) -> Op[MemoryWithEdges]:
    """GET /memories/<id>: Get a memory with its edges."""
    where = checked(MemoryPath, None, {"id": id}, "path")
    query = checked(MemoryGetQuery, query, fields, "query")
    return Op("get_memory", "GET", f"/memories/{segment(where.id)}", parser(MemoryWithEdges), query=query_of(query))


def update_memory(id: UUID | str, body: MemoryPatch | None = None, /, **fields: Any) -> Op[Node]:
    """PATCH /memories/<id>: Update a memory's fields."""
    where = checked(MemoryPath, None, {"id": id}, "path")
    body = checked(MemoryPatch, body, fields, "body")
    return Op("update_memory", "PATCH", f"/memories/{segment(where.id)}", parser(Node), body=dump(body))


def supersede_memory(id: UUID | str, body: MemorySupersede | None = None, /, **fields: Any) -> Op[MemorySuperseded]:
    """POST /memories/<id>/supersede: Replace a memory by a new version."""
    where = checked(MemoryPath, None, {"id": id}, "path")
    body = checked(MemorySupersede, body, fields, "body")
    return Op(
        "supersede_memory",
        "POST",
        f"/memories/{segment(where.id)}/supersede",
        parser(MemorySuperseded),
        body=dump(body),
    )


def forget_memory(id: UUID | str, query: MemoryForgetQuery | None = None, /, **fields: Any) -> Op[Node]:
    """DELETE /memories/<id>: Forget a memory (archive it; nothing is deleted)."""
    where = checked(MemoryPath, None, {"id": id}, "path")
    query = checked(MemoryForgetQuery, query, fields, "query")
    return Op("forget_memory", "DELETE", f"/memories/{segment(where.id)}", parser(Node), query=query_of(query))


def search_memories(body: MemorySearch | None = None, /, **fields: Any) -> Op[MemorySearchResults]:
    """POST /memories/search: Hybrid search of memories (text, vector, graph)."""
    body = checked(MemorySearch, body, fields, "body")
    return Op("search_memories", "POST", "/memories/search", parser(MemorySearchResults), body=dump(body))


def _next_memories(query: MemoryListQuery, page: MemoryList) -> MemoryListQuery | None:
    """The query of the page after `page` (its next_cursor), or None on the last page."""
    if page.next_cursor is None:
        return None
    return query.model_copy(update={"cursor": page.next_cursor})


class Methods:
    """memories: the Client's methods."""

    remember = method(remember)
    list_memories = method(list_memories)
    get_memory = method(get_memory)
    update_memory = method(update_memory)
    supersede_memory = method(supersede_memory)
    forget_memory = method(forget_memory)
    search_memories = method(search_memories)

    def iter_memories(self: Runner, query: MemoryListQuery | None = None, /, **fields: Any) -> Iterator[Node]:
        """Every memory `list_memories` finds, page after page (keyset paging by next_cursor)."""
        page_query: MemoryListQuery | None = checked(MemoryListQuery, query, fields, "query")
        while page_query is not None:
            page = self._run(list_memories(page_query))
            yield from page.items
            page_query = _next_memories(page_query, page)


class AsyncMethods:
    """memories: the AsyncClient's methods."""

    remember = amethod(remember)
    list_memories = amethod(list_memories)
    get_memory = amethod(get_memory)
    update_memory = amethod(update_memory)
    supersede_memory = amethod(supersede_memory)
    forget_memory = amethod(forget_memory)
    search_memories = amethod(search_memories)

    async def iter_memories(
        self: AsyncRunner, query: MemoryListQuery | None = None, /, **fields: Any
    ) -> AsyncIterator[Node]:
        """Every memory `list_memories` finds, page after page (keyset paging by next_cursor)."""
        page_query: MemoryListQuery | None = checked(MemoryListQuery, query, fields, "query")
        while page_query is not None:
            page = await self._arun(list_memories(page_query))
            for item in page.items:
                yield item
            page_query = _next_memories(page_query, page)
