"""What the ``folio`` command tells a new user, and how it reads arguments as people type them.

- ``EXAMPLES``: the three examples ``folio --help`` ends with.
- ``list_options_last(argv)``: a list option (``--zim a.zim b.zim``) may come before or after the
  question: its values end at the first one that is not an archive, and the option is moved after the
  positional arguments so that argparse's greedy ``nargs="+"`` cannot eat the question.
- ``empty_library_notes(library, given)``: where the default library is, how to point at another
  (``--library``, ``$FOLIO_LIBRARY``) and where ``make demo`` put its library, for a command that found
  no books in the default library.
- ``fresh_library(path)``: a context that removes a library folder this command created when it ends
  with no book in it (a failed first ingest leaves nothing behind).

No config keys. Limitations: a ``--zim`` value after the first is taken as an archive when it ends in
``.zim`` or names an existing path; any other word ends the list (an archive named otherwise must exist).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

EXAMPLES = """examples:
  folio ingest ~/books/moby-dick.epub ~/books/tolkien/      # add books (files or folders) to the library
  folio ask "Why does Ahab hunt the whale?"                 # an answer with cited passages
  folio ask "What is a noble gas?" --zim ~/zim/wikipedia_en_all.zim  # your books and a Kiwix archive

The library is $FOLIO_LIBRARY, else ~/.local/share/folio; --library DIR picks another for one command."""

SEARCH_MODE_HELP = "hybrid: words and meaning (default); lexical: the words; semantic: the meaning"
EVAL_MODE_HELP = (
    "hybrid (default), lexical or semantic; or a baseline to compare them with: bm25s (the bm25s "
    "library's BM25 over the chunks) or dense_exact (exact cosine search, no vector index)"
)

# list options (nargs="+") and the endings of the values they take
LIST_OPTIONS: dict[str, tuple[str, ...]] = {"--zim": (".zim",), "--books": (), "--watch": ()}
DEMO_LIBRARY = ".folio-demo"  # the Makefile's LIBRARY


def _is_item(value: str, endings: tuple[str, ...]) -> bool:
    return not value.startswith("-") and (value.lower().endswith(endings) or os.path.exists(value))


def list_options_last(argv: Sequence[str]) -> list[str]:
    """``argv`` with each list option and its values moved to the end; its values are the first word
    after it and every following word that looks like one of its items (``LIST_OPTIONS``). A ``--``
    ends the options: what follows is kept as it is."""
    args = list(argv)
    stop = args.index("--") if "--" in args else len(args)
    kept: list[str] = []
    moved: list[str] = []
    i = 0
    while i < stop:
        endings = LIST_OPTIONS.get(args[i])
        if endings is None or i + 1 >= stop or args[i + 1].startswith("-"):
            kept.append(args[i])
            i += 1
            continue
        j = i + 2
        while j < stop and _is_item(args[j], endings):
            j += 1
        moved += args[i:j]
        i = j
    return kept + moved + args[stop:]


def demo_library() -> Path | None:
    """The library ``make demo`` writes (``.folio-demo`` in the Folio checkout this runs from), when
    Folio runs from a checkout (an editable install); None for an installed wheel."""
    checkout = Path(__file__).resolve().parents[1]
    return checkout / DEMO_LIBRARY if (checkout / "Makefile").is_file() else None


def empty_library_notes(library: Path, given: bool) -> list[str]:
    """Notes for a command that found no books in ``library``: nothing when the user named it
    (``given``); else where the default is, how to pick another, and the demo's library."""
    if given:
        return []
    notes = [
        f"{library} is the default library: pick another with --library DIR or `export FOLIO_LIBRARY=DIR`"
    ]
    demo = demo_library()
    if demo is not None and (demo / "library.sqlite").exists():
        notes.append(f"`make demo` filled {demo}: `export FOLIO_LIBRARY={demo}` uses it")
    elif demo is not None:
        notes.append(f"`make demo` (in {demo.parent}) fills {demo} with three books to try")
    return notes


def notes_on_library(library: str | None) -> list[str]:
    """``empty_library_notes`` for a command's ``--library`` value when the user chose none and the
    default library has no books; nothing otherwise (never an error of its own)."""
    from folio.dataflows.library import default_library

    if library is not None or os.environ.get("FOLIO_LIBRARY"):
        return []
    path = default_library()
    return [] if _has_books(path) else empty_library_notes(path, False)


@contextlib.contextmanager
def fresh_library(path: Path) -> Iterator[None]:
    """Run the body; when ``path`` did not exist before it and holds no book after it (a failed first
    ingest), remove the folder again (only a folder this command created, never one the user had)."""
    path = path.absolute()
    created = next((p for p in (*reversed(path.parents), path) if not p.exists()), None)
    try:
        yield
    finally:
        if created is not None and path.is_dir() and not _has_books(path):
            shutil.rmtree(created, ignore_errors=True)


def _has_books(path: Path) -> bool:
    """Whether the library at ``path`` holds a book (one that cannot be read counts: kept for doctor)."""
    from folio.dataflows.library import Library

    if not path.is_dir():
        return False
    try:
        lib = Library(path)
        return lib.exists() and bool(lib.book_ids())
    except Exception:
        return True
