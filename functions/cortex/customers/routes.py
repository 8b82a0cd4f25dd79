"""HTTP routes of customers: `/api/v1/customers` (the context, the chat stream) and the chat page
`/chat/customers/{id}`."""

from __future__ import annotations

from pydantic import BaseModel

from cortex.customers import controller, service
from cortex.customers.models import ChatRequest, ContextQuery, CustomerContext, CustomerPath, UIMessageChunk
from cortex.customers.page import chat_page
from cortex.errors import CortexError
from cortex.routing import Call, Page, Reply, Router, Stream

router = Router("customers")


class ChatPage(BaseModel):
    """An HTML document (text/html), not JSON."""


@router.route(
    "GET", "/<customer_id>/context", name="get_customer_context",
    summary="The customer context the agents see (seed 002's markdown, about 3,000 tokens)",
    responses={200: CustomerContext}, path_params=CustomerPath, query=ContextQuery, errors=(404, 422),
)  # fmt: skip
async def get_customer_context(call: Call) -> Reply:
    """One call to public.build_customer_context."""
    customer_id = str(call.path_as(CustomerPath).customer_id)
    text = await service.abuild_context(call.claims, customer_id, call.query_as(ContextQuery).max_tokens)
    return Reply(200, {"customer_id": customer_id, "context": text, "tokens": service.estimate(text)})


def _check_messages(body: ChatRequest) -> None:
    """The last message must be the user's, with text (422 naming it)."""
    last = len(body.messages) - 1
    if body.messages[last].role != "user" or not body.messages[last].text().strip():
        raise CortexError(
            422,
            "validation_error",
            f"messages.{last}: the last message must be a user message with text",
            f"messages.{last}",
            'send {"role": "user", "parts": [{"type": "text", "text": "..."}]} last',
        )


@router.route(
    "POST", "/<customer_id>/chat/stream", name="customer_chat_stream",
    summary="Chat with the customer agents: one streamed response (Vercel AI SDK UI message stream)",
    responses={200: UIMessageChunk}, path_params=CustomerPath, body=ChatRequest, errors=(403, 404, 409, 422),
    media_type="text/event-stream",
    description="The body is the AI SDK useChat body ({id, messages: [{id, role, parts, metadata}]}); the "
    "answer is text/event-stream with x-vercel-ai-ui-message-stream: v1. The first agent is the last assistant "
    "message's metadata.agentType (default customer_mgmt); an agent may hand the conversation to the other "
    "(at most 2 handoffs, data-handoff parts, each recorded as a completed Cortex handoff). Use the key of "
    "customer_mgmt or product_mgmt (or an admin). Errors before the stream starts are JSON; after, an error "
    "part ends the stream. A client that disconnects aborts the model stream.",
)  # fmt: skip
async def customer_chat_stream(call: Call) -> Reply:
    """Checks the messages and opens the chat (both before any byte is streamed), then streams."""
    body = call.body_as(ChatRequest)
    _check_messages(body)
    chat = await service.start_chat(call.claims, str(call.path_as(CustomerPath).customer_id))
    return Reply(200, Stream(controller.stream_chat(chat, body.messages)), controller.HEADERS)


@router.route(
    "GET", "/<customer_id>/chat", name="customer_chat_page", summary="The chat page of a customer (HTML)",
    responses={200: ChatPage}, path_params=CustomerPath, auth=False, absolute=("/chat/customers/<customer_id>",),
    media_type="text/html",
    description="A small server-rendered page: it asks once for an agent key (kept in sessionStorage), sends "
    "it as the Bearer header, and shows the stream as it arrives, a card per tool result and the speaking agent.",
)  # fmt: skip
async def customer_chat_page(call: Call) -> Reply:
    """The page; it holds no data (the stream endpoint authenticates every request)."""
    return Reply(200, Page(chat_page(str(call.path_as(CustomerPath).customer_id))))
