"""OpenAIChatClient against the scripted OpenAI-compatible server: answers, retries, JSON modes, repair."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from folio.nodes.backends.llm import (
    JSON_MODE_MEMORY,
    LLMError,
    OpenAIChatClient,
    chat_result,
    check_schema,
    is_format_refusal,
    parse_json_answer,
    retry_after_seconds,
)
from folio.nodes.core.types import FolioError
from tests.servers import Reply, ScriptedLLMServer, dead_url

SCHEMA: dict[str, Any] = {
    "title": "book ranking",
    "type": "object",
    "properties": {"books": {"type": "array"}, "reason": {"type": "string"}},
    "required": ["books"],
}
ASK = [{"role": "user", "content": "Which books?"}]


@pytest.fixture
def llm() -> Iterator[ScriptedLLMServer]:
    JSON_MODE_MEMORY.clear()
    with ScriptedLLMServer() as server:
        yield server
    JSON_MODE_MEMORY.clear()


def client(server: ScriptedLLMServer, **kwargs: Any) -> OpenAIChatClient:
    kwargs.setdefault("backoff", 0.01)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIChatClient(server.url, "test-model", api_key_env="FOLIO_TEST_LLM_KEY", **kwargs)


def test_chat_returns_the_answer_and_sends_model_messages_and_temperature(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.answer("Hello there"))
    result = client(llm).chat(ASK, temperature=0.3)
    assert result.content == "Hello there"
    assert result.tool_calls == ()
    assert result.raw["choices"][0]["finish_reason"] == "stop"
    sent = llm.requests[0]
    assert (sent["model"], sent["messages"], sent["temperature"]) == ("test-model", ASK, 0.3)
    assert "response_format" not in sent and "tools" not in sent


def test_api_key_comes_from_the_named_environment_variable(
    llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOLIO_TEST_LLM_KEY", "sk-test-123")
    llm.push("ok")
    client(llm).chat(ASK)
    assert llm.headers[0]["authorization"] == "Bearer sk-test-123"


def test_no_authorization_header_without_a_key(
    llm: ScriptedLLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FOLIO_TEST_LLM_KEY", raising=False)
    llm.push("ok")
    client(llm).chat(ASK)
    assert "authorization" not in llm.headers[0]


def test_tool_calls_are_returned_with_parsed_arguments(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.tools(("kiwix_search", {"book": "wp", "query": "moon"}), ("broken", "{not json")))
    tools = [{"type": "function", "function": {"name": "kiwix_search", "parameters": {"type": "object"}}}]
    result = client(llm).chat(ASK, tools=tools)
    assert [c.name for c in result.tool_calls] == ["kiwix_search", "broken"]
    assert result.tool_calls[0].arguments() == {"book": "wp", "query": "moon"}
    with pytest.raises(LLMError, match="not valid JSON"):
        result.tool_calls[1].arguments()
    assert llm.requests[0]["tools"] == tools


def test_a_503_is_retried_and_then_succeeds(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(503), Reply.answer("recovered"))
    chat = client(llm, max_retries=2)
    assert chat.chat(ASK).content == "recovered"
    assert chat.calls == 2
    assert len(llm.requests) == 2


def test_transient_answers_give_up_after_max_retries(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(503), Reply.fail(502), Reply.fail(504), Reply.answer("never reached"))
    chat = client(llm, max_retries=2)
    with pytest.raises(LLMError, match="HTTP 504") as info:
        chat.chat(ASK)
    assert chat.calls == 3
    assert info.value.status == 504
    assert llm.remaining == 1


def test_a_500_is_not_retried(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(500, "model crashed"), Reply.answer("never reached"))
    chat = client(llm, max_retries=2)
    with pytest.raises(LLMError, match="HTTP 500: model crashed"):
        chat.chat(ASK)
    assert chat.calls == 1


def test_backoff_grows_exponentially(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(502), Reply.fail(502), Reply.answer("ok"))
    started = time.monotonic()
    client(llm, max_retries=2, backoff=0.2).chat(ASK)
    assert time.monotonic() - started >= 0.2 + 0.4


def test_a_400_is_not_retried(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(400, "bad request: unknown field"), Reply.answer("never reached"))
    chat = client(llm, max_retries=2)
    with pytest.raises(LLMError, match="HTTP 400: bad request: unknown field") as info:
        chat.chat(ASK)
    assert chat.calls == 1
    assert info.value.status == 400
    assert info.value.source == f"{llm.url}/chat/completions"


def test_a_timeout_is_retried_and_then_fails(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.slow(1.0), Reply.slow(1.0))
    chat = client(llm, timeout=0.2, max_retries=1)
    started = time.monotonic()
    with pytest.raises(LLMError, match="timeout"):
        chat.chat(ASK)
    assert chat.calls == 2
    assert time.monotonic() - started < 1.5


def test_a_timeout_then_an_answer_succeeds(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.slow(1.0), Reply.answer("in time"))
    chat = client(llm, timeout=0.2, max_retries=1)
    assert chat.chat(ASK).content == "in time"
    assert chat.calls == 2


def test_a_dead_server_is_an_llm_error_which_is_a_folio_error() -> None:
    chat = OpenAIChatClient(dead_url() + "/v1", "m", max_retries=1, backoff=0.01, timeout=2.0)
    with pytest.raises(FolioError, match="cannot reach the server") as info:
        chat.chat(ASK)
    assert isinstance(info.value, LLMError)
    assert chat.calls == 2


def test_a_malformed_response_body_is_an_llm_error_without_retry(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.malformed(), Reply.answer("never reached"))
    chat = client(llm)
    with pytest.raises(LLMError, match="not JSON"):
        chat.chat(ASK)
    assert chat.calls == 1


def test_chat_json_asks_for_a_json_schema_response_format(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.answer({"books": ["wp100"], "reason": "astronomy"}))
    assert client(llm).chat_json(ASK, SCHEMA) == {"books": ["wp100"], "reason": "astronomy"}
    fmt = llm.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["schema"] == SCHEMA
    assert fmt["json_schema"]["name"] == "book_ranking"


def test_chat_json_falls_back_to_json_object_then_plain_and_remembers(llm: ScriptedLLMServer) -> None:
    llm.push(
        Reply.fail(400, "response_format json_schema not supported"),
        Reply.fail(400, "response_format.schema: extra inputs are not permitted"),
        Reply.fail(400, "response_format not supported"),
        Reply.answer({"books": []}),
        Reply.answer({"books": ["a"]}),
    )
    chat = client(llm)
    assert chat.chat_json(ASK, SCHEMA) == {"books": []}
    formats = [r.get("response_format") for r in llm.requests]
    assert [f and f["type"] for f in formats] == ["json_schema", "json_object", "json_object", None]
    assert formats[1] == {"type": "json_object", "schema": SCHEMA} and formats[2] == {"type": "json_object"}
    assert '"required":["books"]' in llm.requests[3]["messages"][0]["content"]  # schema as instructions
    assert chat.chat_json(ASK, SCHEMA) == {"books": ["a"]}
    assert "response_format" not in llm.requests[4]  # the refusal is remembered
    assert chat.calls == 5


def test_chat_json_does_not_fall_back_on_an_auth_error(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.fail(401, "invalid api key"), Reply.answer({"books": []}))
    chat = client(llm)
    with pytest.raises(LLMError, match="invalid api key"):
        chat.chat_json(ASK, SCHEMA)
    assert chat.calls == 1


def test_malformed_json_is_repaired_once(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.answer("Sure! {books: [wp100]"), Reply.answer({"books": ["wp100"]}))
    chat = client(llm)
    assert chat.chat_json(ASK, SCHEMA) == {"books": ["wp100"]}
    repair = llm.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "Sure! {books: [wp100]"}
    assert "not valid JSON" in repair[-1]["content"] or "not JSON" in repair[-1]["content"]
    assert chat.calls == 2


def test_a_missing_required_key_is_repaired(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.answer({"reason": "no books key"}), Reply.answer({"books": ["x"], "reason": "fixed"}))
    assert client(llm).chat_json(ASK, SCHEMA)["books"] == ["x"]
    assert "missing required key(s): books" in llm.requests[1]["messages"][-1]["content"]


def test_json_still_invalid_after_the_repair_is_an_llm_error(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.answer("not json"), Reply.answer("still not json"), Reply.answer({"books": []}))
    chat = client(llm)
    with pytest.raises(LLMError, match="invalid JSON answer after one repair"):
        chat.chat_json(ASK, SCHEMA)
    assert chat.calls == 2
    assert llm.remaining == 1


def test_on_call_hook_can_refuse_calls_as_a_budget(llm: ScriptedLLMServer) -> None:
    seen: list[dict[str, Any]] = []

    def budget(payload: dict[str, Any]) -> None:
        if len(seen) >= 2:
            raise LLMError("llm", "tool budget exhausted (2 calls)")
        seen.append(payload)

    llm.push("one", "two", "three")
    chat = client(llm, on_call=budget)
    assert [chat.chat(ASK).content for _ in range(2)] == ["one", "two"]
    with pytest.raises(LLMError, match="budget exhausted"):
        chat.chat(ASK)
    assert len(llm.requests) == 2
    assert seen[0]["messages"] == ASK


def test_models_lists_the_server_models(llm: ScriptedLLMServer) -> None:
    chat = client(llm)
    assert chat.models() == ("scripted-model",)
    assert chat.calls == 1


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"books": ["a"]}', {"books": ["a"]}),
        ('```json\n{"books": ["a"]}\n```', {"books": ["a"]}),
        ('Here you go: {"books": []} hope it helps', {"books": []}),
    ],
)
def test_parse_json_answer_accepts_fences_and_surrounding_prose(
    content: str, expected: dict[str, Any]
) -> None:
    assert parse_json_answer(content, SCHEMA) == expected


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("no json at all", "not JSON"),
        ('["a", "b"]', "must be a JSON object"),
        ('{"reason": "x"}', "missing required key(s): books"),
        ('{"books": "wp100"}', "'books' must be of type array"),
    ],
)
def test_parse_json_answer_rejects_with_a_reason(content: str, reason: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        parse_json_answer(content, SCHEMA)
    assert reason in str(info.value)


def test_check_schema_does_not_take_a_bool_for_a_number() -> None:
    schema = {"properties": {"score": {"type": "number"}}, "required": ["score"]}
    check_schema({"score": 0.5}, schema)
    check_schema({"score": 2}, schema)
    with pytest.raises(ValueError, match="'score' must be of type number"):
        check_schema({"score": True}, schema)


# --- real servers: format refusals, max_tokens, transient retries, deadlines, reply shapes -------------

# what llama_cpp.server answers (HTTP 500, the pydantic error as the message) to json_schema
LLAMA_CPP_REFUSAL = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n  Input should be 'text' "
    "or 'json_object' [type=literal_error, input_value='json_schema', input_type=str]"
)


def test_a_500_naming_the_response_format_falls_back_at_once_and_spends_one_call(
    llm: ScriptedLLMServer,
) -> None:
    spent: list[dict[str, Any]] = []
    llm.push(Reply.fail(500, LLAMA_CPP_REFUSAL), Reply.answer({"books": ["a"]}))
    chat = client(llm, max_retries=2, on_call=spent.append)
    assert chat.chat_json(ASK, SCHEMA) == {"books": ["a"]}
    assert [r.get("response_format", {}).get("type") for r in llm.requests] == ["json_schema", "json_object"]
    assert llm.requests[1]["response_format"]["schema"] == SCHEMA  # llama-cpp-python's grammar from it
    assert len(spent) == 1  # the refusal is the client's business, not the question's budget
    assert chat.json_mode == "json_object_schema"


def test_a_format_refusal_is_remembered_by_a_new_client_of_the_same_server_and_model(
    llm: ScriptedLLMServer,
) -> None:
    llm.push(Reply.fail(500, LLAMA_CPP_REFUSAL), Reply.answer({"books": []}), Reply.answer({"books": []}))
    client(llm).chat_json(ASK, SCHEMA)
    client(llm).chat_json(ASK, SCHEMA)
    assert [r.get("response_format", {}).get("type") for r in llm.requests] == [
        "json_schema",
        "json_object",
        "json_object",
    ]
    other = OpenAIChatClient(llm.url, "another-model", backoff=0.01)
    assert other.json_mode == "json_schema"


def test_plain_text_with_prose_around_the_json_is_extracted(llm: ScriptedLLMServer) -> None:
    llm.push(
        Reply.fail(400, "response_format is not supported"),
        Reply.fail(400, "response_format is not supported"),
        Reply.fail(400, "response_format is not supported"),
        Reply.answer('Here you go: {"books": ["wp"]} hope it helps'),
    )
    assert client(llm).chat_json(ASK, SCHEMA) == {"books": ["wp"]}
    assert "response_format" not in llm.requests[-1]


def test_every_request_bounds_the_reply_length(llm: ScriptedLLMServer) -> None:
    llm.push("a", {"books": []}, "c")
    chat = client(llm, max_tokens=77)
    chat.chat(ASK)
    chat.chat_json(ASK, SCHEMA)
    chat.chat(ASK, max_tokens=5)
    assert [r["max_tokens"] for r in llm.requests] == [77, 77, 5]


def test_a_request_with_tools_sets_tool_choice_auto(llm: ScriptedLLMServer) -> None:
    llm.push("a", "b")
    chat = client(llm)
    chat.chat(ASK, tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
    chat.chat(ASK)
    assert llm.requests[0]["tool_choice"] == "auto"
    assert "tool_choice" not in llm.requests[1]


def test_a_request_can_name_the_tool_to_call(llm: ScriptedLLMServer) -> None:
    llm.push("a")
    named = {"type": "function", "function": {"name": "f"}}
    client(llm).chat(ASK, tools=[{"type": "function", "function": {"name": "f"}}], tool_choice=named)
    assert llm.requests[0]["tool_choice"] == named


def test_a_retried_request_spends_one_call_of_the_budget(llm: ScriptedLLMServer) -> None:
    spent: list[dict[str, Any]] = []
    llm.push(Reply.fail(503), Reply.fail(502), Reply.answer("third time"))
    chat = client(llm, max_retries=2, on_call=spent.append)
    assert chat.chat(ASK).content == "third time"
    assert (chat.calls, len(spent)) == (3, 1)


def test_a_429_waits_for_its_retry_after(llm: ScriptedLLMServer) -> None:
    limited = Reply(status=429, body='{"error": {"message": "slow down"}}', headers=(("Retry-After", "0.4"),))
    llm.push(limited, Reply.answer("ok"))
    started = time.monotonic()
    assert client(llm, backoff=0.0).chat(ASK).content == "ok"
    assert time.monotonic() - started >= 0.4


def test_a_429_whose_retry_after_outlasts_the_deadline_fails_now(llm: ScriptedLLMServer) -> None:
    limited = Reply(status=429, body='{"error": {"message": "slow down"}}', headers=(("Retry-After", "20"),))
    llm.push(limited, Reply.answer("never reached"))
    started = time.monotonic()
    with pytest.raises(LLMError, match="HTTP 429: slow down"):
        client(llm).chat(ASK, deadline=2.0)
    assert time.monotonic() - started < 1.0


def test_a_trickling_server_is_abandoned_at_the_overall_timeout(llm: ScriptedLLMServer) -> None:
    llm.push(Reply(content="x" * 200, trickle=0.05))  # ~15 s to send, one byte every 50 ms
    started = time.monotonic()
    with pytest.raises(LLMError, match="timeout"):
        client(llm, timeout=0.5, max_retries=0).chat(ASK)
    assert time.monotonic() - started < 1.0


def test_a_call_deadline_bounds_the_retries_together(llm: ScriptedLLMServer) -> None:
    llm.push(Reply.slow(2.0), Reply.slow(2.0), Reply.slow(2.0))
    started = time.monotonic()
    with pytest.raises(LLMError, match="timeout"):
        client(llm, timeout=5.0, max_retries=2).chat(ASK, deadline=0.6)
    assert time.monotonic() - started < 1.1


def test_the_running_asks_deadline_bounds_a_call_without_its_own(llm: ScriptedLLMServer) -> None:
    from folio.nodes.backends.deadlines import deadline_scope
    from folio.nodes.core.types import Deadline

    llm.push(Reply.slow(3.0), Reply.slow(3.0))
    started = time.monotonic()
    with deadline_scope(Deadline.after(0.6)), pytest.raises(LLMError, match="timeout"):
        client(llm, timeout=10.0, max_retries=1).chat(ASK)
    assert time.monotonic() - started < 1.1


def test_a_deadline_object_with_remaining_is_read_at_each_call(llm: ScriptedLLMServer) -> None:
    class Spent:
        def remaining(self) -> float:
            return 0.0

    llm.push("never asked")
    chat = client(llm, deadline=Spent())
    with pytest.raises(LLMError, match="no time left"):
        chat.chat(ASK)
    assert llm.requests == []


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"choices": []}, "no choices"),
        ({"choices": [{"message": "hello"}]}, "message is str, not an object"),
        ({"choices": [{"message": {"content": {"text": "x"}}}]}, "content is dict, not a string"),
        ({"choices": [{"message": {"content": "", "tool_calls": "text_search"}}]}, "tool_calls is str"),
        ({"choices": [{"message": {"content": "", "tool_calls": ["x"]}}]}, "tool_calls[0] is str"),
        (
            {"choices": [{"message": {"content": "", "tool_calls": [{"function": "f"}]}}]},
            "tool_calls[0].function is str",
        ),
        (
            {"choices": [{"message": {"tool_calls": [{"function": {"name": 3, "arguments": "{}"}}]}}]},
            "function.name is int",
        ),
    ],
)
def test_a_malformed_reply_is_an_llm_error_naming_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(LLMError, match="malformed reply") as info:
        chat_result(body, "http://llm/v1/chat/completions")
    assert field in info.value.reason


def test_content_parts_and_dict_arguments_are_read() -> None:
    body = {
        "choices": [
            {
                "message": {
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    "tool_calls": [{"function": {"name": "text_search", "arguments": {"query": "q"}}}],
                }
            }
        ]
    }
    result = chat_result(body, "u")
    assert result.content == "ab"
    assert result.tool_calls[0].arguments() == {"query": "q"}
    assert result.tool_calls[0].id == "call_0"


def test_format_refusal_and_retry_after_helpers() -> None:
    assert is_format_refusal(500, LLAMA_CPP_REFUSAL)
    assert not is_format_refusal(500, "out of memory")
    assert not is_format_refusal(200, "response_format")
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None
