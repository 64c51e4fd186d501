"""The ``folio`` command line: ingest, sync, books, search, eval, viz, kiwix, doctor, summary.

Every user-facing failure is one line on stderr (``folio: <file>: <reason>``) and a non-zero exit:
a bad argument (exit 2), a ``FolioError`` (1), an unexpected exception (``folio: internal error: ...``,
1; ``FOLIO_DEBUG=1`` prints its traceback too), Ctrl-C (``folio: interrupted``, 130). Output cut off by
its reader (``folio books | head``) ends quietly with 141, as a shell's SIGPIPE would.
``--library`` defaults to ``$FOLIO_LIBRARY``, else the per-user data directory.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import os
import sys
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from folio.dataflows.cli_args import COMMANDS, add_commands
from folio.nodes.core.types import FolioError

if TYPE_CHECKING:  # the real classes for the type checker only: `folio --version` imports neither
    from folio.dataflows.library import Library
    from folio.dataflows.service import Service


def _err(message: str) -> None:
    print(f"folio: {one_line(message)}", file=sys.stderr)


def one_line(message: str) -> str:
    """``message`` on one line (newlines and other control characters shown escaped)."""
    return "".join(c if c.isprintable() or c == " " else ascii(c)[1:-1] for c in message)


class OneLineParser(argparse.ArgumentParser):
    """argparse with its errors as one line (``folio: <command>: <error>``), exit 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("folio").strip()
        _err(f"{command + ': ' if command else ''}{message} (see {self.prog} --help)")
        sys.exit(2)


MAX_CHAPTERS = 10_000  # folio.dataflows.api.MAX_CHAPTERS (not imported: the API imports the drivers)


def fewer_chapters(argv: list[str]) -> list[str]:
    """``argv`` with each repeated ``--chapter X`` kept once; more than ``MAX_CHAPTERS`` distinct ones are
    refused before argparse, whose parsing time grows with the square of the number of arguments (33,000
    chapters took a minute)."""
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(argv):
        if argv[i] == "--chapter" and i + 1 < len(argv):
            if argv[i + 1] not in seen:
                seen.add(argv[i + 1])
                out += argv[i : i + 2]
            i += 2
            continue
        out.append(argv[i])
        i += 1
    if len(seen) > MAX_CHAPTERS:
        raise FolioError("--chapter", f"at most {MAX_CHAPTERS:,} chapters (got {len(seen):,})")
    return out


