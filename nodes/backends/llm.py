"""A small client for OpenAI-compatible chat completion servers (OpenAI, llama.cpp, Ollama, vLLM), over httpx.

``OpenAIChatClient.chat`` sends one chat completion (optionally with tools or a JSON schema);
``chat_json`` asks for a JSON object: ``response_format`` ``json_schema`` first, and when the server
refuses it with a 4xx, ``json_object`` and then a plain request (the refusal is remembered); the
answer must parse as a JSON object with the schema's required keys (and their basic JSON types), and an
invalid answer is repaired once by showing the model its error. Failures raise ``LLMError``.

Retries: timeouts, connection errors and 5xx answers are retried ``max_retries`` times with exponential
backoff (``backoff * 2**attempt`` seconds); 4xx answers never are. ``calls`` counts every HTTP request,
retries included; ``on_call(payload)`` runs before each request and may raise to refuse it (a budget).

Config keys (read by the nodes that build the client): ``llm: openai``, ``llm_base_url``, ``llm_model``,
``llm_api_key_env``, ``llm_timeout_seconds``, ``llm_max_retries``.

Limitations: no streaming; JSON validation covers required keys and top-level types only.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from folio.nodes.types import FolioError

JSON_MODES = ("json_schema", "json_object", "plain")
_FORMAT_REFUSALS = frozenset((400, 404, 415, 422, 501))
_FENCE = re.compile(r"^\s*```(?:json|JSON)?\s*\n?(?P<body>.*?)\n?\s*```\s*$", re.S)
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


class LLMError(FolioError):
    """A failed LLM call. ``status`` is the HTTP status when the server answered with an error."""

    def __init__(self, source: str, reason: str, status: int | None = None) -> None:
        super().__init__(source, reason)
        self.status = status


@dataclass(frozen=True)
class ToolCall:
    """One tool call requested by the model; ``arguments_json`` is the raw JSON text of its arguments."""

    id: str
    name: str
    arguments_json: str

    def arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ``LLMError`` when the model wrote invalid JSON."""
        try:
            value = json.loads(self.arguments_json or "{}")
        except json.JSONDecodeError as exc:
            raise LLMError(self.name, f"tool call arguments are not valid JSON ({exc.msg})") from None
        if not isinstance(value, dict):
            raise LLMError(self.name, "tool call arguments are not a JSON object")
        return value


