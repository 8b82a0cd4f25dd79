"""The SDK's customer methods (routes under /api/v1/customers/; the chat page is for browsers)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from cortex.client._core import Op, amethod, checked, dump, method, parser, query_of, segment
from cortex.customers.models import ChatRequest, ContextQuery, CustomerContext, CustomerPath, UIMessageChunk


def get_customer_context(
    customer_id: UUID | str, query: ContextQuery | None = None, /, **fields: Any
) -> Op[CustomerContext]:
    """GET /customers/<customer_id>/context: The customer context the agents see (seed 002's markdown)."""
    where = checked(CustomerPath, None, {"customer_id": customer_id}, "path")
    query = checked(ContextQuery, query, fields, "query")
    return Op(
        "get_customer_context",
        "GET",
        f"/customers/{segment(where.customer_id)}/context",
        parser(CustomerContext),
        query=query_of(query),
    )


def _chunks(items: Any) -> list[UIMessageChunk]:
    return [UIMessageChunk.model_validate(item) for item in items]


def customer_chat_stream(
    customer_id: UUID | str, body: ChatRequest | None = None, /, **fields: Any
) -> Op[list[UIMessageChunk]]:
    """POST /customers/<customer_id>/chat/stream: Chat with the customer agents; the whole answer's
    UI message stream parts, in order (text deltas, tool results, data-agent / data-handoff
    switches, finish or error). For tokens as they arrive, read the endpoint as a stream (an AI SDK
    frontend does)."""
    where = checked(CustomerPath, None, {"customer_id": customer_id}, "path")
    request = checked(ChatRequest, body, fields, "body")
    return Op(
        "customer_chat_stream",
        "POST",
        f"/customers/{segment(where.customer_id)}/chat/stream",
        _chunks,
        body=dump(request),
        events=True,
    )


class Methods:
    """customers: the Client's methods."""

    get_customer_context = method(get_customer_context)
    customer_chat_stream = method(customer_chat_stream)


class AsyncMethods:
    """customers: the AsyncClient's methods."""

    get_customer_context = amethod(get_customer_context)
    customer_chat_stream = amethod(customer_chat_stream)
