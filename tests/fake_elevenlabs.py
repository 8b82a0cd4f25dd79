"""A local stand-in for the voice platform's agents API (ElevenLabs), for tests and the benchmark.

A real HTTP server on 127.0.0.1 (as tests/fake_anthropic.py stands in for Claude): it answers
`GET /v1/convai/agents/{agent_id}` with the fields Cortex reads, shaped like the real API's
response (name, conversation_config.agent.first_message, conversation_config.agent.prompt.prompt),
and refuses a request without the `xi-api-key` header (401) or for an unknown agent (404).

    with FakeElevenLabs({"agent_abc": {"name": "Margaret", ...}}) as fake:
        os.environ["CORTEX_VOICE_PLATFORM_URL"] = fake.base_url
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


class FakeElevenLabs:
    """The agents API in a background thread; `agents` maps an agent id to {name, first_message,
    system_prompt}; `requests` records (path, xi-api-key) of each request."""

    def __init__(self, agents: dict[str, dict[str, str]] | None = None, key: str = "xi-test-key") -> None:
        self.agents = dict(agents or {})
        self.key = key
        self.requests: list[tuple[str, str | None]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """What Cortex's CORTEX_VOICE_PLATFORM_URL is set to."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> FakeElevenLabs:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                key = self.headers.get("xi-api-key")
                fake.requests.append((self.path, key))
                prefix = "/v1/convai/agents/"
                if key != fake.key:
                    self._send(401, {"detail": {"status": "invalid_api_key", "message": "Invalid API key"}})
                    return
                agent_id = self.path[len(prefix) :] if self.path.startswith(prefix) else ""
                agent = fake.agents.get(agent_id)
                if agent is None:
                    self._send(404, {"detail": {"status": "agent_not_found", "message": "Agent not found"}})
                    return
                self._send(200, {
                    "agent_id": agent_id,
                    "name": agent.get("name"),
                    "conversation_config": {"agent": {
                        "first_message": agent.get("first_message"), "language": "en",
                        "prompt": {"prompt": agent.get("system_prompt"), "llm": "gemini-2.0-flash"},
                    }},
                    "metadata": {"created_at_unix_secs": 1700000000},
                    "platform_settings": {},
                })  # fmt: skip

        return Handler
