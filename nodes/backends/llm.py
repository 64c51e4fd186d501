"""A small client for OpenAI-compatible chat completion servers (OpenAI, llama.cpp, Ollama, vLLM), over httpx.

``OpenAIChatClient.chat`` sends one chat completion (optionally with tools or a JSON schema);
``chat_json`` asks for a JSON object: ``response_format`` ``json_schema`` first; when the server refuses
it (any HTTP error whose body names the response format: llama-cpp-python's server answers 500),
``json_object`` carrying the schema (``{"type": "json_object", "schema": ...}``: llama-cpp-python turns
it into a grammar, so even a 135M model writes the schema's keys; a server that ignores the extra key
gets plain ``json_object``), then ``json_object``, then a plain request whose JSON is extracted from
the text. The refusal is remembered per server and model for the whole process (``JSON_MODE_MEMORY``).
The answer must parse as a JSON object with the schema's required keys (and their basic JSON types);
an invalid answer is repaired once by showing the model its error. Failures raise ``LLMError`` (a
``FolioError``), so every caller degrades with a note.

Every request bounds the reply (``max_tokens``; a JSON answer at most ``JSON_MAX_TOKENS``, since Folio's
JSON answers are a route, a few book names or phrases, and a small model asked for JSON without a
grammar can ramble to the bound); a request with tools sets ``tool_choice: auto``
(llama.cpp's ``chatml-function-calling`` format ignores the tools without it).

Deadlines: ``timeout`` is the overall deadline of one HTTP request (connect, send and every read
together, not a per-read timeout: a server that trickles bytes is abandoned at the deadline);
``deadline`` (per call, or the client's, and always the running ask's ``ask_deadline_seconds``, read from
``backends.deadlines.active_deadline``) bounds a whole call, retries and format fallbacks included:
seconds, or an object with ``remaining() -> float``.

Retries: only what is transient (timeouts, connection errors, 429 after its ``Retry-After``, 502, 503,
504), ``max_retries`` times with exponential backoff (``backoff * 2**attempt`` seconds); any other
status fails at once. ``calls`` counts every HTTP request; ``on_call(payload)`` runs once per logical
request (retries and format fallbacks are not counted again) and may raise to refuse it (a budget).

Replies are validated against the shape the code reads: ``choices[0].message`` an object, ``content`` a
string (or text parts) or null, ``tool_calls`` a list of ``{id, function: {name, arguments}}``;
anything else is an ``LLMError`` naming the field.

Config keys (read by the nodes that build the client): ``llm: openai``, ``llm_base_url``, ``llm_model``,
``llm_api_key_env``, ``llm_timeout_seconds``, ``llm_max_retries``, ``llm_max_tokens``.

Limitations: no streaming of tokens to the caller; JSON validation covers required keys and top-level
types only; a request abandoned at its deadline finishes (or times out) in a daemon thread.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from folio.nodes.backends.deadlines import active_deadline
from folio.nodes.core.types import FolioError

JSON_MODES = ("json_schema", "json_object_schema", "json_object", "plain")
TRANSIENT_STATUSES = frozenset((429, 502, 503, 504))
MAX_REPLY_BYTES = 8 * 1024 * 1024
MAX_RETRY_AFTER = 30.0
JSON_MAX_TOKENS = 256
_FORMAT_WORDS = re.compile(r"response_format|json_schema|json_object|response format", re.I)
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

# (base URL, model) -> index into JSON_MODES: the best response format the server accepted or did not
# refuse yet, learned once per process.
JSON_MODE_MEMORY: dict[tuple[str, str], int] = {}
_MEMORY_LOCK = threading.Lock()


class LLMError(FolioError):
    """A failed LLM call. ``status`` is the HTTP status when the server answered with an error."""

    def __init__(self, source: str, reason: str, status: int | None = None) -> None:
        super().__init__(source, reason)
        self.status = status


class FormatRefused(LLMError):
    """The server refused the request's ``response_format`` (the client falls back, never the user)."""


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

    @property
    def truncated(self) -> bool:
        """Whether the server stopped the reply at its length bound (``finish_reason: length``)."""
        choices = self.raw.get("choices")
        first = choices[0] if isinstance(choices, list) and choices else {}
        return isinstance(first, dict) and first.get("finish_reason") == "length"


