"""The LLM of a query: one OpenAI-compatible chat client for every stage that asks an LLM.

``llm_connection`` is the server connection (an ``OpenAIChatClient`` and its HTTP connection pool). It
is built here from the settings, or created once per process by the caller and handed to the DAG
(Hamilton ``overrides``), so a warm query pays no set-up. ``llm_client`` is the question's view of that
connection: the same HTTP connections, with every request it sends (retries included) spent from the
question's ``tool_budget`` when the graph has one (the ask DAG; the Kiwix DAG alone has no budget, so
there the connection is used as it is). The router, Kiwix book ranking, Kiwix disambiguation and the
answerer all call ``llm_client``: one graph, one client.

A ``response_format`` refusal is remembered per server and model for the process (the backend's
``JSON_MODE_MEMORY``), so only the first question of a process pays for it; a retried request spends
one call. ``llm_timeout_seconds`` is the overall deadline of one HTTP request (connect and all reads);
a whole call can be bounded further by the client's ``deadline`` (e.g. the ask's total deadline).

Config keys: ``llm`` (variant: these nodes exist only for ``llm: openai``), ``llm_base_url``,
``llm_model``, ``llm_api_key_env``, ``llm_timeout_seconds``, ``llm_max_retries``, ``llm_max_tokens``.
Limitations: the question's view shares the connection's HTTP pool; its ``deadline`` is not set here.
"""

from __future__ import annotations

import copy

from hamilton.function_modifiers import config

from folio.nodes.backends.book_tools import ToolBudget
from folio.nodes.backends.llm import OpenAIChatClient

# --- pure helpers ------------------------------------------------------------------------------------


def _counted(connection: OpenAIChatClient, budget: ToolBudget | None) -> OpenAIChatClient:
    """``connection`` with every request spent from ``budget`` (sharing its HTTP connections); as it is
    without a budget."""
    if budget is None:
        return connection
    view = copy.copy(connection)
    view.calls = 0
    view.on_call = budget.on_llm_call
    return view


# --- nodes -------------------------------------------------------------------------------------------


@config.when(llm="openai")
def llm_connection__openai(
    llm_base_url: str = "http://127.0.0.1:11434/v1",
    llm_model: str = "llama3.1",
    llm_api_key_env: str = "OPENAI_API_KEY",
    llm_timeout_seconds: float | int = 30.0,
    llm_max_retries: int = 2,
    llm_max_tokens: int = 512,
) -> OpenAIChatClient:
    """The connection to the OpenAI-compatible chat server (one per process when handed in)."""
    return OpenAIChatClient(
        llm_base_url,
        llm_model,
        llm_api_key_env,
        float(llm_timeout_seconds),
        int(llm_max_retries),
        max_tokens=int(llm_max_tokens),
    )


@config.when(llm="openai")
def llm_client__openai(
    llm_connection: OpenAIChatClient, tool_budget: ToolBudget | None = None
) -> OpenAIChatClient:
    """The question's chat client: the connection, each request spending one call of the tool budget."""
    return _counted(llm_connection, tool_budget)