@dataclass(frozen=True)
class ChatResult:
    """A chat completion: the message text, the requested tool calls and the raw response body."""

    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def parse_json_answer(content: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Parse a model's JSON answer (code fences allowed) and check it against ``schema``.

    Raises:
        ValueError: with a one-line reason the model can act on.
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced["body"].strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ValueError(f"the answer is not JSON ({exc.msg} at char {exc.pos})") from None
        try:
            value = json.loads(text[start : end + 1])
        except json.JSONDecodeError as inner:
            raise ValueError(f"the answer is not valid JSON ({inner.msg} at char {inner.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"the answer must be a JSON object, not {type(value).__name__}")
    if schema:
        check_schema(value, schema)
    return value


def check_schema(value: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check required keys and the declared JSON type of top-level properties; ``ValueError`` if not."""
    missing = [key for key in schema.get("required", ()) if key not in value]
    if missing:
        raise ValueError(f"missing required key(s): {', '.join(missing)}")
    for key, spec in (schema.get("properties") or {}).items():
        if key not in value or not isinstance(spec, dict) or "type" not in spec:
            continue
        names = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        allowed = tuple(t for name in names for t in _JSON_TYPES.get(name, (object,)))
        ok = isinstance(value[key], allowed) and not (
            isinstance(value[key], bool) and "boolean" not in names  # bool is an int in Python
        )
        if not ok:
            raise ValueError(f"key {key!r} must be of type {' or '.join(names)}")


def response_format_for(mode: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` request field for a JSON mode (``None`` for plain)."""
    if mode == "json_schema":
        name = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "answer"))[:64]
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def json_instruction(schema: dict[str, Any]) -> dict[str, str]:
    """A system message asking for one JSON object that follows ``schema``."""
    return {
        "role": "system",
        "content": "Reply with one JSON object only, no prose and no code fences, "
        "following this JSON schema: " + json.dumps(schema, separators=(",", ":")),
    }


class OpenAIChatClient:
    """Chat completions from an OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1``.
        model: the model name sent with every request.
        api_key_env: environment variable holding the API key (sent as a Bearer token when set).
        timeout: seconds to wait for each answer.
        max_retries: retries after a timeout, connection error or 5xx answer.
        backoff: first retry delay in seconds, doubled after each retry.
        on_call: called with the request payload before every HTTP request; may raise to refuse it.
        client: an ``httpx.Client`` to use instead of a new one (tests).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 30.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        on_call: Callable[[dict[str, Any]], None] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max(0, int(max_retries))
        self.backoff = backoff
        self.on_call = on_call
        self.calls = 0
        self._json_mode = 0  # index into JSON_MODES; advanced when the server refuses a response_format
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = client or httpx.Client(timeout=timeout, headers=headers)
        if client is not None:
            self._client.headers.update(headers)

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
    ) -> ChatResult:
        """One chat completion.

        Args:
            messages: OpenAI chat messages.
            json_schema: ask for a JSON answer following this schema (``response_format`` json_schema).
            tools: OpenAI tool definitions the model may call.
            temperature: sampling temperature.
            response_format: an explicit ``response_format`` (overrides ``json_schema``).
        """
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
        }
        if response_format is None and json_schema is not None:
            response_format = response_format_for("json_schema", json_schema)
        if response_format is not None:
            payload["response_format"] = response_format
        if tools:
            payload["tools"] = tools
        return _chat_result(self._post("/chat/completions", payload), self._url("/chat/completions"))

    def chat_json(self, messages: Sequence[dict[str, Any]], schema: dict[str, Any]) -> dict[str, Any]:
        """A JSON object answer that has ``schema``'s required keys; repaired once, else ``LLMError``."""
        result = self._json_chat(list(messages), schema)
        try:
            return parse_json_answer(result.content, schema)
        except ValueError as exc:
            error = str(exc)
        repair = [
            *messages,
            {"role": "assistant", "content": result.content},
            {
                "role": "user",
                "content": f"Your answer was invalid: {error}. "
                "Reply again with only the corrected JSON object.",
            },
        ]
        result = self._json_chat(repair, schema)
        try:
            return parse_json_answer(result.content, schema)
        except ValueError as exc:
            raise LLMError(
                self._url("/chat/completions"), f"invalid JSON answer after one repair: {exc}"
            ) from None

    def models(self) -> tuple[str, ...]:
        """The model ids the server lists at ``/models``."""
        body = self._send("GET", "/models", None)
        return tuple(str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict))

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- private ---------------------------------------------------------------------------------

    def _json_chat(self, messages: list[dict[str, Any]], schema: dict[str, Any]) -> ChatResult:
        """Ask for JSON with the best ``response_format`` the server accepts."""
        while True:
            mode = JSON_MODES[self._json_mode]
            request = messages if mode == "json_schema" else [json_instruction(schema), *messages]
            try:
                return self.chat(request, response_format=response_format_for(mode, schema))
            except LLMError as exc:
                last = self._json_mode == len(JSON_MODES) - 1
                if exc.status not in _FORMAT_REFUSALS or last:
                    raise
                self._json_mode += 1

    def _url(self, endpoint: str) -> str:
        return f"{self.base_url}{endpoint}"

    def _post(self, endpoint: str, payload: dict[str, Any]) -> dict[str, Any]:
        return self._send("POST", endpoint, payload)

    def _send(self, method: str, endpoint: str, payload: dict[str, Any] | None) -> dict[str, Any]:
        url = self._url(endpoint)
        retry_reason, status = "", None
        for attempt in range(self.max_retries + 1):
            if self.on_call is not None:
                self.on_call(payload or {})
            self.calls += 1
            status = None
            try:
                response = self._client.request(method, url, json=payload, timeout=self.timeout)
            except httpx.TimeoutException:
                retry_reason = f"no answer within {self.timeout:g} s (timeout)"
            except httpx.TransportError as exc:
                retry_reason = f"cannot reach the server ({str(exc) or type(exc).__name__})"
            else:
                status = response.status_code
                if response.status_code >= 500:
                    retry_reason = f"HTTP {response.status_code}: {_error_message(response)}"
                elif response.status_code >= 400:
                    raise LLMError(
                        url, f"HTTP {response.status_code}: {_error_message(response)}", response.status_code
                    )
                else:
                    try:
                        body = response.json()
                    except ValueError:
                        raise LLMError(url, "the server's answer is not JSON") from None
                    if not isinstance(body, dict):
                        raise LLMError(url, "the server's answer is not a JSON object")
                    return body
            if attempt < self.max_retries:
                time.sleep(self.backoff * 2**attempt)
        raise LLMError(url, f"{retry_reason} after {self.max_retries + 1} attempt(s)", status)


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return (
            response.text.strip().splitlines()[0][:200] if response.text.strip() else response.reason_phrase
        )
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:200]
        if isinstance(error, str):
            return error[:200]
    return response.reason_phrase


def _chat_result(body: dict[str, Any], url: str) -> ChatResult:
    try:
        message = body["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        raise LLMError(url, "the server's answer has no choices[0].message") from None
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            ToolCall(id=str(call.get("id", "")), name=str(function.get("name", "")), arguments_json=arguments)
        )
    return ChatResult(content=message.get("content") or "", tool_calls=tuple(calls), raw=body)