def checked_text_args(args: argparse.Namespace) -> None:
    """Refuse a query or question that is not valid UTF-8 (bytes the shell passed undecoded)."""
    for name in ("query", "question"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise FolioError(name, "not valid UTF-8 text") from None


class _OneLineNotes(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"folio: note: {one_line(record.getMessage())}"


def _notes_as_lines() -> None:
    """Folio's own warnings (a degraded path: an LLM ranking that failed, a disambiguation that fell
    back) as ``folio: note: ...`` lines on stderr, one each, instead of logging's bare default."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLineNotes())
    folio_logger = logging.getLogger("folio")
    folio_logger.handlers[:] = [handler]
    folio_logger.propagate = False


def _broken_pipe() -> int:
    """The reader of stdout went away: drop what is left unflushed, quietly (exit 141, as SIGPIPE)."""
    import contextlib

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141


def _internal_error(exc: BaseException) -> int:
    """An unexpected exception: one line (its traceback too under ``FOLIO_DEBUG=1``), exit 1."""
    if os.environ.get("FOLIO_DEBUG"):
        import traceback

        traceback.print_exception(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    hint = "" if os.environ.get("FOLIO_DEBUG") else " (FOLIO_DEBUG=1 shows the traceback)"
    _err(f"internal error: {type(exc).__name__}: {text}{hint}")
    return 1


def _snippet(text: str, width: int = 220) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def cmd_ingest(args: argparse.Namespace) -> int:
    from folio.dataflows.api import ingest
    from folio.dataflows.cli_guide import fresh_library
    from folio.dataflows.library import Library
    from folio.nodes.backends.progress import progress_for

    progress = progress_for(args.quiet)
    try:
        with fresh_library(Library(args.library).path):  # a failed first ingest leaves no folder
            report = ingest(
                args.paths, library=args.library, config=args.config, profile=args.profile, progress=progress
            )
    finally:
        progress.close()
    for staged in report.ingested:
        if not args.quiet:
            print(
                f"ingested {staged.book_id}: {staged.title} — {staged.n_chapters} chapters, "
                f"{staged.n_chunks} chunks, {staged.n_windows} windows"
            )
    for error in report.errors:
        _err(str(error))
    return 0 if report.ok else 1


def _name_damaged(lib: Library) -> None:
    """One line per damaged book of ``lib`` (a ``Library``), which the command leaves out."""
    for book_id, problem in lib.damaged_books():
        _err(f"{book_id}: {problem}: run `folio doctor`, or `folio remove {book_id}`")


def cmd_books(args: argparse.Namespace) -> int:
    from folio.dataflows.api import books
    from folio.dataflows.filtering import BookFilter, book_line
    from folio.dataflows.library import Library

    rows = books(args.library, BookFilter.of(args))
    _name_damaged(Library(args.library))  # the others are listed
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no books yet in {Library(args.library).path}: folio ingest PATH...")
        _empty_library_notes(args)
        return 0
    print(f"{'id':<48} {'chapters':>8} {'chunks':>7}  title — author [series; tags; language, format]")
    for r in rows:
        print(f"{r['book_id']:<48} {r['chapters']:>8} {r['chunks']:>7}  {book_line(r)}")
    return 0


def _empty_library_notes(args: argparse.Namespace) -> None:
    """After a command found no books in the default library: where it is and how to pick another."""
    from folio.dataflows.cli_guide import notes_on_library

    if "library" not in args or args.func is cmd_ingest:
        return
    try:
        notes = notes_on_library(args.library)
    except Exception:  # a note must never become an error of its own
        notes = []
    for note in notes:
        _err(f"note: {note}")


def cmd_search(args: argparse.Namespace) -> int:
    from folio.dataflows.api import search

    hits = search(
        args.query,
        library=args.library,
        book=args.book,
        chapter=args.chapter,
        mode=args.mode,
        k=args.k,
        config=args.config,
        filters=vars(args),
    )
    from folio.dataflows.library import Library

    _name_damaged(Library(args.library))
    if args.json:
        print(json.dumps([h.as_dict() for h in hits], indent=2, ensure_ascii=False))
        return 0
    if not hits:
        print("no hits")
    for rank, h in enumerate(hits, 1):
        print(
            f"[{rank}] {h.score:.4f}  {h.book_id} › {h.chapter_title}  "
            f"({h.chapter_id} {h.chunk_id} @ {h.start}-{h.end})"
        )
        print(textwrap.indent(_snippet(h.text), "     "))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from folio.dataflows.evaluation import evaluate_file

    result = evaluate_file(
        args.qa_file,
        library=args.library,
        mode=args.mode,
        k=args.k,
        config=args.config,
        answers=False if args.no_answers else None,
    )
    summary = {key: value for key, value in result.items() if key != "details"}
    if args.details:
        summary["details"] = result["details"]
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json or args.details else _table(summary))
    return 0


def _table(summary: dict) -> str:
    width = max((len(key) for key in summary), default=0)
    return "\n".join(f"{key:>{width}}  {value}" for key, value in summary.items())


def cmd_cache(args: argparse.Namespace) -> int:
    from folio.dataflows.caching import cache_info, clear_cache
    from folio.dataflows.library import Library

    lib = Library(args.library)
    if args.action == "clear":
        with lib.writer():
            clear_cache(lib.path)
        print(f"cleared the cache of {lib.path}")
        return 0
    info = cache_info(lib.path)
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"library            {info['library']}")
        print(f"node results       {info['node_results']} ({info['node_results_bytes'] / 2**20:.1f} MiB)")
        print(
            f"window embeddings  {info['window_embeddings']} "
            f"({info['window_embeddings_bytes'] / 2**20:.1f} MiB)"
        )
        print(f"summaries          {info['summaries']}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from folio.dataflows.doctor import compact, examine, report_lines
    from folio.dataflows.library import Library

    checkup = examine(Library(args.library))
    print("\n".join(report_lines(checkup)))
    if args.compact and checkup.healthy:
        print(compact(Library(args.library)))
    return 0 if checkup.healthy else 1


def cmd_remove(args: argparse.Namespace) -> int:
    from folio.dataflows.library import Library

    lib = Library(args.library)
    if args.dry_run:
        would = lib.removal(args.book)
        print(f"would remove {would['book_id']}: {would['title']} (nothing was changed)")
        return 0
    book_id = lib.removal_target(args.book)
    with lib.writer():
        lib.remove(book_id)
    print(f"removed {book_id}")
    return 0


def cmd_summary(args: argparse.Namespace) -> int:
    from folio.dataflows.summarizing import summary

    made = summary(args.book, args.chapter, library=args.library, config=args.config)
    if args.json:
        print(json.dumps(made, indent=2, ensure_ascii=False))
        return 0
    heading = made["book_title"] + (f" — {made['chapter_title']}" if made["chapter_id"] else " — synopsis")
    where = "made now, stored in the library" if made["computed"] else "read from the library"
    print(f"{heading}\n\n{made['summary']}\n\nsummariser: {made['summariser']} ({where})")
    for note in made["notes"]:
        print(f"note: {note}")
    return 0


def cmd_concepts(args: argparse.Namespace) -> int:
    from folio.dataflows.api import concept_matches, concept_rows, unmapped_books
    from folio.nodes.core.concept_lookup import format_matches

    if args.book is None:  # every book: one without a readable concept map is left out, named here
        for book_id in unmapped_books(args.library):
            _err(f"{book_id}: no readable concept map: `folio ingest` it again, or `folio remove {book_id}`")

    if args.json:
        rows = concept_rows(args.query, args.library, args.book, args.k)
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    for book_id, found, titles in concept_matches(args.query, args.library, args.book, args.k):
        print(f"[{book_id}]")
        print(textwrap.indent(format_matches(found, titles), "  "))
    return 0


def cmd_viz(args: argparse.Namespace) -> int:
    from folio.dataflows.viz import default_out_dir, render_all

    out = args.out or default_out_dir()
    changed = render_all(out, formats=tuple(args.format or ("svg",)))
    if not args.quiet:
        for path in changed:
            print(path)
        print(f"viz: {len(changed)} file(s) changed in {out}")
    return 0


def cmd_ask(args: argparse.Namespace) -> int:
    from folio.dataflows.asking import ask
    from folio.dataflows.formatting import format_answer
    from folio.dataflows.library import Library

    result = ask(
        args.question,
        config=args.config,
        library=args.library,
        zim_paths=args.zim,
        kiwix_url=args.kiwix_url,
        filters=vars(args),
    )
    _name_damaged(Library(args.library))  # answered from the others
    print(json.dumps(result.as_dict(), indent=2, ensure_ascii=False) if args.json else format_answer(result))
    return 0


def cmd_kiwix(args: argparse.Namespace) -> int:
    from folio.dataflows.config import load_config
    from folio.dataflows.formatting import format_kiwix_result
    from folio.dataflows.kiwix_query import kiwix_answer

    cfg = load_config(args.config) if args.config else None
    result = kiwix_answer(args.query, zim_paths=args.zim, kiwix_url=args.kiwix_url, config=cfg)
    print(
        json.dumps(result.as_dict(), indent=2, ensure_ascii=False)
        if args.json
        else format_kiwix_result(result)
    )
    return 0


def cmd_experiment(args: argparse.Namespace) -> int:
    from folio.dataflows import experiment_store
    from folio.dataflows.experiments import DB_NAME, load_experiment, run_experiment
    from folio.dataflows.library import Library

    lib = Library(args.library)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    if args.target == "show":
        db = lib.path / DB_NAME
        if not db.exists():
            raise FolioError(str(db), "no experiments yet: run `folio experiment EXPERIMENT.yaml` first")
        runs = experiment_store.load_runs(db, run_ids=args.runs or None, batch_id=args.batch)
    else:
        if args.runs:
            raise FolioError(args.target, "run ids go with `folio experiment show`")
        experiment = load_experiment(args.target)
        metrics = metrics or list(experiment.metrics)
        runs = run_experiment(experiment, lib, progress=not args.quiet).runs
    if args.json:
        print(json.dumps(runs, indent=2, default=str))
    else:
        print(experiment_store.comparison_table(runs, metrics))
    if args.plot:
        rates = [m for m in metrics or () if experiment_store.is_rate(m)] or ["hit@1", "hit@5", "mrr@10"]
        plotted = experiment_store.plot_runs(runs, args.plot, metrics=tuple(rates))
        print(f"plot: {plotted}", file=sys.stderr)
    return 0


def cmd_sync(args: argparse.Namespace) -> int:
    from folio.dataflows.syncing import ask_yes, run_sync

    report = run_sync(
        args.paths,
        args.library,
        args.config,
        args.dry_run,
        args.yes,
        ask_yes,
        not args.quiet and sys.stderr.isatty(),
    )
    if args.dry_run:
        print("\n".join(report.plan.lines()))
    for error in [*report.plan.problems, *report.errors]:
        _err(str(error))
    if report.skipped_removals:
        _err(f"{report.skipped_removals} removal(s) not done: run again with --yes to remove them")
    print(report.summary(args.dry_run))
    return 1 if report.errors else 0


def _service(args: argparse.Namespace) -> Service:
    from folio.dataflows.service import Service

    return Service(args.library, config=args.config, zim_paths=args.zim, kiwix_url=args.kiwix_url)


def cmd_serve(args: argparse.Namespace) -> int:
    from folio.dataflows.http_guard import real_folders
    from folio.dataflows.server import bind_token, check_port, serve
    from folio.dataflows.watching import FolderWatcher, checked_watch_paths

    token = bind_token(args.host, args.token)  # refused before anything loads
    books = real_folders(args.books or ())
    check_port(args.host, args.port)
    watched = checked_watch_paths(args.watch or [])
    service = _service(args)
    print("folio: loading the library and the model…", file=sys.stderr, flush=True)
    service.warm()
    watcher = FolderWatcher(service, watched) if watched else None
    if watcher is not None:
        watcher.start()
    try:
        serve(service, host=args.host, port=args.port, token=token, books=books)
    finally:
        if watcher is not None:
            watcher.stop()
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from folio.dataflows.mcp_server import run_stdio

    run_stdio(_service(args))
    return 0


def _version() -> str:
    """``folio <version>`` from the installed distribution's metadata (no heavy imports)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"folio {version('folio')}"
    except PackageNotFoundError:
        return "folio (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The ``folio`` parser: the commands and options of ``dataflows.cli_args.COMMANDS``, each calling
    its ``cmd_<name>`` handler."""
    from folio.dataflows.api import SEARCH_MODES  # imports the drivers: kept out of `folio --version`
    from folio.dataflows.cli_guide import EXAMPLES

    parser = OneLineParser(
        prog="folio",
        description="Offline question answering over your books and Kiwix archives.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", required=True)
    handlers = {c.name: globals()[f"cmd_{c.name}"] for c in COMMANDS}
    add_commands(sub, handlers, SEARCH_MODES)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = None
    try:
        if list(sys.argv[1:] if argv is None else argv) == ["--version"]:
            print(_version())  # answered before the full parser, which imports the API
            return 0
        from folio.dataflows.cli_guide import list_options_last

        parser = build_parser()
        args = parser.parse_args(
            list_options_last(fewer_chapters(list(sys.argv[1:] if argv is None else argv)))
        )
        # Hamilton logs a node's exception with a traceback; the CLI reports it as one line instead.
        logging.getLogger("hamilton").setLevel(
            logging.DEBUG if os.environ.get("FOLIO_DEBUG") else logging.CRITICAL
        )
        _notes_as_lines()
        checked_text_args(args)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers
        return code
    except FolioError as exc:
        _err(str(exc))
        if args is not None:
            _empty_library_notes(args)
        return 1
    except KeyboardInterrupt:
        _err("interrupted")
        return 130
    except BrokenPipeError:
        return _broken_pipe()
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            return _internal_error(exc)
        _broken_pipe()  # what could not be written is dropped (stdout on a full disk: /dev/full)
        _err(f"{exc.filename or 'output'}: cannot write: no space left on device")
        return 1
    except Exception as exc:  # the last resort: one line, never a traceback
        from folio.nodes.core.types import interrupted

        if interrupted(exc):  # a Ctrl-C that a library's clean-up turned into its own error
            _err("interrupted")
            return 130
        return _internal_error(exc)


if __name__ == "__main__":
    sys.exit(main())
