"""Fakes for rl_verifiers' tests (standard library only, 127.0.0.1 only): an OpenAI-compatible
chat endpoint that returns token ids and logprobs when asked (as rl's trainer does), and a
run-api that takes one environment's groups. Each runs in a thread of the test's process and
keeps what it was asked, for the test to read."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional


class _Server:
    def __init__(self, handler_class):
        self.lock = threading.Lock()
        self.requests: List[Dict[str, Any]] = []
        owner = self

        class Handler(handler_class):
            server_owner = owner

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


class _JsonHandler(BaseHTTPRequestHandler):
    def body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else None

    def answer(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def reply_text(prompt_text: str, index: int) -> str:
    """The reversed text with the first `index % 4` characters wrong: answers of a group differ."""
    reversed_text = prompt_text[::-1]
    wrong = index % 4
    return "x" * min(wrong, len(reversed_text)) + reversed_text[wrong:]


def token_ids(text: str) -> List[int]:
    return list(text.encode("utf-8"))


class FakeChat(_Server):
    """POST /v1/chat/completions. The answer to the last user message is `reply_text` of it
    (the request's number in this server choosing how wrong it is); with `return_token_ids`
    the prompt's and completion's ids (UTF-8 bytes) come back, with `logprobs` -0.5 each.
    `status` (say 500) makes every answer that error instead."""

    def __init__(self, status: int = 200):
        self.status = status
        self.count = 0
        super().__init__(_ChatHandler)


class _ChatHandler(_JsonHandler):
    def do_POST(self):
        owner: FakeChat = self.server_owner
        body = self.body() or {}
        with owner.lock:
            index = owner.count
            owner.count += 1
            owner.requests.append({"path": self.path, "body": body, "authorization": self.headers.get("Authorization")})
        if not self.path.endswith("/chat/completions"):
            return self.answer(404, {"error": {"message": f"no route {self.path}"}})
        if owner.status != 200:
            return self.answer(owner.status, {"error": {"message": "the fake fails", "type": "server_error"}})
        messages = body.get("messages") or []
        users = [m for m in messages if m.get("role") == "user"]
        prompt_text = users[-1]["content"] if users else ""
        text = reply_text(prompt_text, index)
        completion_ids = token_ids(text)
        choice: Dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "stop",
            "logprobs": None,
        }
        payload: Dict[str, Any] = {
            "id": f"chatcmpl-{index}",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model"),
            "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": len(completion_ids), "total_tokens": 1 + len(completion_ids)},
        }
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [{"token": f"token_id:{t}", "logprob": -0.5, "bytes": None, "top_logprobs": []} for t in completion_ids]
            }
        if body.get("return_token_ids"):
            payload["prompt_token_ids"] = token_ids("".join(str(m.get("content")) for m in messages))
            choice["token_ids"] = completion_ids
        self.answer(200, payload)


class FakeRunApi(_Server):
    """run-api for one environment: `/register-env` says "wait for trainer to start" `waits`
    times, then registers; each group sent (`/scored_data`) is kept, and every
    `groups_per_step` of them make a step (`current_step`)."""

    def __init__(
        self,
        total_steps: int,
        groups_per_step: int = 1,
        waits: int = 1,
        max_token_len: int = 256,
        batch_size: Optional[int] = None,
        holds_groups: bool = False,
    ):
        self.total_steps = total_steps
        self.groups_per_step = groups_per_step
        # The trainer's batch (sequences), as `/info` tells it.
        self.batch_size = groups_per_step if batch_size is None else batch_size
        # A trainer that takes no batch: every group sent waits in the queue, at step 0.
        self.holds_groups = holds_groups
        self.waits = waits
        self.max_token_len = max_token_len
        self.groups: List[Dict[str, Any]] = []
        self.registrations: List[Dict[str, Any]] = []
        super().__init__(_RunApiHandler)

    def step(self) -> int:
        return len(self.groups) // self.groups_per_step


class _RunApiHandler(_JsonHandler):
    def do_POST(self):
        owner: FakeRunApi = self.server_owner
        body = self.body()
        with owner.lock:
            owner.requests.append({"method": "POST", "path": self.path, "body": body})
            if self.path == "/register-env":
                owner.registrations.append(body)
                if owner.waits > 0:
                    owner.waits -= 1
                    return self.answer(200, {"status": "wait for trainer to start"})
                return self.answer(
                    200,
                    {"status": "success", "env_id": 0, "wandb_name": "fake_0", "checkpoint_dir": "",
                     "starting_step": 0, "checkpoint_interval": 0, "num_steps": owner.total_steps},
                )
            if self.path == "/scored_data":
                owner.groups.append(body)
                return self.answer(200, {"status": "received"})
        self.answer(404, {"detail": "Not Found"})

    def do_GET(self):
        owner: FakeRunApi = self.server_owner
        body = self.body()
        with owner.lock:
            owner.requests.append({"method": "GET", "path": self.path, "body": body})
            if self.path == "/info":
                return self.answer(200, {"batch_size": owner.batch_size, "max_token_len": owner.max_token_len})
            if self.path in ("/status-env", "/status"):
                if owner.holds_groups:
                    return self.answer(200, {"current_step": 0, "queue_size": len(owner.groups)})
                return self.answer(200, {"current_step": min(owner.step(), owner.total_steps), "queue_size": 0})
        self.answer(404, {"detail": "Not Found"})


def run_config(path: str, run_api: str, chat: str, **env: Any) -> None:
    """A run YAML as rl writes one (JSON is YAML)."""
    document = {
        "env": {
            "group_size": 4,
            "max_token_length": 256,
            "total_steps": 2,
            "batch_size": 4,
            "max_num_workers": 2,
            "max_batches_offpolicy": 1,
            "rollout_server_url": run_api,
            "wandb_name": "reverse-test",
            "steps_per_eval": 1000,
            "use_wandb": False,
            **env,
        },
        "openai": [{"base_url": chat + "/v1", "model_name": "tiny", "api_key": "x", "server_type": "sglang"}],
    }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(document, f)


def read_lines(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def find(requests: List[Dict[str, Any]], path: str) -> Optional[Dict[str, Any]]:
    return next((request for request in requests if request.get("path") == path), None)
