"""Small real HTTP servers speaking the chat-completions protocol, for the chat engine's tests.

- `ChatStandIn`: answers `/v1/chat/completions` itself with a deterministic reply (words drawn
  from the request's hash, one logprobs token per word, `finish_reason` stop when the reply
  ends before max_tokens) and `/v1/models`. A stand-in for a hosted model in the unit tier.
- `MessagesStandIn`: answers Anthropic's `/v1/messages` itself (`messages_reply`), keeping
  every request's body: the Anthropic protocol's payload shape is checked against it.
- `FaultProxy`: forwards to an upstream server (a `vllm serve` or a stand-in) and answers a
  share of requests with 429 (Retry-After: 0), 500 or a dropped connection instead, by a fixed
  schedule. It counts requests by body hash: what reached the upstream, per distinct request.

Both run in a daemon thread of the test process and stop with `close()` (fixtures call it).
Every request's headers are kept (`seen_keys`), so a test can check which key was sent.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx  # here, not in the handler threads: a concurrent first import is not safe

# the hosted tests' suite (tests/data/hosted/suite.yaml)
SUITE = Path(__file__).parent / "data" / "hosted" / "suite.yaml"
WORDS = ["bonjour", " le", " monde", " est", " beau", " et", " grand", ".", " merci", " ami"]


def _digest(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def stand_in_reply(request: dict) -> dict:
    """The stand-in's answer: a reply that depends on the messages and seed only."""
    seed = _digest(json.dumps([request["messages"], request.get("seed")]).encode())
    length = 3 + int(seed[:4], 16) % 12
    limit = int(request.get("max_tokens") or 16)
    words = [WORDS[int(seed[i % 60 : i % 60 + 2], 16) % len(WORDS)] for i in range(length)]
    words = words[:limit]
    finish = "stop" if length <= limit else "length"
    last = str(request["messages"][-1]["content"])
    if "REFUSE" in last or "FILTER" in last:  # the provider declines: a refusal, a filter
        refusal = "I can't help with that." if "REFUSE" in last else None
        words = [] if refusal else words[:2]
        finish = "stop" if refusal else "content_filter"
    else:
        refusal = None
    content = [{"token": w, "logprob": -0.5, "bytes": list(w.encode())} for w in words]
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion",
        "created": 0,
        "model": request["model"],
        "system_fingerprint": "fp_standin",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None if refusal else "".join(words),
                    **({"refusal": refusal} if refusal else {}),
                },
                "finish_reason": finish,
                "logprobs": {"content": content} if request.get("logprobs") else None,
            }
        ],
        "usage": {
            "prompt_tokens": len(json.dumps(request["messages"])) // 4,
            "completion_tokens": len(words),
            "total_tokens": len(json.dumps(request["messages"])) // 4 + len(words),
        },
    }


