"""The ``folio`` command line's arguments as data: one ``Command`` per subcommand with its options, in
the order ``--help`` lists them, and ``add_commands`` that turns the table into argparse subparsers
(``dataflows.cli.build_parser``).

An option is ``opt(*flags, **argparse keywords)``; ``Exclusive`` holds options of which one may be
given; ``LIBRARY``, ``FILTERS`` and ``SOURCES`` are the option groups several commands share. A
command names its handler (``cmd_<name>`` of ``dataflows.cli``), which the caller passes in.

Config: none. Limitations: the search modes are filled in when the parser is built (``SEARCH_MODES``
of ``dataflows.api``, which imports the drivers), so this module stays light.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from folio.dataflows.cli_guide import EVAL_MODE_HELP, SEARCH_MODE_HELP
from folio.dataflows.filtering import FILTER_FIELDS

MAX_K = 10_000  # the most results one command asks for
SEARCH_MODES = "search modes"  # a choices placeholder: dataflows.api.SEARCH_MODES when the parser is built


def count(text: str) -> int:
    """A ``-k`` value: a whole number from 1 to ``MAX_K`` (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= MAX_K:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_K} (got {text})")
    return value


def port(text: str) -> int:
    """A TCP port: a whole number from 1 to 65535 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"must be from 1 to 65535 (got {text})")
    return value


@dataclass(frozen=True)
class Opt:
    """One argument: its flags (or name) and argparse keywords."""

    flags: tuple[str, ...]
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class Exclusive:
    """Options of which at most one may be given."""

    opts: tuple[Opt, ...]


@dataclass(frozen=True)
class Command:
    """One subcommand: its name, one-line help and arguments in ``--help`` order."""

    name: str
    help: str
    args: tuple[Opt | Exclusive, ...] = field(default=())


def opt(*flags: str, **kwargs: Any) -> Opt:
    return Opt(flags, kwargs)


LIBRARY_ONLY = opt("--library", default=None)
LIBRARY = (
    opt("--library", default=None, help="library directory (default: $FOLIO_LIBRARY or per-user data dir)"),
    opt("--config", default=None, help="config YAML (default: configs/default.yaml)"),
)
JSON = opt("--json", action="store_true")
QUIET = opt("--quiet", action="store_true", help="no progress bar")
FILTERS = tuple(opt(f"--{name}", default=None, help=f"only books of this {name}") for name in FILTER_FIELDS)
ZIM_TOO = opt("--zim", nargs="+", action="extend", metavar="PATH", help="ZIM files to search too (libzim)")
KIWIX_URL_TOO = opt("--kiwix-url", metavar="URL", help="base URL of a kiwix-serve to search too")
SOURCES = (*LIBRARY, Exclusive((ZIM_TOO, KIWIX_URL_TOO)))
FOLDERS = {"nargs": "+", "action": "extend", "metavar": "DIR", "default": None}

COMMANDS = (
    Command(
        "ingest",
        "ingest EPUB / text books (files, folders or Calibre libraries)",
        (
            opt("paths", nargs="+"),
            *LIBRARY,
            opt("--profile", choices=["narrative", "technical", "poetry"], default=None),
            opt("--quiet", action="store_true", help="no progress bar, only errors"),
        ),
    ),
    Command("books", "list the library's books", (LIBRARY_ONLY, JSON, *FILTERS)),
    Command(
        "sync",
        "make the library mirror folders and Calibre libraries",
        (
            opt("paths", nargs="+"),
            *LIBRARY,
            opt("--dry-run", action="store_true", help="print the plan, change nothing"),
            opt("--yes", action="store_true", help="remove vanished books without asking"),
            QUIET,
        ),
    ),
    Command(
        "search",
        "search the library by words and meaning",
        (
            opt("query"),
            *LIBRARY,
            opt("--book", default=None, help="book id (or unique prefix, or source file name)"),
            opt("--chapter", action="append", default=None, help="chapter id (repeatable)"),
            opt("--mode", choices=SEARCH_MODES, metavar="{hybrid,lexical,semantic}", help=SEARCH_MODE_HELP),
            opt("-k", type=count, default=None),
            JSON,
            *FILTERS,
        ),
    ),
    Command(
        "eval",
        "retrieval and answer metrics (lenient and strict) for a question file (FairytaleQA CSV, book, "
        "Kiwix or library JSONL; library lines with expect: refuse|answer give refusal_rate / answered_rate)",
        (
            opt("qa_file"),
            *LIBRARY,
            opt("--mode", choices=SEARCH_MODES, help=EVAL_MODE_HELP),
            opt("-k", type=count, default=10),
            JSON,
            opt("--details", action="store_true", help="per-question rows"),
            opt("--no-answers", action="store_true", help="retrieval metrics only (skip answering)"),
        ),
    ),
    Command(
        "cache",
        "show or clear the library's node and embedding cache and summaries",
        (opt("action", choices=["info", "clear"]), LIBRARY_ONLY, JSON),
    ),
    Command(
        "doctor",
        "verify every book, the indexes and the caches; repair what it can",
        (
            LIBRARY_ONLY,
            opt(
                "--compact", action="store_true", help="then fold the vector segments into one, optimise FTS5"
            ),
        ),
    ),
    Command(
        "remove",
        "remove a book from the library",
        (
            opt("book", help="book id (or a unique prefix of at least 4 characters)"),
            LIBRARY_ONLY,
            opt("--dry-run", action="store_true", help="show which book would go; change nothing"),
        ),
    ),
    Command(
        "summary",
        "a chapter's summary or the book's synopsis (made once, then read from the library)",
        (
            opt("book", help="book id (or unique prefix, or source file name)"),
            opt("chapter", nargs="?", default=None, help="chapter id or number (default: the synopsis)"),
            *LIBRARY,
            JSON,
        ),
    ),
    Command(
        "concepts",
        "look up entities, themes and events in a book's concept map",
        (
            opt("query"),
            opt("--book", default=None, help="book id (default: every book)"),
            LIBRARY_ONLY,
            opt("-k", type=count, default=10),
            JSON,
        ),
    ),
    Command(
        "viz",
        "draw one SVG (and its structure JSON) per distinct DAG graph, and the import graph, into viz/",
        (
            opt("--out", default=None, metavar="DIR", help="default: the repo's viz/, else ./viz"),
            opt(
                "--format", action="append", choices=("svg", "png"), default=None, help="png: also write PNGs"
            ),
            opt("--quiet", action="store_true", help="print nothing"),
        ),
    ),
    Command(
        "ask",
        "answer a question from your books and Kiwix, with citations",
        (
            opt("question", help="the question, in plain words"),
            *SOURCES,
            opt("--json", action="store_true", help="print the answer as JSON"),
            *FILTERS,
        ),
    ),
    Command(
        "kiwix",
        "find the articles that answer a question in Kiwix books",
        (
            opt("query", help="the question, in plain words"),
            Exclusive(
                (
                    opt(
                        "--zim",
                        nargs="+",
                        action="extend",
                        metavar="PATH",
                        help="ZIM files to search (libzim)",
                    ),
                    opt("--kiwix-url", metavar="URL", help="base URL of a kiwix-serve"),
                )
            ),
            opt("--config", metavar="FILE", help="a YAML config over configs/default.yaml"),
            opt("--json", action="store_true", help="print the result as JSON"),
        ),
    ),
    Command(
        "experiment",
        "run a config-switched experiment (EXPERIMENT.yaml), or show saved runs (show [RUN ...])",
        (
            opt("target", help="an experiment file, or 'show'"),
            opt("runs", nargs="*", help="with show: run ids (default: the latest experiment's runs)"),
            LIBRARY_ONLY,
            opt("--batch", default=None, help="with show: the runs of this batch id"),
            opt("--metrics", default=None, help="comma-separated metric columns (default: the experiment's)"),
            opt("--plot", default=None, metavar="FILE.png", help="also draw metric vs variant into FILE.png"),
            JSON,
            opt("--quiet", action="store_true", help="no progress lines"),
        ),
    ),
    Command(
        "serve",
        "serve the HTTP API, the MCP tools (/mcp) and a web page, warm",
        (
            *SOURCES,
            opt("--host", default="127.0.0.1", help="bind address (others than loopback need a token)"),
            opt("--port", type=port, default=8765),
            opt("--token", default=None, help="required on every request (default: $FOLIO_TOKEN)"),
            opt(
                "--books",
                **FOLDERS,
                help="folders POST /api/ingest may read (default: none, ingest over HTTP is off)",
            ),
            opt(
                "--watch", **FOLDERS, help="keep these folders / Calibre libraries synced (jobs at /api/jobs)"
            ),
        ),
    ),
    Command("mcp", "serve the book and Kiwix tools to an MCP client over stdio", SOURCES),
)


def _add(parser: argparse.ArgumentParser | Any, arg: Opt, search_modes: Sequence[str]) -> None:
    kwargs = dict(arg.kwargs)
    if kwargs.get("choices") == SEARCH_MODES:
        kwargs["choices"] = search_modes
    parser.add_argument(*arg.flags, **kwargs)


def add_commands(
    sub: Any, handlers: Mapping[str, Callable[[argparse.Namespace], int]], search_modes: Sequence[str]
) -> None:
    """Add every command of ``COMMANDS`` to ``sub`` (argparse's subparsers), each calling
    ``handlers[name]``; ``search_modes``: the choices of ``--mode``."""
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help)
        for arg in command.args:
            if isinstance(arg, Exclusive):
                group = p.add_mutually_exclusive_group()
                for one in arg.opts:
                    _add(group, one, search_modes)
            else:
                _add(p, arg, search_modes)
        p.set_defaults(func=handlers[command.name])
