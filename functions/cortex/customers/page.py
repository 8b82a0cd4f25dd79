"""The chat page `/chat/customers/{id}`: server-rendered HTML and a small inline script (no build
toolchain). It asks once for an agent key (kept in sessionStorage, sent as the Bearer header by
fetch()), posts the conversation to the stream endpoint and renders the UI message stream as it
arrives: the text, a card per tool result, and which agent is speaking."""

from __future__ import annotations

import html
import json

_TEMPLATE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Customer chat · Cortex</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1c2330; }
  header { padding: 12px 20px; background: #1c2330; color: #fff; display: flex; gap: 16px; align-items: center; }
  header .agent { margin-left: auto; padding: 2px 10px; border-radius: 12px; background: #3b82f6; }
  main { max-width: 820px; margin: 0 auto; padding: 16px 20px 120px; }
  .msg { margin: 10px 0; padding: 10px 14px; border-radius: 10px; background: #fff; box-shadow: 0 1px 2px #0001; }
  .msg.user { background: #e8f0fe; }
  .who { font-size: 12px; color: #667; margin-bottom: 4px; }
  .text { white-space: pre-wrap; }
  .card { margin: 8px 0; padding: 8px 12px; border-left: 4px solid #10b981; background: #f0fdf4; font-size: 13px; }
  .card.error { border-color: #ef4444; background: #fef2f2; }
  .card.handoff { border-color: #a855f7; background: #faf5ff; }
  .switch { margin: 8px 0; font-size: 13px; color: #7c3aed; }
  .card pre { margin: 4px 0 0; white-space: pre-wrap; max-height: 160px; overflow: auto; }
  form { position: fixed; bottom: 0; left: 0; right: 0; padding: 12px 20px; background: #fff;
         border-top: 1px solid #ddd; display: flex; gap: 8px; }
  input#message { flex: 1; padding: 8px; font: inherit; }
  #error { color: #b91c1c; }
</style>
</head>
<body>
<header><strong>Cortex</strong><span>Customer <code id="customer">__CUSTOMER__</code></span>
<span class="agent" id="agent">customer_mgmt</span></header>
<main id="log"><p id="error"></p></main>
<form id="chat"><input id="message" autocomplete="off" placeholder="Message the customer agents"
aria-label="Message"><button id="send" type="submit">Send</button></form>
<script>
"use strict";
const CUSTOMER = __CUSTOMER_JSON__;
const URL_ = "/api/v1/customers/" + CUSTOMER + "/chat/stream";
const KEY = "cortex.agentKey";
const log = document.getElementById("log"), agentBadge = document.getElementById("agent");
const messages = [];
function key() {
  let k = sessionStorage.getItem(KEY);
  if (!k) { k = (window.prompt("Agent key (customer_mgmt or product_mgmt)") || "").trim();
            if (k) sessionStorage.setItem(KEY, k); }
  return k;
}
function el(tag, cls, text) { const e = document.createElement(tag); if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text; return e; }
function bubble(role, who) { const m = el("div", "msg " + role); m.appendChild(el("div", "who", who));
  log.appendChild(m); return m; }
function card(box, cls, title, body) { const c = el("div", "card " + cls); c.appendChild(el("strong", "", title));
  c.appendChild(el("pre", "", typeof body === "string" ? body : JSON.stringify(body, null, 2))); box.appendChild(c); }
async function send(text) {
  const k = key(); if (!k) return;
  messages.push({id: "u" + messages.length, role: "user", parts: [{type: "text", text: text}]});
  bubble("user", "you").appendChild(el("div", "text", text));
  let box = bubble("assistant", agentBadge.textContent), textEl = null;
  const assistant = {id: "a" + messages.length, role: "assistant", parts: [], metadata: {}};
  const inputs = {};
  const res = await fetch(URL_, {method: "POST", headers: {"Content-Type": "application/json",
    "Authorization": "Bearer " + k}, body: JSON.stringify({messages: messages})});
  if (!res.ok) { const body = await res.json().catch(() => ({}));
    if (res.status === 401) sessionStorage.removeItem(KEY);
    document.getElementById("error").textContent = (body.error && body.error.message) || res.statusText; return; }
  const reader = res.body.getReader(), decoder = new TextDecoder(); let buffer = "";
  for (;;) {
    const {done, value} = await reader.read(); if (done) break;
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf("\\n\\n")) >= 0) {
      const event = buffer.slice(0, cut); buffer = buffer.slice(cut + 2);
      if (!event.startsWith("data: ")) continue;
      const data = event.slice(6); if (data === "[DONE]") continue;
      const part = JSON.parse(data);
      switch (part.type) {
        case "data-agent":
          if (part.data.previous) { log.appendChild(el("div", "switch",
              "⇄ " + part.data.previous + " handed over to " + part.data.agent));
            box = bubble("assistant", part.data.agent); }
          agentBadge.textContent = part.data.agent; box.querySelector(".who").textContent = part.data.agent;
          textEl = null; break;
        case "text-start": textEl = el("div", "text", ""); box.appendChild(textEl); break;
        case "text-delta": if (!textEl) { textEl = el("div", "text", ""); box.appendChild(textEl); }
          textEl.textContent += part.delta; assistant.parts.push({type: "text", text: part.delta}); break;
        case "text-end": textEl = null; break;
        case "tool-input-available": inputs[part.toolCallId] = part; break;
        case "tool-output-available": {
          const name = (inputs[part.toolCallId] || {}).toolName || "tool";
          card(box, part.output && part.output.__handoff ? "handoff" : "tool", name, part.output); break; }
        case "tool-output-error": card(box, "error", ((inputs[part.toolCallId] || {}).toolName || "tool") + " failed",
          part.errorText); break;
        case "error": card(box, "error", "error", part.errorText); break;
        case "finish": if (part.messageMetadata) assistant.metadata = part.messageMetadata; break;
      }
    }
  }
  messages.push(assistant);
}
document.getElementById("chat").addEventListener("submit", (e) => {
  e.preventDefault(); const input = document.getElementById("message"); const text = input.value.trim();
  if (!text) return; input.value = ""; send(text).catch((err) => {
    document.getElementById("error").textContent = String(err); });
});
</script>
</body>
</html>
"""


def chat_page(customer_id: str) -> str:
    """The chat page for one customer (the id is a validated UUID; escaped all the same)."""
    return _TEMPLATE.replace("__CUSTOMER_JSON__", json.dumps(customer_id)).replace(
        "__CUSTOMER__", html.escape(customer_id)
    )