def parse_json_answer(content: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """Parse a model's JSON answer (code fences and surrounding prose allowed) and check it against
    ``schema``.

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
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema}
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


def is_format_refusal(status: int, message: str) -> bool:
    """Whether an HTTP error refuses the request's response format: any error status whose message names
    it (llama.cpp answers 500 with a validation error, OpenAI 400, others 422)."""
    return status >= 400 and bool(_FORMAT_WORDS.search(message))


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (delta seconds only; an HTTP date or garbage: None)."""
    try:
        seconds = float((value or "").strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def seconds_left(deadline: Any) -> float | None:
    """Seconds left of a deadline: ``None`` (no deadline), a number of seconds, or an object with
    ``remaining()``."""
    if deadline is None:
        return None
    if hasattr(deadline, "remaining"):
        return float(deadline.remaining())
    return float(deadline)


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _content_text(content: Any, url: str) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        if len(texts) == len(content) and all(isinstance(t, str) for t in texts):
            return "".join(t for t in texts if isinstance(t, str))
    raise LLMError(url, f"malformed reply: choices[0].message.content is {_kind(content)}, not a string")


def _tool_call(call: Any, i: int, url: str) -> ToolCall:
    where = f"choices[0].message.tool_calls[{i}]"
    if not isinstance(call, dict):
        raise LLMError(url, f"malformed reply: {where} is {_kind(call)}, not an object")
    function = call.get("function")
    if not isinstance(function, dict):
        raise LLMError(url, f"malformed reply: {where}.function is {_kind(function)}, not an object")
    name, arguments = function.get("name"), function.get("arguments", "")
    if not isinstance(name, str):
        raise LLMError(url, f"malformed reply: {where}.function.name is {_kind(name)}, not a string")
    if isinstance(arguments, dict):
        arguments = json.dumps(arguments)
    elif arguments is None:
        arguments = ""
    elif not isinstance(arguments, str):
        raise LLMError(url, f"malformed reply: {where}.function.arguments is {_kind(arguments)}")
    return ToolCall(id=str(call.get("id") or f"call_{i}"), name=name, arguments_json=arguments)


def chat_result(body: Any, url: str) -> ChatResult:
    """The ``ChatResult`` of a chat completion body, validated; ``LLMError`` naming the malformed field."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError(url, "malformed reply: no choices[0] object")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise LLMError(url, f"malformed reply: choices[0].message is {_kind(message)}, not an object")
    content = _content_text(message.get("content"), url)
    raw_calls = message.get("tool_calls")
    if raw_calls is None:
        raw_calls = []
    if not isinstance(raw_calls, list):
        kind = _kind(raw_calls)
        raise LLMError(url, f"malformed reply: choices[0].message.tool_calls is {kind}, not a list")
    calls = tuple(_tool_call(call, i, url) for i, call in enumerate(raw_calls))
    return ChatResult(content=content, tool_calls=calls, raw=body)


class _Overdue(Exception):
    """One HTTP request ran past its overall deadline."""


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes


def _bounded_request(
    client: httpx.Client, method: str, url: str, payload: dict[str, Any] | None, seconds: float
) -> _Reply:
    """One HTTP request that returns (or raises ``_Overdue``) within ``seconds`` overall, however slowly
    the server sends. It runs in a daemon thread, so an abandoned request never keeps the process alive."""
    box: dict[str, Any] = {}
    done, stop = threading.Event(), threading.Event()

    def run() -> None:
        try:
            with client.stream(method, url, json=payload, timeout=httpx.Timeout(seconds)) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if stop.is_set():
                        return
                    if len(data) > MAX_REPLY_BYTES:
                        raise LLMError(url, f"the reply is larger than {MAX_REPLY_BYTES} bytes")
                box["reply"] = _Reply(response.status_code, response.headers, bytes(data))
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="folio-llm-request", daemon=True).start()
    if not done.wait(seconds):
        stop.set()
        raise _Overdue
    if "error" in box:
        raise box["error"]
    return box["reply"]


def _error_message(reply: _Reply) -> str:
    text = reply.body.decode("utf-8", "replace").strip()
    try:
        body = json.loads(text)
    except ValueError:
        return text.splitlines()[0][:300] if text else f"status {reply.status}"
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict) and error.get("message"):
            return " ".join(str(error["message"]).split())[:300]
        if isinstance(error, str | list):
            return " ".join(str(error).split())[:300]
    return " ".join(text.split())[:300]


class OpenAIChatClient:
    """Chat completions from an OpenAI-compatible server.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:11434/v1``.
        model: the model name sent with every request.
        api_key_env: environment variable holding the API key (sent as a Bearer token when set).
        timeout: overall seconds of one HTTP request (connect and every read together).
        max_retries: retries after a transient failure (timeout, connection error, 429, 502, 503, 504).
        backoff: first retry delay in seconds, doubled after each retry.
        on_call: called with the request payload once per logical request; may raise to refuse it.
        client: an ``httpx.Client`` to use instead of a new one (tests).
        max_tokens: the bound on every reply's length (``max_tokens`` of each request).
        deadline: bounds every call of this client, retries included (seconds, or ``remaining()``).
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
        max_tokens: int = 512,
        deadline: Any = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.backoff = backoff
        self.on_call = on_call
        self.max_tokens = max(1, int(max_tokens))
        self.deadline = deadline
        self.calls = 0
        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(api_key_env, "") if api_key_env else ""
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = client or httpx.Client(timeout=timeout, headers=headers)
        if client is not None:
            self._client.headers.update(headers)

    @property
    def json_mode(self) -> str:
        """The response format this process uses with this server and model (see ``JSON_MODES``)."""
        with _MEMORY_LOCK:
            return JSON_MODES[JSON_MODE_MEMORY.get((self.base_url, self.model), 0)]

    def chat(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        json_schema: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        temperature: float = 0.0,
        response_format: dict[str, Any] | None = None,
        max_tokens: int | None = None,
        deadline: Any = None,
        tool_choice: str | dict[str, Any] = "auto",
    ) -> ChatResult:
        """One chat completion (one call of ``on_call``, whatever the retries).

        Args:
            messages: OpenAI chat messages.
            json_schema: ask for a JSON answer following this schema (``response_format`` json_schema).
            tools: OpenAI tool definitions the model may call.
            temperature: sampling temperature.
            response_format: an explicit ``response_format`` (overrides ``json_schema``).
            max_tokens: this reply's bound (default: the client's).
            deadline: overall bound of this call (default: the client's ``deadline``).
            tool_choice: with ``tools``: "auto" (the model decides), or a named function to call.
        """
        payload = self._payload(messages, temperature, max_tokens, tools)
        if tools:
            payload["tool_choice"] = tool_choice
        if response_format is None and json_schema is not None:
            response_format = response_format_for("json_schema", json_schema)
        if response_format is not None:
            payload["response_format"] = response_format
        self._charge(payload)
        return chat_result(self._post(payload, self._end(deadline)), self._url("/chat/completions"))

    def chat_json(
        self,
        messages: Sequence[dict[str, Any]],
        schema: dict[str, Any],
        *,
        max_tokens: int | None = None,
        deadline: Any = None,
    ) -> dict[str, Any]:
        """A JSON object answer that has ``schema``'s required keys; repaired once, else ``LLMError``.
        ``max_tokens`` defaults to the client's bound, at most ``JSON_MAX_TOKENS``."""
        max_tokens = max_tokens or min(self.max_tokens, JSON_MAX_TOKENS)
        end = self._end(deadline)
        result = self._json_chat(list(messages), schema, max_tokens, end)
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
        result = self._json_chat(repair, schema, max_tokens, end)
        try:
            return parse_json_answer(result.content, schema)
        except ValueError as exc:
            raise LLMError(
                self._url("/chat/completions"), f"invalid JSON answer after one repair: {exc}"
            ) from None

    def models(self) -> tuple[str, ...]:
        """The model ids the server lists at ``/models``."""
        body = self._send("GET", "/models", None, self._end(None))
        data = body.get("data")
        return tuple(str(m.get("id")) for m in data if isinstance(m, dict)) if isinstance(data, list) else ()

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def __enter__(self) -> OpenAIChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- private ---------------------------------------------------------------------------------

    def _payload(
        self,
        messages: Sequence[dict[str, Any]],
        temperature: float,
        max_tokens: int | None,
        tools: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": list(messages),
            "temperature": temperature,
            "max_tokens": int(max_tokens or self.max_tokens),
        }
        if tools:
            payload["tools"] = tools
            # OpenAI's default, spelled out: llama.cpp's chatml-function-calling format only offers the
            # tools when tool_choice is set (without it the model answers in prose)
            payload["tool_choice"] = "auto"
        return payload

    def _charge(self, payload: dict[str, Any]) -> None:
        if self.on_call is not None:
            self.on_call(payload)

    def _end(self, deadline: Any) -> float | None:
        """The monotonic time by which a call must be over: the nearer of the call's (or the client's)
        deadline and the running ask's (``ask_deadline_seconds``); None: only the per-request timeout."""
        own = seconds_left(deadline if deadline is not None else self.deadline)
        ask = seconds_left(active_deadline())
        left = [s for s in (own, ask) if s is not None]
        return time.monotonic() + min(left) if left else None

    def _json_chat(
        self,
        messages: list[dict[str, Any]],
        schema: dict[str, Any],
        max_tokens: int | None,
        end: float | None,
    ) -> ChatResult:
        """Ask for JSON with the best ``response_format`` the server accepts (one ``on_call``)."""
        key = (self.base_url, self.model)
        charged = False
        while True:
            with _MEMORY_LOCK:
                index = JSON_MODE_MEMORY.get(key, 0)
            mode = JSON_MODES[index]
            request = messages if mode == "json_schema" else [json_instruction(schema), *messages]
            payload = self._payload(request, 0.0, max_tokens)
            response_format = response_format_for(mode, schema)
            if response_format is not None:
                payload["response_format"] = response_format
            if not charged:
                self._charge(payload)
                charged = True
            try:
                return chat_result(self._post(payload, end), self._url("/chat/completions"))
            except FormatRefused:
                with _MEMORY_LOCK:
                    JSON_MODE_MEMORY[key] = max(JSON_MODE_MEMORY.get(key, 0), index + 1)

    def _url(self, endpoint: str) -> str:
        return f"{self.base_url}{endpoint}"

    def _post(self, payload: dict[str, Any], end: float | None) -> dict[str, Any]:
        return self._send("POST", "/chat/completions", payload, end)

    def _send(
        self, method: str, endpoint: str, payload: dict[str, Any] | None, end: float | None
    ) -> dict[str, Any]:
        url = self._url(endpoint)
        reason, status = "", None
        attempts = 0
        for attempt in range(self.max_retries + 1):
            budget = self.timeout if end is None else min(self.timeout, end - time.monotonic())
            if budget <= 0:
                reason = reason or "no time left before the deadline"
                break
            attempts += 1
            self.calls += 1
            status, wait = None, self.backoff * 2**attempt
            try:
                reply = _bounded_request(self._client, method, url, payload, budget)
            except (_Overdue, httpx.TimeoutException):
                reason = f"no complete answer within {budget:.3g} s (timeout)"
            except httpx.TransportError as exc:
                reason = f"cannot reach the server ({str(exc) or type(exc).__name__})"
            else:
                status = reply.status
                if status < 400:
                    return self._json_body(reply, url)
                message = _error_message(reply)
                if payload and "response_format" in payload and is_format_refusal(status, message):
                    raise FormatRefused(url, f"response format refused: HTTP {status}: {message}", status)
                reason = f"HTTP {status}: {message}"
                if status not in TRANSIENT_STATUSES:
                    raise LLMError(url, reason, status)
                after = retry_after_seconds(reply.headers.get("retry-after")) if status == 429 else None
                if after is not None:
                    if after > MAX_RETRY_AFTER or (end is not None and time.monotonic() + after >= end):
                        break
                    wait = after
            if attempt < self.max_retries:
                if end is not None and time.monotonic() + wait >= end:
                    break
                time.sleep(wait)
        raise LLMError(url, f"{reason} after {attempts} attempt(s)", status)

    @staticmethod
    def _json_body(reply: _Reply, url: str) -> dict[str, Any]:
        try:
            body = json.loads(reply.body.decode("utf-8", "replace"))
        except ValueError:
            raise LLMError(url, "the server's answer is not JSON") from None
        if not isinstance(body, dict):
            raise LLMError(url, "the server's answer is not a JSON object")
        return body