class _Server:
    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                owner.on_get(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                with owner.lock:
                    owner.seen_keys.add(self.headers.get("Authorization", ""))
                    if "x-api-key" in self.headers:  # Anthropic's header of the 1.x SDKs
                        owner.seen_keys.add(self.headers["x-api-key"])
                owner.on_post(self, body)

        self.lock = threading.Lock()
        self.seen_keys: set[str] = set()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    @staticmethod
    def send_json(handler, status: int, data: dict, headers: dict | None = None) -> None:
        payload = json.dumps(data).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(payload)

    def on_get(self, handler) -> None:
        self.send_json(handler, 200, {"object": "list", "data": [{"id": "stand-in"}]})

    def on_post(self, handler, body: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class ChatStandIn(_Server):
    def __init__(self, status: int | None = None) -> None:
        self.requests: Counter[str] = Counter()
        self.status = status  # answer every request with this error status instead
        super().__init__()

    def on_post(self, handler, body: bytes) -> None:
        with self.lock:
            self.requests[_digest(body)] += 1
        if self.status is not None:
            self.send_json(handler, self.status, {"error": {"message": "no such model"}})
            return
        self.send_json(handler, 200, stand_in_reply(json.loads(body)))


def messages_reply(request: dict) -> dict:
    """The Messages stand-in's answer: words from the hash of the messages and system prompt;
    a continued prefill that ends in `]` (an inline aside) gets a blank line first, as a model
    writes one; `REFUSE` in the last message stops it as Anthropic's classifiers do."""
    seed = _digest(json.dumps([request.get("system"), request["messages"]]).encode())
    length = 3 + int(seed[:4], 16) % 12
    limit = int(request["max_tokens"])
    words = [WORDS[int(seed[i % 60 : i % 60 + 2], 16) % len(WORDS)] for i in range(length)]
    stop = "end_turn" if length <= limit else "max_tokens"
    words = words[:limit]
    last = request["messages"][-1]
    if last["role"] == "assistant" and last["content"].endswith("]"):
        words = ["\n\n", *words[: limit - 1]]
    if "REFUSE" in str(last["content"]):
        words, stop = words[:1], "refusal"
    if "STOP" in str(last["content"]) and request.get("stop_sequences"):
        stop = "stop_sequence"
    return {
        "id": "msg_standin",
        "type": "message",
        "role": "assistant",
        "model": request["model"],
        "content": [{"type": "text", "text": "".join(words)}],
        "stop_reason": stop,
        "stop_sequence": request["stop_sequences"][0] if stop == "stop_sequence" else None,
        "usage": {
            "input_tokens": len(json.dumps(request["messages"])) // 4,
            "cache_read_input_tokens": 3,
            "output_tokens": len(words),
        },
    }


class MessagesStandIn(_Server):
    def __init__(self, status: int | None = None, message: str = "model: claude-none") -> None:
        self.bodies: list[dict] = []
        self.paths: list[str] = []
        self.status, self.message = status, message  # answer every request with this error
        super().__init__()

    @property
    def root(self) -> str:
        """The base URL the anthropic SDK takes (it appends /v1/messages)."""
        return self.url.removesuffix("/v1")

    def on_post(self, handler, body: bytes) -> None:
        with self.lock:
            self.bodies.append(json.loads(body))
            self.paths.append(handler.path)
        if self.status is not None:
            error = {"type": "invalid_request_error", "message": self.message}
            self.send_json(handler, self.status, {"type": "error", "error": error})
            return
        self.send_json(handler, 200, messages_reply(json.loads(body)))


class FaultProxy(_Server):
    """Every `every`-th request gets a fault, cycling 429, 500, dropped connection."""

    def __init__(self, upstream: str, every: int = 3) -> None:
        self.upstream = upstream.rstrip("/")
        self.every = every
        self.received = 0
        self.faults: Counter[str] = Counter()
        self.forwarded: Counter[str] = Counter()  # body hash -> times it reached the upstream
        super().__init__()

    def on_get(self, handler) -> None:
        answer = httpx.get(self.upstream + handler.path.removeprefix("/v1"), timeout=30)
        self.send_json(handler, answer.status_code, answer.json())

    def on_post(self, handler, body: bytes) -> None:
        with self.lock:
            self.received += 1
            n = self.received
        if n % self.every == 0:
            kind = ("429", "500", "drop")[(n // self.every) % 3]
            with self.lock:
                self.faults[kind] += 1
            if kind == "429":
                self.send_json(handler, 429, {"error": {"message": "slow down"}},
                               {"Retry-After": "0"})  # fmt: skip
            elif kind == "500":
                self.send_json(handler, 500, {"error": {"message": "boom"}})
            else:  # close without a response: the client sees a dropped connection
                handler.close_connection = True
                handler.connection.shutdown(2)
            return
        with self.lock:
            self.forwarded[_digest(body)] += 1
        answer = httpx.post(
            self.upstream + handler.path.removeprefix("/v1"),
            content=body,
            headers={"Content-Type": "application/json"},
            timeout=600,
        )
        self.send_json(handler, answer.status_code, answer.json())
