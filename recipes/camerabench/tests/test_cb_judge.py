"""The opt-in GPT judge: upstream's request and scoring rules, no silent 0.5, the key never leaks.

The real HTTP transport talks to a local server that stands in for the chat-completions endpoint.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from pinbench_recipes.camerabench import judge as judge_module
from pinbench_recipes.camerabench.judge import CaptionJudge, JudgeError, request_body, score_reply

KEY = "sk-test-0123456789abcdef"


def reply(content: str | None, top: list[tuple[str, float]] | None = None, model: str = "gpt-4o-2024-08-06") -> dict:
    logprobs = {"content": [{"token": "x", "logprob": -1.0,
                             "top_logprobs": [{"token": t, "logprob": lp} for t, lp in (top or [])]}]}
    return {"model": model, "choices": [{"message": {"role": "assistant", "content": content}, "logprobs": logprobs}]}


def test_request_matches_upstream_settings() -> None:
    body = request_body("The camera pans left.", "Pan left.")
    assert body["model"] == "gpt-4o" and body["temperature"] == 0 and body["max_tokens"] == 5
    assert body["logprobs"] is True and body["top_logprobs"] == 5
    assert body["messages"] == [{"role": "user", "content": (
        "Reference caption: 'The camera pans left.'\nCandidate caption: 'Pan left.'\n\n"
        "Does the candidate caption match the reference caption? Answer Yes or No.")}]


@pytest.mark.parametrize(("response", "expected"), [
    (reply(" Yes."), 1.0),
    (reply("yes, it does"), 1.0),
    (reply("No"), 0.0),
    (reply("Maybe", [("No", -0.1), (" yes", math.log(0.3))]), 0.3),
    (reply("Maybe", [("No", -0.1)]), 0.1),
    (reply(None, [("Yes", math.log(0.8))]), 0.8),
])
def test_scoring_rules(response: dict, expected: float) -> None:
    assert score_reply(response) == pytest.approx(expected)


class _Endpoint(BaseHTTPRequestHandler):
    replies: list[tuple[int, dict]] = []
    seen: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers["Content-Length"])
        type(self).seen.append({"path": self.path, "auth": self.headers["Authorization"],
                                "body": json.loads(self.rfile.read(length))})
        status, body = type(self).replies.pop(0)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[_Endpoint]]:
    _Endpoint.replies, _Endpoint.seen = [], []
    server = HTTPServer(("127.0.0.1", 0), _Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{server.server_port}/v1")
    yield _Endpoint
    server.shutdown()


def test_real_transport_posts_with_the_bearer_key(endpoint) -> None:
    endpoint.replies = [(200, reply("Yes"))]
    judge = CaptionJudge.from_env()
    out = judge("ref", "cand")
    assert out == {"gen_match": 1.0, "judge_model": "gpt-4o-2024-08-06", "judge_reply": "Yes"}
    assert endpoint.seen[0]["path"] == "/v1/chat/completions"
    assert endpoint.seen[0]["auth"] == f"Bearer {KEY}"
    assert endpoint.seen[0]["body"] == request_body("ref", "cand")
    assert KEY not in json.dumps(judge.describe())


def test_retries_then_answers(endpoint) -> None:
    endpoint.replies = [(500, {"error": "overloaded"}), (200, reply("No"))]
    judge = CaptionJudge.from_env()
    judge.retry_delay_s = 0.0
    assert judge("ref", "cand")["gen_match"] == 0.0
    assert len(endpoint.seen) == 2


def test_three_failures_raise_instead_of_scoring_half(endpoint) -> None:
    endpoint.replies = [(401, {"error": f"bad key {KEY}"})] * 2 + [(200, {"unexpected": True})]
    judge = CaptionJudge.from_env()
    judge.retry_delay_s = 0.0
    with pytest.raises(JudgeError, match="no judge answer after 3 attempts") as info:
        judge("ref", "cand")
    assert KEY not in str(info.value)
    assert "0.5" in str(info.value)  # says what upstream would have done instead


def test_no_key_no_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(JudgeError, match="needs OPENAI_API_KEY"):
        CaptionJudge.from_env()
    judge = CaptionJudge(transport=lambda *a: reply("Yes"))
    with pytest.raises(JudgeError, match="not set"):
        judge("ref", "cand")
    assert judge_module.DEFAULT_BASE_URL == "https://api.openai.com/v1"
