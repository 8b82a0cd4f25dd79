"""A local stand-in for the Anthropic Messages HTTP API, for tests.

Not a mock of Cortex code: a real HTTP server on 127.0.0.1 that the official SDK talks to over
a socket, so tests exercise the same request building, retries, timeouts and response parsing as
production. It answers `POST /v1/messages` with bodies shaped like the real API's.

    with FakeAnthropic() as fake:
        settings = Settings(anthropic_api_key="test", anthropic_base_url=fake.base_url)
        ...
        assert fake.requests[0]["model"] == settings.summary_model

Streaming (`"stream": true`, the customer agents): each such request takes the next scripted turn
from `fake.script` (see `text_turn` and `tool_turn`) and answers it as the API streams: server-sent
events message_start, content_block_start/delta/stop (text_delta, input_json_delta for tool_use),
message_delta and message_stop. A turn may break mid-way (an error event, or the connection
dropped), and `fake.streams` records how far each stream got (aborted by the client or not).

    fake.script = [tool_turn("handoff", {...}, text="Handing over."), text_turn("Done.")]

Also runnable as a script for subprocess use; it prints its base URL on the first line:

    python tests/fake_anthropic.py --port 0 [--delay 0.5]
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

Reply = Callable[[dict[str, Any]], str]

ANALYSIS_ANSWER: dict[str, Any] = {
    "summary": "Customer reports a shipping delay on order #1234 and asks for an update.",
    "key_points": ["Shipping delay on order #1234", "Asked for a delivery date"],
    "sentiment": "negative",
    "intent": "complaint",
}
CONTEXT_ANSWER: dict[str, Any] = {
    "summary": "Customer at a mid-size company with a recent shipping issue, now resolved.",
    "key_facts": ["Customer since January", "Had one shipping delay", "Price-conscious", "Values quality"],
    "current_status": "Active customer, no open tickets",
    "recommended_tone": "Professional, emphasise value and reliability",
}
HANDOFF_ANSWER: dict[str, Any] = {
    "context_summary": "Handed over after a warm reply asking about pricing; positive so far.",
    "suggested_action": "Send the pricing sheet and offer a discovery call",
}

VOICE_ANSWER: dict[str, Any] = {
    "next_greeting": "Hi Stefan! Ready to continue the story of how you founded Arbez?",
    "key_topics": ["Arbez founding story", "childhood memories", "first employees"],
    "sentiment": "Engaged",
    "conversation_summary": "Explored how Stefan founded Arbez and what shaped him as a child.",
}

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def prompt_text(request: dict[str, Any]) -> str:
    """The text of the last user message of a Messages API request body."""
    messages = request.get("messages") or []
    if not messages:
        return ""
    content = messages[-1].get("content", "")
    if isinstance(content, str):
        return content
    return "".join(block.get("text", "") for block in content if isinstance(block, dict))


def default_reply(request: dict[str, Any]) -> str:
    """A valid JSON answer for whichever of Cortex's prompts the request carries (summary, context,
    handoff, voice greeting)."""
    prompt = prompt_text(request)
    if prompt.startswith("You are creating a handoff summary"):
        return json.dumps(HANDOFF_ANSWER)
    if prompt.startswith("You are generating a working context summary"):
        return json.dumps(CONTEXT_ANSWER)
    if prompt.startswith("You are preparing a voice agent's memory"):
        return json.dumps(VOICE_ANSWER)
    if prompt.startswith("Summarize this"):
        # Wrapped like a chatty model would, to exercise the JSON extraction.
        return "Here is the analysis:\n```json\n" + json.dumps(ANALYSIS_ANSWER, indent=2) + "\n```"
    return "I can only answer Cortex prompts."


StreamTurn = dict[str, Any]


def text_turn(text: str, **options: Any) -> StreamTurn:
    """A scripted streamed turn that answers `text` (stop_reason end_turn). Options: `break_after`
    (events sent before the break), `break_with` ("error": an overloaded_error event; "drop": the
    connection is closed mid-body), `event_delay` (seconds between events), `trailing_text`."""
    return {"blocks": [("text", text)], **options}


def tool_turn(name: str, tool_input: Any, text: str = "", **options: Any) -> StreamTurn:
    """A scripted streamed turn that says `text` (if any), then calls tool `name` with `tool_input`
    (a dict, or a string sent as raw, possibly invalid, JSON); stop_reason tool_use. Options as for
    `text_turn`; `trailing_text` is text streamed after the tool call (what an aborted stream never
    delivers)."""
    blocks: list[tuple[Any, ...]] = [("text", text)] if text else []
    blocks.append(("tool_use", name, tool_input))
    if options.get("trailing_text"):
        blocks.append(("text", options["trailing_text"]))
    return {"blocks": blocks, **options}


def _sse_events(request: dict[str, Any], turn: StreamTurn, message_id: str, tool_ids: Any) -> list[dict[str, Any]]:
    """The events of one streamed turn, as the Messages API sends them."""
    blocks = turn.get("blocks") or [("text", "OK.")]
    uses_tool = any(b[0] == "tool_use" for b in blocks)
    events: list[dict[str, Any]] = [{
        "type": "message_start",
        "message": {"id": message_id, "type": "message", "role": "assistant", "model": request.get("model"),
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": _tokens(json.dumps(request.get("messages"))), "output_tokens": 1}},
    }]  # fmt: skip
    produced = ""
    for index, block in enumerate(blocks):
        if block[0] == "text":
            events.append(
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}
            )
            words = re.findall(r"\s*\S+\s*", block[1]) or [block[1]]
            for word in words:
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "text_delta", "text": word}})  # fmt: skip
            produced += block[1]
        else:
            raw = block[2] if isinstance(block[2], str) else json.dumps(block[2])
            tool_id = f"toolu_fake{next(tool_ids):06d}"
            start = {"type": "tool_use", "id": tool_id, "name": block[1], "input": {}}
            events.append({"type": "content_block_start", "index": index, "content_block": start})
            half = len(raw) // 2
            for piece in (raw[:half], raw[half:]):
                events.append({"type": "content_block_delta", "index": index,
                               "delta": {"type": "input_json_delta", "partial_json": piece}})  # fmt: skip
            produced += raw
        events.append({"type": "content_block_stop", "index": index})
    events.append({"type": "message_delta", "delta": {"stop_reason": "tool_use" if uses_tool else "end_turn",
                   "stop_sequence": None}, "usage": {"output_tokens": _tokens(produced)}})  # fmt: skip
    events.append({"type": "message_stop"})
    return events


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4)) if text else 0


class FakeAnthropic:
    """A Messages API server in a background thread; a context manager.

    Knobs, changeable while running:
    - `reply`: callable(request JSON) -> assistant text (default `default_reply`);
    - `fail_next(n, status)`: the next n requests fail with that HTTP status;
    - `always_fail` (with `fail_status`): every request fails;
    - `delay_seconds`: sleep before answering (to trigger client timeouts);
    - `retry_after_ms`: sent on errors as `retry-after-ms`, so SDK retries need not wait long.
    """

    def __init__(
        self,
        *,
        reply: Reply | None = None,
        delay_seconds: float = 0.0,
        port: int = 0,
        retry_after_ms: int | None = None,
    ) -> None:
        self.reply: Reply = reply or default_reply
        self.delay_seconds = delay_seconds
        self.always_fail = False
        self.fail_status = 529
        self.retry_after_ms = retry_after_ms
        self.requests: list[dict[str, Any]] = []
        # Streaming: the scripted turns still to answer, and per stream {request, events_sent, completed, aborted}.
        self.script: list[StreamTurn] = []
        self.streams: list[dict[str, Any]] = []
        self.event_delay = 0.0
        self._tool_ids = itertools.count(1)
        self.headers: list[dict[str, str]] = []
        self._failures_left = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The TCP port the server listens on."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's `base_url` (it appends `/v1/messages`)."""
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, n: int = 1, status: int = 529) -> None:
        """Make the next `n` requests fail with HTTP `status` (529 overloaded, 500, 429...)."""
        with self._lock:
            self._failures_left = n
            self.fail_status = status

    def start(self) -> FakeAnthropic:
        """Start serving in a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-anthropic",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- request handling --------------------------------------------------------------------

    def _take_failure(self) -> int | None:
        with self._lock:
            if self.always_fail:
                return self.fail_status
            if self._failures_left > 0:
                self._failures_left -= 1
                return self.fail_status
            return None

    def _answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        failure = self._take_failure()
        if failure is not None:
            kind = _ERROR_TYPES.get(failure, "api_error")
            return failure, {"type": "error", "error": {"type": kind, "message": f"Fake {kind} ({failure})"}}
        missing = [k for k in ("model", "max_tokens", "messages") if k not in request]
        if missing:
            message = f"{missing[0]}: Field required"
            return 400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        text = self.reply(request)
        body = {
            "id": f"msg_fake{next(self._ids):016d}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": _tokens(prompt_text(request)), "output_tokens": _tokens(text)},
        }
        return 200, body

    def _next_turn(self) -> StreamTurn:
        with self._lock:
            return self.script.pop(0) if self.script else text_turn("OK.")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.1 keep-alive, as the SDK's connection pool expects.
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.send_header("request-id", f"req_fake{time.monotonic_ns()}")
                if status >= 400 and fake.retry_after_ms is not None:
                    self.send_header("retry-after-ms", str(fake.retry_after_ms))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if self.path.split("?", 1)[0] != "/v1/messages":
                    self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})
                    return
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    error = {"type": "invalid_request_error", "message": "Body is not JSON"}
                    self._send(400, {"type": "error", "error": error})
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                if not headers.get("x-api-key") and not headers.get("authorization"):
                    error = {"type": "authentication_error", "message": "x-api-key header is required"}
                    self._send(401, {"type": "error", "error": error})
                    return
                with fake._lock:
                    fake.requests.append(request)
                    fake.headers.append(headers)
                if fake.delay_seconds:
                    time.sleep(fake.delay_seconds)
                if request.get("stream") and fake._take_failure() is None:
                    self._stream(request)
                    return
                status, body = fake._answer(request)
                # The client may have given up (timeout) while we slept.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(status, body)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _stream(self, request: dict[str, Any]) -> None:
                """One scripted turn as server-sent events, chunked; stops early when the client leaves."""
                turn = fake._next_turn()
                record = {"request": request, "events_sent": 0, "completed": False, "aborted": False}
                with fake._lock:
                    fake.streams.append(record)
                events = _sse_events(request, turn, f"msg_fake{next(fake._ids):016d}", fake._tool_ids)
                self.close_connection = True
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("request-id", f"req_fake{time.monotonic_ns()}")
                self.end_headers()
                delay = float(turn.get("event_delay", fake.event_delay))
                try:
                    for n, event in enumerate(events):
                        if turn.get("break_after") is not None and n >= int(turn["break_after"]):
                            if turn.get("break_with") == "error":
                                error = {
                                    "type": "error",
                                    "error": {"type": "overloaded_error", "message": "Overloaded"},
                                }
                                self._chunk(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
                                self.wfile.write(b"0\r\n\r\n")
                            return  # "drop": the body ends without its last chunk
                        self._chunk(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                        record["events_sent"] = n + 1
                        if delay:
                            time.sleep(delay)
                    self.wfile.write(b"0\r\n\r\n")
                    record["completed"] = True
                except (BrokenPipeError, ConnectionResetError):
                    record["aborted"] = True

            def do_GET(self) -> None:
                self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "Not found"}})

        return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve until SIGTERM or Ctrl-C; print the base URL first so a parent process can read it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before each answer")
    args = parser.parse_args(argv)
    fake = FakeAnthropic(port=args.port, delay_seconds=args.delay)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with fake:
        print(fake.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
