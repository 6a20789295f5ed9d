"""The optional GPT-4o caption judge (``gen_match``), with upstream's prompt, settings and scoring.

Opt-in only: it runs when the user asks for it (``-o gpt_judge=on``) and ``OPENAI_API_KEY`` is set; the
key is read from the environment at call time and never stored, logged or put in a task. Upstream
(``caption_evaluation.py``) asks ``gpt-4o`` with temperature 0, ``max_tokens`` 5 and the top-5
logprobs; a reply starting with "yes" scores 1, with "no" 0, otherwise exp(logprob) of a "yes" among
the first token's top-5, else 0.1. Where upstream scores 0.5 after three failed calls, this judge
raises: the sample's ``gen_match`` is then missing, with the reason, and the run is partial.
``gpt-4o`` is an alias that OpenAI moves; the snapshot that answered is recorded with each score.
"""

from __future__ import annotations

import json
import math
import os
import time
import urllib.error
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pinbench.core.provenance import redact

MODEL = "gpt-4o"
TEMPERATURE = 0
MAX_TOKENS = 5
TOP_LOGPROBS = 5
ATTEMPTS = 3
RETRY_DELAY_S = 2.0
NO_YES_TOKEN_SCORE = 0.1
KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"
TIMEOUT_S = 60

Transport = Callable[[str, Mapping[str, Any], str], Mapping[str, Any]]


class JudgeError(RuntimeError):
    """The judge gave no usable answer (every attempt failed); the message never holds the key."""


def prompt(reference: str, candidate: str) -> str:
    """Upstream's judge prompt, verbatim in structure: both captions quoted, then a Yes/No question."""
    return (f"Reference caption: '{reference}'\nCandidate caption: '{candidate}'\n\n"
            "Does the candidate caption match the reference caption? Answer Yes or No.")


def request_body(reference: str, candidate: str) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": prompt(reference, candidate)}],
            "temperature": TEMPERATURE, "max_tokens": MAX_TOKENS, "logprobs": True,
            "top_logprobs": TOP_LOGPROBS}


def score_reply(response: Mapping[str, Any]) -> float:
    """gen_match of one chat-completions response, by upstream's rules."""
    choice = response["choices"][0]
    content = (choice["message"].get("content") or "").strip().lower()
    if content.startswith("yes"):
        return 1.0
    if content.startswith("no"):
        return 0.0
    first = ((choice.get("logprobs") or {}).get("content") or [{}])[0]
    for candidate in first.get("top_logprobs") or []:
        if candidate["token"].strip().lower() == "yes":
            return math.exp(candidate["logprob"])
    return NO_YES_TOKEN_SCORE


def http_transport(url: str, body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """POST the body as JSON with the bearer key; the parsed JSON reply."""
    import urllib.request  # http.client, ssl and email: 12 ms that every run without the judge would import

    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
        return json.loads(response.read())


@dataclass
class CaptionJudge:
    """Calls the judge for one (reference, caption) pair; ``describe()`` goes into every task and record."""

    base_url: str = DEFAULT_BASE_URL
    transport: Transport = http_transport
    retry_delay_s: float = RETRY_DELAY_S

    @classmethod
    def from_env(cls) -> CaptionJudge:
        """A judge for the configured endpoint; JudgeError when no key is set (nothing runs silently)."""
        if not os.environ.get(KEY_ENV):
            raise JudgeError(f"the GPT judge needs {KEY_ENV} in the environment")
        return cls(base_url=os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL)

    def describe(self) -> dict[str, Any]:
        return {"model": MODEL, "temperature": TEMPERATURE, "max_tokens": MAX_TOKENS,
                "top_logprobs": TOP_LOGPROBS, "attempts": ATTEMPTS, "endpoint": self.base_url}

    def __call__(self, reference: str, candidate: str) -> dict[str, Any]:
        """{"gen_match": float, "judge_model": the snapshot that answered, "judge_reply": its text}."""
        key = os.environ.get(KEY_ENV)
        if not key:
            raise JudgeError(f"{KEY_ENV} is not set")
        url = self.base_url.rstrip("/") + "/chat/completions"
        failures = []
        for attempt in range(ATTEMPTS):
            try:
                response = self.transport(url, request_body(reference, candidate), key)
                value = score_reply(response)
            except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                failures.append(redact(f"{type(exc).__name__}: {exc}").replace(key, "***"))
                if attempt < ATTEMPTS - 1:
                    time.sleep(self.retry_delay_s)
                continue
            return {"gen_match": value, "judge_model": response.get("model"),
                    "judge_reply": response["choices"][0]["message"].get("content")}
        raise JudgeError(f"no judge answer after {ATTEMPTS} attempts ({'; '.join(failures)}); "
                         "upstream would score 0.5 here, this recipe leaves gen_match missing")
