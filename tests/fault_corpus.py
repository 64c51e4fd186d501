"""The fault corpus of issue 13: every kind of damage, hostile input and misbehaving server, run against
the real ``folio`` command in a fresh process per case.

    python -m tests.fault_corpus               # every case (`make faults`)
    python -m tests.fault_corpus --cheap       # the cases that load no model (tests/test_fault_corpus.py)
    python -m tests.fault_corpus -k zim --json results.json

Each case makes its own damage in a temporary folder (a generated three-book library built without a
model, broken files, FIFOs, symlinks, odd file names, bad configs and environment variables, local HTTP
servers that hang, trickle, fail or answer garbage: ``tests/servers.py``; corrupt ZIM clusters as
``tests/test_backends_zim.py`` makes them), runs ``folio`` with a timeout under an empty temporary
``HOME`` and working directory, and checks:

- the outcome: ``error`` (non-zero exit, stderr exactly one ``folio: ...`` line naming what the case
  says, never ``internal error``), ``degraded`` (exit 0 and a note or a ``folio:`` line naming it), ``ok``
  (exit 0), ``interrupt`` (exit 130, ``folio: interrupted``) or ``pipe`` (exit 141, nothing on stderr);
- no ``Traceback`` in stdout or stderr;
- bounded time (each case's limit; the process is killed at limit + 30 s);
- the library intact: every file of the library folder hashed before and after: none may change or go,
  and no file may appear outside ``cache/`` (a derived cache created empty counts as intact; cases that
  repair or write say so), and, for a healthy library, ``folio books`` and a search still work after;
- nothing new under the temporary ``HOME`` nor in the working directory.

Classes (``Case.group``): library-state, library-path, inputs, settings, queries, servers, llm-replies,
zim, interrupt, home, pipe, holds, book-formats, calibre, service, mcp, concurrency, upgrade.
``--cheap`` cases load no encoder (lexical search, generated
library); the others ingest a real book or load the encoder. Limitations: read-only library cases run
as the user ``nobody`` (``setpriv``) and are skipped when that is not possible; timings are wall time
on a shared machine, so the limits are generous (the deadline cases measure inside the process).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.conftest import BOOKS, REPO_DIR, ZIMS

WP100 = ZIMS / "wikipedia_en_100_mini_2022-10.zim"
RC_MINI = ZIMS / "wikipedia_en_ray_charles_mini_2020-03.zim"
ALICE_EPUB = BOOKS / "epub/carroll_alice-in-wonderland_abridged-pg19033.epub"
TIME_MACHINE = BOOKS / "txt/pg35_wells_the-time-machine.txt"
ALICE_TXT = BOOKS / "txt/pg11_carroll_alices-adventures-in-wonderland.txt"

OUTCOMES = ("error", "degraded", "ok", "interrupt", "pipe", "doctor")
LEX = {"FOLIO_SEARCH_MODE": "lexical"}  # no encoder: lexical search over the generated library
WORDS = ["whale", "ship", "captain", "harpoon", "sailor", "island", "storm", "rope", "deck", "mast", "ocean"]


# --- what a case is -------------------------------------------------------------------------------
@dataclass
class Run:
    """One ``folio`` invocation and what it must give.

    ``expect``: the allowed outcomes (see the module docstring); ``names``: text the error line (or, for
    ``degraded``/``ok``/``doctor``, stdout + stderr) must hold; ``library``: the folder to hash before and
    after (``intact``: must be unchanged; ``healthy``: ``folio books`` and a search must work after);
    ``limit``: seconds; ``interrupt_after``: send SIGINT after so many seconds (or when ``interrupt_when``
    returns true); ``stdout``: ``pipe`` (captured), ``closed`` (a pipe whose reader has gone) or ``full``
    (``/dev/full``); ``user``: run as ``nobody``; ``timed``: run the command twice in one process (a warm
    up against ``warm_args``) and check the second's own seconds against ``limit``."""

    args: list[str | bytes]
    expect: tuple[str, ...]
    names: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    library: Path | None = None
    intact: bool = True
    healthy: bool = False
    limit: float = 60.0
    interrupt_after: float | None = None
    interrupt_when: Callable[[], bool] | None = None
    stdout: str = "pipe"
    user: str | None = None
    timed: bool = False
    warm_args: list[str] | None = None
    lines: int = 1  # how many ``folio:`` lines an error gives (one per failed input)
    stdout_check: Callable[[str], str | None] | None = None  # what else is wrong with stdout, or None
    caches_may_grow: bool = False  # an interrupted ingest keeps the whole cache entries of its work
    stdin: bytes | None = None  # what the command reads on stdin (None: /dev/null)


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    build: Callable[[Ctx], Run]
    cheap: bool

    @property
    def key(self) -> str:
        return f"{self.group}/{self.name}"


CASES: list[Case] = []


def case(group: str, name: str, cheap: bool = True) -> Callable[[Callable[[Ctx], Run]], Callable[[Ctx], Run]]:
    def register(build: Callable[[Ctx], Run]) -> Callable[[Ctx], Run]:
        CASES.append(Case(group, name, build, cheap))
        return build

    return register


def cases(group: str, table: dict[str, tuple[Callable[[Ctx], Run], bool]]) -> None:
    for name, (build, cheap) in table.items():
        CASES.append(Case(group, name, build, cheap))


@dataclass
class Result:
    key: str
    group: str
    passed: bool
    problems: list[str]
    seconds: float
    returncode: int | None
    stderr: str
    skipped: str | None = None


# --- the shared setting of a run -----------------------------------------------------------------------
class Ctx:
    """A case's folder and the corpus's shared templates (generated library, real library, servers)."""

    def __init__(self, root: Path, shared: Shared) -> None:
        self.root = root
        self.shared = shared
        self.home = root / "home"
        self.cwd = root / "cwd"
        self.home.mkdir()
        self.cwd.mkdir()
        self.stack = contextlib.ExitStack()

    def path(self, name: str) -> Path:
        return self.root / name

    def lib(self) -> Path:
        """A private copy of the generated three-book library."""
        target = self.root / "lib"
        shutil.copytree(self.shared.generated(), target, symlinks=True)
        return target

    def real_lib(self) -> Path:
        """A private copy of the real library (the abridged Alice EPUB, ingested with the encoder)."""
        target = self.root / "real-lib"
        shutil.copytree(self.shared.real(), target, symlinks=True)
        return target

    def book_ids(self, lib: Path) -> list[str]:
        from tests.test_hardening_cli import book_ids

        return book_ids(lib)

    def sql(self, lib: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
        from tests.test_hardening_cli import damage_row

        damage_row(lib, statement, params)

    def serve(self, server: Any) -> Any:
        """Keep a test server up for the case's run (stopped after it)."""
        return self.stack.enter_context(server)


class Shared:
    """Templates built once per corpus run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._generated: Path | None = None
        self._real: Path | None = None

    def generated(self) -> Path:
        if self._generated is None:
            from folio.nodes.core.types import ConceptMap
            from tests.test_library_index import build_library, synthetic_book

            path = self.root / "template-generated"
            books = []
            for seed, title in enumerate(("Alpha", "Beta", "Gamma")):
                parts = [
                    [
                        " ".join(WORDS[(seed + i * j) % len(WORDS)] for j in range(40)) + f" part {i}"
                        for i in range(3)
                    ]
                    for _ in range(2)
                ]
                b = synthetic_book(title, parts)
                cmap = ConceptMap(book_id=b.book_id, entities=(), themes=(), events=(), version=1).to_json()
                books.append(type(b)(b.descriptor, b.chapters, b.chunks, b.windows, b.vectors, cmap))
            build_library(path, books).close()
            for leftover in self.root.glob("template-generated-staged-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            self._generated = path
        return self._generated

    def real(self) -> Path:
        if self._real is None:
            path = self.root / "template-real"
            out = subprocess.run(
                [*folio_command(), "ingest", str(ALICE_EPUB), "--quiet", "--library", str(path)],
                capture_output=True,
                env=base_env(self.root),
                timeout=900,
            )
            if out.returncode != 0:
                raise RuntimeError(f"the real library did not ingest: {out.stderr.decode()[-500:]}")
            self._real = path
        return self._real


def folio_command() -> list[str]:
    """The installed ``folio`` console script beside this interpreter, else ``python -m`` the CLI."""
    script = Path(sys.executable).parent / "folio"
    return [str(script)] if script.exists() else [sys.executable, "-m", "folio.dataflows.cli"]


def base_env(home: Path) -> dict[str, str]:
    """The environment of a case: the caller's without FOLIO_* and XDG_* variables, HOME set to an empty
    folder, offline model hubs, no Hamilton telemetry."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FOLIO_", "XDG_")) and k not in ("MPLCONFIGDIR", "HF_HOME", "PYTHONPATH")
    }
    env.update(
        HOME=str(home),
        HAMILTON_TELEMETRY_ENABLED="false",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_DIR), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


def snapshot(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (relative name -> hash of its bytes, or ``dir``/``link``/``special``);
    SQLite's shared-memory index (``-shm``) and the writer's ``.lock`` aside, which any reader or
    writer may touch. A path that is not a folder is one entry, ``""``."""
    if not path.exists() and not path.is_symlink():
        return {}
    if not path.is_dir():
        return {"": _digest(path)}
    return {
        str(p.relative_to(path)): _digest(p)
        for p in sorted(path.rglob("*"))
        if not p.name.endswith("-shm") and p.name != ".lock"
    }


def _digest(p: Path) -> str:
    if p.is_symlink():
        return "link"
    if p.is_dir():
        return "dir"
    if not p.is_file():
        return "special"
    return hashlib.sha256(p.read_bytes()).hexdigest()


def library_changes(before: dict[str, str], after: dict[str, str], caches: bool = False) -> list[str]:
    """What a command changed in a library it must leave intact: an existing file changed or gone, or a
    new file outside ``cache/`` (a derived cache created empty, and empty folders, do not count; with
    ``caches``, nothing under ``cache/`` counts)."""
    changed = [
        k or "." for k, v in before.items() if after.get(k) != v and not (caches and k.startswith("cache/"))
    ]
    new = [k for k, v in after.items() if k not in before and v != "dir" and not k.startswith("cache/")]
    return changed + [f"new {k}" for k in new]


def new_entries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# --- running one case -----------------------------------------------------------------------------------
TIMED = (
    "import sys, time\nfrom folio.dataflows.cli import main\n"
    "warm = sys.argv[1:sys.argv.index('--')]; argv = sys.argv[sys.argv.index('--') + 1:]\n"
    "main(warm)\n"
    "started = time.monotonic(); rc = main(argv)\n"
    "print(f'FAULT-CORPUS-SECONDS {time.monotonic() - started:.2f}', file=sys.stderr, flush=True)\n"
    "sys.exit(rc)\n"
)


def _command(run: Run) -> list[str | bytes]:
    if run.timed:
        return [sys.executable, "-c", TIMED, *(run.warm_args or ["--version"]), "--", *run.args]
    return [*folio_command(), *run.args]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _as_nobody(command: list[str | bytes]) -> list[str | bytes]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", *command]


def run_case(c: Case, shared: Shared, keep: bool = False) -> Result:
    root = Path(tempfile.mkdtemp(prefix=f"fault-{c.group}-", dir=shared.root))
    ctx = Ctx(root, shared)
    started = time.monotonic()
    try:
        with ctx.stack:
            try:
                run = c.build(ctx)
            except Skip as why:
                return Result(c.key, c.group, True, [], 0.0, None, "", skipped=str(why))
            return _execute(c, ctx, run)
    except Exception as exc:  # a corpus bug: reported as a failed case, the others go on
        return Result(c.key, c.group, False, [f"corpus error: {exc!r}"], time.monotonic() - started, None, "")
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


class Skip(Exception):
    """A case that cannot run on this machine (says why)."""


def _execute(c: Case, ctx: Ctx, run: Run) -> Result:
    env = {**base_env(ctx.home), **run.env}
    before = snapshot(run.library) if run.library is not None else {}
    command = _command(run)
    if run.user:
        command = _as_nobody(command)
        for p in (ctx.root, ctx.home, ctx.cwd):
            os.chmod(p, 0o755)
        os.chown(ctx.home, 65534, 65534)
        os.chown(ctx.cwd, 65534, 65534)
    stdout: Any = subprocess.PIPE
    closers: list[int] = []
    if run.stdout == "closed":
        read, write = os.pipe()
        os.close(read)
        stdout, closers = write, [write]
    elif run.stdout == "full":
        stdout = open("/dev/full", "wb")  # noqa: SIM115 - closed below
    started = time.monotonic()
    proc = subprocess.Popen(
        command,
        stdout=stdout,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL if run.stdin is None else subprocess.PIPE,
        env=env,
        cwd=ctx.cwd,
        preexec_fn=_default_sigint,  # a runner started in the background ignores SIGINT: not its cases
    )
    for fd in closers:
        os.close(fd)
    if run.stdout == "full":
        stdout.close()
    problems: list[str] = []
    if run.interrupt_after is not None or run.interrupt_when is not None:
        wait_until = started + (run.interrupt_after or run.limit)
        while proc.poll() is None and time.monotonic() < wait_until:
            if run.interrupt_when is not None and run.interrupt_when():
                break
            time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        else:
            problems.append("ended before it could be interrupted")
    try:
        out, err = proc.communicate(input=run.stdin, timeout=run.limit + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        problems.append(f"did not end within {run.limit + 30:.0f} s (killed)")
    seconds = time.monotonic() - started
    stdout_text = (out or b"").decode("utf-8", "replace")
    stderr_text = err.decode("utf-8", "replace")
    if run.timed:
        lines = [line for line in stderr_text.splitlines() if line.startswith("FAULT-CORPUS-SECONDS ")]
        stderr_text = "\n".join(x for x in stderr_text.splitlines() if not x.startswith("FAULT-CORPUS-")) + (
            "\n" if stderr_text.strip() else ""
        )
        if not lines:
            problems.append("the timed command printed no time")
        else:
            own = float(lines[-1].split()[1])
            if own > run.limit:
                problems.append(f"the command took {own:.1f} s, more than its {run.limit:g} s")
            seconds = own
    elif seconds > run.limit:
        problems.append(f"took {seconds:.1f} s, more than its {run.limit:g} s")
    problems += outcome_problems(run, proc.returncode, stdout_text, stderr_text)
    if run.stdout_check is not None and (why := run.stdout_check(stdout_text)):
        problems.append(why)
    if run.library is not None and run.intact:
        changes = library_changes(before, snapshot(run.library), run.caches_may_grow)
        if changes:
            problems.append(f"the library changed: {changes[:4]}")
    if run.library is not None and run.healthy and not problems:
        problems += _still_works(ctx, run.library)
    home_new, cwd_new = new_entries(ctx.home), new_entries(ctx.cwd)
    if home_new:
        problems.append(f"wrote under HOME: {home_new[:5]}")
    if cwd_new:
        problems.append(f"wrote in the working directory: {cwd_new[:5]}")
    return Result(
        c.key, c.group, not problems, problems, seconds, proc.returncode, stderr_text.strip()[-600:]
    )


def outcome_problems(run: Run, code: int | None, out: str, err: str) -> list[str]:
    """What is wrong with an exit code, stdout and stderr for ``run``'s expected outcomes (empty: fine)."""
    problems: list[str] = []
    if "Traceback" in out or "Traceback" in err:
        return ["a traceback reached the user"]
    if "internal error" in err:
        return [f"an internal error: {err.strip().splitlines()[-1][:200]}"]
    err_lines = [line for line in err.splitlines() if line.strip()]
    stray = [line for line in err_lines if not line.startswith("folio: ")]
    for expect in run.expect:
        why = _why_not(expect, run, code, out, err_lines, stray)
        if why is None:
            return []
        problems.append(f"not {expect}: {why}")
    return ["; ".join(problems)]


def _why_not(
    expect: str, run: Run, code: int | None, out: str, err_lines: list[str], stray: list[str]
) -> str | None:
    text = out + "\n" + "\n".join(err_lines)
    missing = [n for n in run.names if n not in text]
    if expect == "error":
        if not code or code in (130, 141):
            return f"exit {code}"
        if stray or len(err_lines) != run.lines:
            return f"stderr is not {run.lines} folio: line(s): {err_lines[:3]!r}"
        line_missing = [n for n in run.names if n not in "\n".join(err_lines)]
        return f"the line does not name {line_missing}" if line_missing else None
    if expect == "interrupt":
        if code != 130 or err_lines[-1:] != ["folio: interrupted"]:
            return f"exit {code}, stderr {err_lines[-2:]!r}"
        return f"stray stderr {stray[:2]!r}" if stray else None
    if expect == "pipe":
        return None if code == 141 and not err_lines else f"exit {code}, stderr {err_lines[:2]!r}"
    if expect == "doctor":  # a report on stdout, exit 0 (healthy) or 1 (the user must act)
        if code not in (0, 1) or stray:
            return f"exit {code}, stderr {err_lines[:2]!r}"
        return f"does not name {missing}" if missing else None
    if code != 0:
        return f"exit {code}: {err_lines[-1:]}"
    if stray:
        return f"stray stderr {stray[:2]!r}"
    if missing:
        return f"does not name {missing}"
    if expect == "degraded" and not (err_lines or "note:" in out or '"notes"' in out):
        return "no note nor folio: line"
    return None


STILL_WORKS = (
    "import io, json, sys, contextlib\nfrom folio.dataflows.cli import main\nlib = sys.argv[1]\n"
    "buf = io.StringIO()\n"
    "with contextlib.redirect_stdout(buf): rc = main(['books', '--json', '--library', lib])\n"
    "assert rc == 0 and json.loads(buf.getvalue()), ('books', rc)\n"
    "with contextlib.redirect_stdout(buf): rc = main(['search', 'whale harpoon', '--mode', 'lexical', "
    "'--library', lib])\n"
    "assert rc == 0, ('search', rc)\n"
)


def _still_works(ctx: Ctx, library: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", STILL_WORKS, str(library)],
        capture_output=True,
        env=base_env(ctx.home),
        cwd=ctx.cwd,
        timeout=300,
    )
    if out.returncode != 0:
        return [f"afterwards books/search fail: {out.stderr.decode('utf-8', 'replace').strip()[-300:]}"]
    return []


# --- servers that misbehave ------------------------------------------------------------------------------
class FaultHTTPServer:
    """Answers every GET and POST with ``status`` and ``body`` (after ``delay`` seconds); ``url``."""

    def __new__(
        cls, status: int = 200, body: bytes = b"", content_type: str = "text/html", delay: float = 0.0
    ):
        from tests.servers import _BackgroundServer

        class Server(_BackgroundServer):
            def __init__(self) -> None:
                class Handler(BaseHTTPRequestHandler):
                    def log_message(self, format: str, *args: Any) -> None:
                        pass

                    def _answer(self) -> None:
                        length = int(self.headers.get("Content-Length") or 0)
                        if length:
                            self.rfile.read(length)
                        time.sleep(delay)
                        try:
                            self.send_response(status)
                            self.send_header("Content-Type", content_type)
                            self.send_header("Content-Length", str(len(body)))
                            self.end_headers()
                            self.wfile.write(body)
                        except (BrokenPipeError, ConnectionResetError):
                            pass

                    do_GET = _answer
                    do_POST = _answer

                self._serve(Handler)

        return Server()


class TricklingServer:
    """GET and POST both answered by a header that never ends, one byte per ``interval`` seconds."""

    def __new__(cls, interval: float = 0.2, gives_up_after: float = 120.0):
        from tests.servers import TricklingHTTPServer

        server = TricklingHTTPServer(interval=interval, gives_up_after=gives_up_after)
        handler = server._server.RequestHandlerClass
        handler.do_POST = handler.do_GET  # type: ignore[attr-defined]
        return server


def llm_env(url: str, **more: str) -> dict[str, str]:
    return {
        "FOLIO_LLM": "openai",
        "FOLIO_LLM_BASE_URL": url,
        "FOLIO_LLM_MODEL": "scripted-model",
        **LEX,
        **more,
    }


def scripted(ctx: Ctx, reply: Any, n: int = 40) -> Any:
    from tests.servers import ScriptedLLMServer

    return ctx.serve(ScriptedLLMServer([reply] * n))


def raw_reply(message: Any = None, choices: Any = None) -> Any:
    from tests.servers import Reply

    if choices is None:
        choices = [{"index": 0, "message": message, "finish_reason": "stop"}]
    return Reply(body=json.dumps({"id": "x", "object": "chat.completion", "choices": choices}))


# --- damage makers ----------------------------------------------------------------------------------------
def garbage(path: Path, size: int = 64 * 1024) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def overwrite(path: Path, offset: int, size: int) -> Path:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(os.urandom(size))
    return path


def truncate(path: Path, fraction: float) -> Path:
    with open(path, "r+b") as f:
        f.truncate(int(path.stat().st_size * fraction))
    return path


def vectors_file(lib: Path) -> Path:
    return next(lib.glob("vectors-*.usearch"))


def epub(ctx: Ctx, name: str, files: dict[str, str | bytes], container: bool = True) -> Path:
    from tests.test_parsing import _epub_bytes, _write_zip

    return _write_zip(ctx.path(name), _epub_bytes(files) if container else files)


def tiny_epub_files(body: str | None = None) -> dict[str, str | bytes]:
    from tests.test_parsing import _opf, _xhtml

    story = "The fox ran over the hill and down to the river, where the water was cold and clear. " * 6
    return {
        "OEBPS/content.opf": _opf(
            '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>', '<itemref idref="one"/>'
        ),
        "OEBPS/one.xhtml": _xhtml(body if body is not None else f"<h1>One</h1><p>{story}</p>"),
    }


def damaged_zim(ctx: Ctx, where: str) -> Path:
    from tests.test_backends_zim import _damaged_zim

    return _damaged_zim(ctx.root, "damaged", where)


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def unix_socket(ctx: Ctx, path: Path) -> Path:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    ctx.stack.callback(sock.close)
    return path


def can_run_as_nobody() -> bool:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            sys.executable,
            "-c",
            "import folio",
        ],
        capture_output=True,
        env=base_env(Path("/nonexistent")),
    )
    return probe.returncode == 0


def read_only_library(ctx: Ctx) -> Path:
    """The generated library, owned by root and readable by all: read-only for ``nobody``."""
    if not can_run_as_nobody():
        raise Skip("cannot run as nobody here (not root, no setpriv, or the repo is not readable by all)")
    lib = ctx.lib()
    for p in [lib, *lib.rglob("*")]:
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return lib


# === the cases ============================================================================================
def _lib_args(lib: Path, *args: str) -> list[str | bytes]:
    return [*args, "--library", str(lib)]


# --- 1. damaged library state -------------------------------------------------------------------------------
def _descriptor(raw: str, command: tuple[str, ...]) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        damaged = ctx.book_ids(lib)[0]
        ctx.sql(
            lib, "UPDATE books SET descriptor = ? WHERE book_id = ?", (raw.replace("BOOK", damaged), damaged)
        )
        return Run(_lib_args(lib, *command), ("degraded",), names=(damaged,), env=LEX, library=lib)

    return build


def _library_file(
    damage: Callable[[Path], object], command: tuple[str, ...], names: tuple[str, ...] = ()
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        damage(lib)
        return Run(
            _lib_args(lib, *command),
            ("error",),
            names=names or (str(lib / "library.sqlite"),),
            env=LEX,
            library=lib,
        )

    return build


def _sqlite_dir(lib: Path) -> None:
    (lib / "library.sqlite").unlink()
    (lib / "library.sqlite").mkdir()


def _foreign_sqlite(lib: Path) -> None:
    import sqlite3

    (lib / "library.sqlite").unlink()
    con = sqlite3.connect(lib / "library.sqlite")
    con.execute("CREATE TABLE notes(x)")
    con.commit()
    con.close()


def _sqlite_doctor(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(lib / "library.sqlite")
    return Run(_lib_args(lib, "doctor"), ("doctor",), names=("library.sqlite", "folio ingest"), library=lib)


def _vectors(
    damage: Callable[[Path], object], command: tuple[str, ...], expect: tuple[str, ...], real: bool
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.real_lib() if real else ctx.lib()
        damage(vectors_file(lib))
        return Run(
            _lib_args(lib, *command), expect, env={} if real else LEX, library=lib, intact=False, limit=120
        )

    return build


def _cache_damage(lib: Path, which: str) -> Path:
    from folio.nodes.backends.embedding_cache import EmbeddingCache

    if which == "embeddings":
        EmbeddingCache(lib / "cache" / "embeddings").close()
        return garbage(lib / "cache" / "embeddings" / "cache.db", 8192)
    hamilton = lib / "cache" / "hamilton"
    hamilton.mkdir(parents=True, exist_ok=True)
    import diskcache

    diskcache.Cache(str(hamilton)).close()
    return garbage(hamilton / "cache.db", 8192)


def _cache_case(
    which: str, command: tuple[str, ...], expect: tuple[str, ...], real: bool = False
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.real_lib() if real else ctx.lib()
        damaged = _cache_damage(lib, which)
        args = [a.replace("BOOK", str(TIME_MACHINE)) for a in command]
        return Run(
            _lib_args(lib, *args),
            expect,
            names=(str(damaged.parent),) if expect == ("error",) else (),
            library=lib,
            intact=expect[0] == "error",
            limit=400 if real else 60,
        )

    return build


@case("library-state", "catalog-garbage-books")
def _catalog_books(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(lib / "catalog.duckdb", 8192)
    return Run(_lib_args(lib, "books"), ("ok",), library=lib)


@case("library-state", "catalog-garbage-ingest", cheap=False)
def _catalog_ingest(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    garbage(lib / "catalog.duckdb", 8192)
    return Run(
        _lib_args(lib, "ingest", str(ALICE_TXT), "--quiet"),
        ("ok", "error"),
        library=lib,
        intact=False,
        limit=400,
    )


@case("library-state", "catalog-is-a-directory-remove")
def _catalog_dir(ctx: Ctx) -> Run:
    lib = ctx.lib()
    (lib / "catalog.duckdb").unlink()
    (lib / "catalog.duckdb").mkdir()
    book = ctx.book_ids(lib)[0]
    return Run(_lib_args(lib, "remove", book), ("ok", "error"), library=lib, intact=False)


@case("library-state", "wal-garbage-books")
def _wal(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(lib / "library.sqlite-wal", 32 * 1024)
    return Run(_lib_args(lib, "books"), ("ok", "error"), library=lib, intact=False)


@case("library-state", "orphan-rows-doctor-repairs")
def _orphans(ctx: Ctx) -> Run:
    lib = ctx.lib()
    ctx.sql(lib, "DELETE FROM books WHERE book_id = ?", (ctx.book_ids(lib)[0],))
    return Run(
        _lib_args(lib, "doctor"), ("doctor",), names=("removed",), library=lib, intact=False, healthy=True
    )


@case("library-state", "fts-damaged-search-then-doctor")
def _fts(ctx: Ctx) -> Run:
    lib = ctx.lib()
    ctx.sql(lib, "INSERT INTO chunks_fts(chunks_fts, rowid, text) VALUES ('delete', 1, 'not its text')")
    return Run(
        _lib_args(lib, "doctor"), ("doctor",), names=("rebuilt",), library=lib, intact=False, healthy=True
    )


@case("library-state", "windows-deleted-doctor-names-book")
def _windows(ctx: Ctx) -> Run:
    lib = ctx.lib()
    book = ctx.book_ids(lib)[0]
    ctx.sql(lib, "DELETE FROM windows WHERE book_id = ?", (book,))
    return Run(_lib_args(lib, "doctor"), ("doctor",), names=(book, "folio remove"), library=lib, intact=False)


@case("library-state", "windows-deleted-search")
def _windows_search(ctx: Ctx) -> Run:
    """(The vector index no longer matches the stored windows: the search rebuilds it, derived data.)"""
    lib = ctx.lib()
    ctx.sql(lib, "DELETE FROM windows WHERE book_id = ?", (ctx.book_ids(lib)[0],))
    return Run(_lib_args(lib, "search", "whale"), ("ok", "degraded"), env=LEX, library=lib, intact=False)


@case("library-state", "concept-map-damaged-concepts")
def _cmap(ctx: Ctx) -> Run:
    lib = ctx.lib()
    ctx.sql(lib, "UPDATE books SET concept_map = X'7b7b' WHERE book_id = ?", (ctx.book_ids(lib)[0],))
    return Run(_lib_args(lib, "concepts", "whale"), ("ok", "degraded"), library=lib)


@case("library-state", "concept-map-damaged-ask")
def _cmap_ask(ctx: Ctx) -> Run:
    lib = ctx.lib()
    ctx.sql(lib, "UPDATE books SET concept_map = X'7b7b' WHERE book_id = ?", (ctx.book_ids(lib)[0],))
    return Run(
        _lib_args(lib, "ask", "Who was the captain of the ship?"),
        ("ok", "degraded"),
        env=LEX,
        library=lib,
        limit=120,
    )


@case("library-state", "descriptor-damaged-ask")
def _desc_ask(ctx: Ctx) -> Run:
    lib = ctx.lib()
    book = ctx.book_ids(lib)[0]
    ctx.sql(lib, "UPDATE books SET descriptor = '{not json' WHERE book_id = ?", (book,))
    return Run(
        _lib_args(lib, "ask", "Who was the captain of the ship?"),
        ("ok", "degraded"),
        names=(book,),
        env=LEX,
        library=lib,
        limit=120,
    )


@case("library-state", "descriptor-damaged-remove-then-healthy")
def _desc_remove(ctx: Ctx) -> Run:
    lib = ctx.lib()
    book = ctx.book_ids(lib)[0]
    ctx.sql(lib, "UPDATE books SET descriptor = '{not json' WHERE book_id = ?", (book,))
    return Run(
        _lib_args(lib, "remove", book), ("ok",), names=(book,), library=lib, intact=False, healthy=True
    )


@case("library-state", "legacy-book-json-damaged")
def _legacy(ctx: Ctx) -> Run:
    from tests.test_library_index import synthetic_book, write_book_dir

    lib = ctx.path("legacy")
    for i, title in enumerate(("Alpha", "Beta")):
        parts = [[" ".join(WORDS[(i + j) % len(WORDS)] for j in range(30))]]
        write_book_dir(synthetic_book(title, parts), lib / "books" / f"{title.lower()}", legacy=True)
    (lib / "books" / "alpha" / "book.json").write_text("{damaged")
    return Run(_lib_args(lib, "books"), ("degraded", "ok"), names=("alpha",), library=lib, intact=False)


@case("library-state", "staging-leftover-books")
def _staging(ctx: Ctx) -> Run:
    lib = ctx.lib()
    (lib / "staging" / "half-book-1234").mkdir(parents=True, exist_ok=True)
    garbage(lib / "staging" / "half-book-1234" / "book.sqlite", 4096)
    return Run(_lib_args(lib, "books"), ("ok",), library=lib)


@case("library-state", "staging-leftover-remove-cleans")
def _staging_remove(ctx: Ctx) -> Run:
    lib = ctx.lib()
    (lib / "staging" / "half-book-1234").mkdir(parents=True, exist_ok=True)
    garbage(lib / "staging" / "half-book-1234" / "book.sqlite", 4096)
    return Run(
        _lib_args(lib, "remove", ctx.book_ids(lib)[0]), ("ok",), library=lib, intact=False, healthy=True
    )


@case("library-state", "experiments-db-garbage-show")
def _experiments(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(lib / "experiments.duckdb", 8192)
    return Run(_lib_args(lib, "experiment", "show"), ("error",), names=("experiments.duckdb",), library=lib)


@case("library-state", "vectors-garbage-doctor-repairs")
def _vec_doctor(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(vectors_file(lib), 10_000)
    return Run(
        _lib_args(lib, "doctor"), ("doctor",), names=("rebuilt",), library=lib, intact=False, healthy=True
    )


@case("library-state", "vectors-garbage-books")
def _vec_books(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(vectors_file(lib), 10_000)
    return Run(_lib_args(lib, "books"), ("ok",), library=lib, intact=False)


@case("library-state", "two-damaged-books-doctor-names-both")
def _two_damaged(ctx: Ctx) -> Run:
    lib = ctx.lib()
    a, b, _ = ctx.book_ids(lib)
    ctx.sql(lib, "UPDATE books SET descriptor = '[1]' WHERE book_id = ?", (a,))
    ctx.sql(lib, "UPDATE books SET concept_map = X'00' WHERE book_id = ?", (b,))
    return Run(_lib_args(lib, "doctor"), ("doctor",), names=(a, b), library=lib, intact=False)


cases(
    "library-state",
    {
        "descriptor-not-json-books": (_descriptor("{not json", ("books",)), True),
        "descriptor-not-object-books": (_descriptor("[1, 2]", ("books",)), True),
        "descriptor-no-title-books": (_descriptor('{"book_id": "BOOK", "title": null}', ("books",)), True),
        "descriptor-other-book-search": (
            _descriptor('{"book_id": "someone-else", "title": "x"}', ("search", "whale")),
            True,
        ),
        "descriptor-chapters-not-list-search": (
            _descriptor(
                '{"book_id": "BOOK", "title": "T", "author": "A", "chapters": 5}', ("search", "whale")
            ),
            True,
        ),
        "sqlite-garbage-books": (
            _library_file(lambda lib: garbage(lib / "library.sqlite"), ("books",)),
            True,
        ),
        "sqlite-garbage-search": (
            _library_file(lambda lib: garbage(lib / "library.sqlite"), ("search", "whale")),
            True,
        ),
        "sqlite-garbage-remove": (
            _library_file(lambda lib: garbage(lib / "library.sqlite"), ("remove", "alpha")),
            True,
        ),
        "sqlite-garbage-ask": (
            _library_file(lambda lib: garbage(lib / "library.sqlite"), ("ask", "Who is the captain?")),
            True,
        ),
        "sqlite-garbage-concepts": (
            _library_file(lambda lib: garbage(lib / "library.sqlite"), ("concepts", "whale")),
            True,
        ),
        "sqlite-malformed-search": (
            _library_file(lambda lib: overwrite(lib / "library.sqlite", 4096, 16384), ("search", "whale")),
            True,
        ),
        "sqlite-malformed-books": (
            _library_file(lambda lib: overwrite(lib / "library.sqlite", 4096, 16384), ("books",)),
            True,
        ),
        "sqlite-truncated-books": (
            _library_file(lambda lib: truncate(lib / "library.sqlite", 0.5), ("books",)),
            True,
        ),
        "sqlite-truncated-search": (
            _library_file(lambda lib: truncate(lib / "library.sqlite", 0.5), ("search", "whale")),
            True,
        ),
        "sqlite-is-a-directory-books": (_library_file(_sqlite_dir, ("books",)), True),
        "sqlite-of-another-program-books": (_library_file(_foreign_sqlite, ("books",)), True),
        "sqlite-of-another-program-search": (_library_file(_foreign_sqlite, ("search", "whale")), True),
        "sqlite-garbage-doctor": (_sqlite_doctor, True),
        "vectors-garbage-search-semantic": (
            _vectors(
                lambda p: garbage(p, 10_000),
                ("search", "alice rabbit", "--mode", "semantic"),
                ("ok", "degraded", "error"),
                True,
            ),
            False,
        ),
        "vectors-missing-search-hybrid": (
            _vectors(lambda p: p.unlink(), ("search", "alice rabbit"), ("ok", "degraded"), True),
            False,
        ),
        "vectors-truncated-ask": (
            _vectors(
                lambda p: truncate(p, 0.5), ("ask", "Who is the White Rabbit?"), ("ok", "degraded"), True
            ),
            False,
        ),
        "vectors-is-a-directory-search-semantic": (
            _vectors(
                lambda p: (p.unlink(), p.mkdir()),
                ("search", "alice rabbit", "--mode", "semantic"),
                ("ok", "degraded", "error"),
                True,
            ),
            False,
        ),
        "embedding-cache-garbage-cache-info": (
            _cache_case("embeddings", ("cache", "info"), ("error",)),
            True,
        ),
        "hamilton-cache-garbage-cache-info": (
            _cache_case("hamilton", ("cache", "info"), ("error", "ok")),
            True,
        ),
        "embedding-cache-garbage-doctor": (_cache_case("embeddings", ("doctor",), ("doctor",)), True),
        "embedding-cache-garbage-ingest": (
            _cache_case("embeddings", ("ingest", "BOOK", "--quiet"), ("ok", "error"), real=True),
            False,
        ),
        "hamilton-cache-garbage-ingest": (
            _cache_case("hamilton", ("ingest", "BOOK", "--quiet"), ("ok",), real=True),
            False,
        ),
    },
)


# --- 2. library path faults ---------------------------------------------------------------------------------
def _library_is_file(command: tuple[str, ...]) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        not_a_dir = ctx.path("library.txt")
        not_a_dir.write_text("hello")
        book = ctx.path("book.txt")
        book.write_text("A BOOK\n\nSome words about a whale and a ship.\n")
        args = [a.replace("BOOK", str(book)) for a in command]
        return Run(
            _lib_args(not_a_dir, *args),
            ("error",),
            names=(str(not_a_dir), "not a directory"),
            env=LEX,
            library=not_a_dir,
        )

    return build


def _read_only(
    command: tuple[str, ...], expect: tuple[str, ...], names: tuple[str, ...] = ()
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = read_only_library(ctx)
        book = ctx.path("book.txt")
        book.write_text("A BOOK\n\n" + "Some words about a whale and a ship on the sea. " * 50 + "\n")
        os.chmod(book, 0o644)
        args = [a.replace("BOOK", str(book)).replace("FIRST", ctx.book_ids(lib)[0]) for a in command]
        return Run(_lib_args(lib, *args), expect, names=names, env=LEX, library=lib, user="nobody")

    return build


cases(
    "library-path",
    {
        f"library-is-a-file-{c[0]}-{c[1].split()[0].lower() if len(c) > 1 else ''}".rstrip("-"): (
            _library_is_file(c),
            True,
        )
        for c in (
            ("books",),
            ("search", "whale"),
            ("ingest", "BOOK", "--quiet"),
            ("doctor",),
            ("cache", "info"),
            ("cache", "clear"),
            ("ask", "Who is the captain?"),
            ("remove", "alpha"),
            ("concepts", "whale"),
            ("eval", "BOOK"),
        )
    }
    | {
        "read-only-books": (_read_only(("books",), ("ok",)), True),
        "read-only-search": (_read_only(("search", "whale"), ("ok",)), True),
        "read-only-ask": (_read_only(("ask", "Who was the captain of the ship?"), ("ok", "degraded")), True),
        "read-only-cache-info": (_read_only(("cache", "info"), ("ok",)), True),
        "read-only-concepts": (_read_only(("concepts", "whale"), ("ok",)), True),
        "read-only-ingest": (_read_only(("ingest", "BOOK", "--quiet"), ("error",), ("cannot write",)), True),
        "read-only-cache-clear": (_read_only(("cache", "clear"), ("error",), ("cannot write",)), True),
        "read-only-remove": (_read_only(("remove", "FIRST"), ("error",), ("cannot write",)), True),
        "read-only-doctor": (_read_only(("doctor",), ("doctor", "error")), True),
    },
)


@case("library-path", "folio-library-env-is-a-file")
def _env_file(ctx: Ctx) -> Run:
    not_a_dir = ctx.path("library.txt")
    not_a_dir.write_text("hello")
    return Run(
        ["books"],
        ("error",),
        names=(str(not_a_dir),),
        env={"FOLIO_LIBRARY": str(not_a_dir)},
        library=not_a_dir,
    )


@case("library-path", "library-under-a-file-books")
def _under_file(ctx: Ctx) -> Run:
    parent = ctx.path("plain.txt")
    parent.write_text("hello")
    return Run(
        ["books", "--library", str(parent / "lib")], ("error", "ok"), names=(str(parent),), library=parent
    )


@case("library-path", "library-under-a-file-ingest")
def _under_file_ingest(ctx: Ctx) -> Run:
    parent = ctx.path("plain.txt")
    parent.write_text("hello")
    return Run(
        ["ingest", str(ALICE_TXT), "--quiet", "--library", str(parent / "lib")],
        ("error",),
        names=(str(parent),),
        library=parent,
    )


@case("library-path", "library-is-dev-null")
def _dev_null(ctx: Ctx) -> Run:
    return Run(["books", "--library", "/dev/null"], ("error",), names=("/dev/null",))


@case("library-path", "library-is-a-fifo")
def _lib_fifo(ctx: Ctx) -> Run:
    path = fifo(ctx.path("lib.fifo"))
    return Run(["books", "--library", str(path)], ("error",), names=(str(path),), limit=20)


@case("library-path", "library-is-a-fifo-ingest")
def _lib_fifo_ingest(ctx: Ctx) -> Run:
    path = fifo(ctx.path("lib.fifo"))
    return Run(["ingest", str(ALICE_TXT), "--library", str(path)], ("error",), names=(str(path),), limit=20)


@case("library-path", "library-name-with-newline")
def _lib_newline(ctx: Ctx) -> Run:
    lib = ctx.lib()
    odd = ctx.path("my\nlib")
    lib.rename(odd)
    return Run(_lib_args(odd, "search", "whale"), ("ok",), env=LEX, library=odd)


@case("library-path", "library-name-not-utf8")
def _lib_bytes(ctx: Ctx) -> Run:
    lib = ctx.lib()
    odd = os.fsencode(ctx.root) + b"/lib-\xff\xfe"
    os.rename(lib, odd)
    # (refused in one line: SQLite and DuckDB take text paths; a limit the README states)
    return Run(
        [b"books", b"--library", odd],
        ("error",),
        names=("lib-\\xff\\xfe", "UTF-8"),
        library=Path(os.fsdecode(odd)),
    )


@case("library-path", "library-name-not-utf8-damaged")
def _lib_bytes_damaged(ctx: Ctx) -> Run:
    lib = ctx.lib()
    garbage(lib / "library.sqlite")
    odd = os.fsencode(ctx.root) + b"/lib-\xff\xfe"
    os.rename(lib, odd)
    return Run(
        [b"books", b"--library", odd], ("error",), names=("lib-\\xff\\xfe",), library=Path(os.fsdecode(odd))
    )


@case("library-path", "library-missing-search")
def _lib_missing(ctx: Ctx) -> Run:
    return Run(["search", "whale", "--library", str(ctx.path("nowhere"))], ("error", "ok"), env=LEX)


@case("library-path", "library-missing-books")
def _lib_missing_books(ctx: Ctx) -> Run:
    return Run(["books", "--library", str(ctx.path("nowhere"))], ("ok",))


@case("library-path", "library-empty-string")
def _lib_empty(ctx: Ctx) -> Run:
    return Run(["books", "--library", ""], ("error", "ok"))


@case("library-path", "library-path-too-long")
def _lib_long(ctx: Ctx) -> Run:
    return Run(["books", "--library", str(ctx.root / ("x" * 300) / "lib")], ("error", "ok"))


# --- 3. inputs that never end or are huge; broken book files ------------------------------------------------
def _ingest(
    make: Callable[[Ctx], Path | str | bytes],
    names: tuple[str, ...],
    limit: float = 60,
    env: dict[str, str] | None = None,
    lines: int = 1,
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        target = make(ctx)
        shown = names or (os.fsdecode(target) if isinstance(target, bytes) else str(target),)
        return Run(
            [
                "ingest",
                os.fsdecode(target) if isinstance(target, bytes) else str(target),
                "--quiet",
                "--library",
                str(lib),
            ],
            ("error",),
            names=shown,
            library=lib,
            limit=limit,
            env=env or {},
            lines=lines,
        )

    return build


def _sparse(name: str, size: int) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        path = ctx.path(name)
        with path.open("wb") as f:
            f.truncate(size)
        return path

    return make


def _write(name: str, data: bytes) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        path = ctx.path(name)
        path.write_bytes(data)
        return path

    return make


def _epub_of(
    name: str, files: Callable[[], dict[str, str | bytes]], container: bool = True
) -> Callable[[Ctx], Path]:
    return lambda ctx: epub(ctx, name, files(), container)


def _bomb(where: str) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        from tests.test_parsing import _entity_bomb_epub

        return _entity_bomb_epub(ctx.path(f"lol-{where}.epub"), where)

    return make


def _xxe(ctx: Ctx) -> Path:
    secret = ctx.path("secret.txt")
    secret.write_text("TOP SECRET")
    files = tiny_epub_files()
    files["OEBPS/one.xhtml"] = (
        f'<?xml version="1.0"?><!DOCTYPE html [<!ENTITY x SYSTEM "file://{secret}">]>'
        + str(files["OEBPS/one.xhtml"]).split("?>", 1)[1].replace("<h1>One</h1>", "<h1>&x;</h1>")
    )
    return epub(ctx, "xxe.epub", files)


def _folder(populate: Callable[[Ctx, Path], None]) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        folder = ctx.path("books")
        folder.mkdir()
        populate(ctx, folder)
        return folder

    return make


def _symlink_out(ctx: Ctx, folder: Path) -> None:
    outside = ctx.path("outside.txt")
    outside.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)
    (folder / "link.txt").symlink_to(outside)


def _zip_bomb() -> dict[str, str | bytes]:
    files = tiny_epub_files(f"<p>{'a' * 2_000_000}</p>")
    return files


def _rights() -> dict[str, str | bytes]:
    files = tiny_epub_files()
    files["META-INF/rights.xml"] = "<rights/>"
    return files


def _no_opf() -> dict[str, str | bytes]:
    files = tiny_epub_files()
    del files["OEBPS/content.opf"]
    return files


def _empty_spine() -> dict[str, str | bytes]:
    from tests.test_parsing import _opf

    files = tiny_epub_files()
    files["OEBPS/content.opf"] = _opf(
        '<item id="one" href="one.xhtml" media-type="application/xhtml+xml"/>', ""
    )
    return files


def _bad_container() -> dict[str, str | bytes]:
    files = {"mimetype": "application/epub+zip", "META-INF/container.xml": "<<< not xml"}
    files.update(tiny_epub_files())
    return files


def _truncated_epub(ctx: Ctx) -> Path:
    path = epub(ctx, "cut.epub", tiny_epub_files())
    truncate(path, 0.5)
    return path


def _zip_not_epub(ctx: Ctx) -> Path:
    path = ctx.path("archive.epub")
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.md", "hello " * 100)
    return path


def _gzip_txt(ctx: Ctx) -> Path:
    import gzip

    path = ctx.path("book.txt")
    path.write_bytes(gzip.compress(b"CHAPTER I\n\n" + b"Words about a whale. " * 500))
    return path


def _newline_name(ctx: Ctx) -> Path:
    path = ctx.path("bad\nname.txt")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    return path


def _bytes_name(ctx: Ctx) -> bytes:
    raw = os.fsencode(ctx.root) + b"/bad-\xff\xfe.txt"
    with open(raw, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + b"\0" * 100)
    return raw


def _long_name(ctx: Ctx) -> Path:
    path = ctx.path("b" * 250 + ".txt")
    path.write_bytes(b"\0" * 100)
    return path


def _unreadable(ctx: Ctx) -> Path:
    path = ctx.path("secret.txt")
    path.write_text("A BOOK\n\n" + "Words about a whale. " * 100)
    os.chmod(path, 0)
    return path


def _unreadable_case(ctx: Ctx) -> Run:
    """A book its reader may not read: as root every file is readable, so this runs as ``nobody``."""
    lib = read_only_library(ctx)
    for p in [lib, *lib.rglob("*")]:
        os.chown(p, 65534, 65534)
    path = _unreadable(ctx)
    return Run(
        ["ingest", str(path), "--quiet", "--library", str(lib)],
        ("error",),
        names=("secret.txt",),
        library=lib,
        user="nobody",
    )


def _link_to(target: str) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        link = ctx.path("book.txt")
        link.symlink_to(target)
        return link

    return make


def _link_to_fifo(ctx: Ctx) -> Path:
    pipe = fifo(ctx.path("pipe"))
    link = ctx.path("book.txt")
    link.symlink_to(pipe)
    return link


def _three_bad(ctx: Ctx, folder: Path) -> None:
    (folder / "a.txt").write_bytes(b"")
    (folder / "b.epub").write_text("not a zip")
    (folder / "c.txt").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 64)


cases(
    "inputs",
    {
        "fifo-txt": (_ingest(lambda ctx: fifo(ctx.path("pipe.txt")), ("FIFO",), limit=20), True),
        "fifo-epub": (_ingest(lambda ctx: fifo(ctx.path("pipe.epub")), ("FIFO",), limit=20), True),
        "dev-zero": (_ingest(lambda ctx: "/dev/zero", ("/dev/zero", "device"), limit=20), True),
        "dev-urandom": (_ingest(lambda ctx: "/dev/urandom", ("/dev/urandom",), limit=20), True),
        "dev-null": (_ingest(lambda ctx: "/dev/null", ("/dev/null",), limit=20), True),
        "unix-socket-txt": (
            _ingest(lambda ctx: unix_socket(ctx, ctx.path("sock.txt")), ("socket",), limit=20),
            True,
        ),
        "sparse-5gb-txt": (_ingest(_sparse("huge.txt", 5_000_000_000), ("too large",), limit=20), True),
        "sparse-300mb-epub": (_ingest(_sparse("huge.epub", 300_000_000), ("too large",), limit=20), True),
        "symlink-to-dev-zero": (_ingest(_link_to("/dev/zero"), ("book.txt",), limit=20), True),
        "symlink-to-fifo": (_ingest(_link_to_fifo, ("book.txt",), limit=20), True),
        "dangling-symlink": (_ingest(_link_to("/nonexistent/book.txt"), ("book.txt",)), True),
        "folder-symlink-leaving-it": (_ingest(_folder(_symlink_out), ("books",)), True),
        "folder-symlink-loop": (
            _ingest(_folder(lambda ctx, f: (f / "loop").symlink_to(f)), ("books",)),
            True,
        ),
        "folder-with-a-fifo": (
            _ingest(_folder(lambda ctx, f: fifo(f / "pipe.txt")), ("books", "no book files"), limit=20),
            True,
        ),
        "folder-empty": (_ingest(_folder(lambda ctx, f: None), ("books",)), True),
        "newline-in-file-name": (_ingest(_newline_name, ("bad\\nname.txt",)), True),
        "non-utf8-file-name": (_ingest(_bytes_name, ("bad-\\xff\\xfe.txt",)), True),
        "file-name-254-bytes": (_ingest(_long_name, ("bbbb",)), True),
        "path-too-long": (_ingest(lambda ctx: str(ctx.root / ("d" * 300) / "book.txt"), ("ddd",)), True),
        "missing-file": (_ingest(lambda ctx: ctx.path("nothing.txt"), ("nothing.txt",)), True),
        "directory-named-epub": (
            _ingest(lambda ctx: (ctx.path("dir.epub").mkdir(), ctx.path("dir.epub"))[1], ("dir.epub",)),
            True,
        ),
        "entity-bomb-container": (_ingest(_bomb("container"), ("entit",)), True),
        "entity-bomb-opf": (_ingest(_bomb("opf"), ("entit",)), True),
        "entity-bomb-xhtml": (_ingest(_bomb("xhtml"), ("entit",)), True),
        "external-entity": (_ingest(_xxe, ("entit",)), True),
        "zip-bomb": (
            _ingest(_epub_of("bomb.epub", _zip_bomb), ("unpack",), env={"FOLIO_MAX_BOOK_BYTES": "100000"}),
            True,
        ),
        "empty-spine": (_ingest(_epub_of("nospine.epub", _empty_spine), ("spine",)), True),
        "truncated-epub": (_ingest(_truncated_epub, ("cut.epub",)), True),
        "text-named-epub": (_ingest(_write("text.epub", b"just some text " * 100), ("text.epub",)), True),
        "zip-not-epub": (_ingest(_zip_not_epub, ("archive.epub",)), True),
        "epub-without-opf": (_ingest(_epub_of("noopf.epub", _no_opf), ("noopf.epub",)), True),
        "epub-container-not-xml": (
            _ingest(_epub_of("badcontainer.epub", _bad_container, container=False), ("badcontainer.epub",)),
            True,
        ),
        "epub-drm-rights": (_ingest(_epub_of("drm.epub", _rights), ("drm.epub",)), True),
        "epub-images-only": (
            _ingest(
                _epub_of("images.epub", lambda: tiny_epub_files('<div><img src="c.png" alt=""/></div>')),
                ("images.epub",),
            ),
            True,
        ),
        "pdf-named-epub": (
            _ingest(_write("paper.epub", b"%PDF-1.4\n" + os.urandom(2000)), ("paper.epub",)),
            True,
        ),
        "empty-txt": (_ingest(_write("empty.txt", b""), ("empty.txt",)), True),
        "whitespace-txt": (_ingest(_write("blank.txt", b" \n\t\n  \r\n" * 100), ("blank.txt",)), True),
        "png-named-txt": (
            _ingest(_write("image.txt", b"\x89PNG\r\n\x1a\n" + b"\0" * 1000), ("image.txt",)),
            True,
        ),
        "random-bytes-txt": (_ingest(_write("noise.txt", os.urandom(50_000)), ("noise.txt",)), True),
        "gzip-named-txt": (_ingest(_gzip_txt, ("book.txt",)), True),
        "latin1-txt": (
            _ingest(
                _write(
                    "latin.txt", ("CHAPTER I\n\n" + "Café crème à la française. " * 200).encode("latin-1")
                ),
                ("latin.txt",),
            ),
            True,
        ),
        "punctuation-only-txt": (
            _ingest(_write("punct.txt", b"!!! ??? ... --- *** " * 500), ("punct.txt",)),
            True,
        ),
        "nul-bytes-in-text": (
            _ingest(_write("nul.txt", b"CHAPTER I\n\n" + b"Words \0 about \0 a whale. " * 300), ("nul.txt",)),
            True,
        ),
        "unreadable-file-as-nobody": (_unreadable_case, True),
        "three-bad-files-in-a-folder": (
            _ingest(_folder(_three_bad), ("a.txt", "b.epub", "c.txt"), lines=3),
            True,
        ),
    },
)


@case("inputs", "non-utf8-name-valid-book-ingests", cheap=False)
def _bytes_name_ok(ctx: Ctx) -> Run:
    lib = ctx.path("fresh-lib")
    raw = os.fsencode(ctx.root) + b"/alice-\xff\xfe.epub"
    with open(raw, "wb") as f:
        f.write(ALICE_EPUB.read_bytes())
    return Run([b"ingest", raw, b"--quiet", b"--library", os.fsencode(lib)], ("ok",), intact=False, limit=400)


@case("inputs", "bad-book-beside-a-good-one", cheap=False)
def _bad_and_good(ctx: Ctx) -> Run:
    lib = ctx.path("fresh-lib")
    bad = ctx.path("bad.txt")
    bad.write_bytes(b"")
    return Run(
        ["ingest", str(bad), str(ALICE_EPUB), "--quiet", "--library", str(lib)],
        ("error",),
        names=("bad.txt",),
        limit=400,
    )


# --- 4. bad settings and arguments --------------------------------------------------------------------------
def _env_case(
    env: dict[str, str],
    names: tuple[str, ...],
    command: tuple[str, ...] = ("search", "whale"),
    expect: tuple[str, ...] = ("error",),
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        return Run(_lib_args(lib, *command), expect, names=names, env=env, library=lib)

    return build


def _config_case(
    content: bytes | None,
    names: tuple[str, ...],
    command: tuple[str, ...] = ("search", "whale"),
    kind: str = "file",
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        path = ctx.path("my.yaml")
        if kind == "fifo":
            fifo(path)
        elif kind == "dir":
            path.mkdir()
        elif kind == "missing":
            pass
        elif content is not None:
            path.write_bytes(content.replace(b"ROOT", os.fsencode(ctx.root)))
            (ctx.root / "base.yaml").write_text("search_k: -3\n")
        shown = tuple(n.replace("PATH", str(path)) for n in names)
        return Run(
            [*_lib_args(lib, *command), "--config", str(path)],
            ("error",),
            names=shown,
            env=LEX,
            library=lib,
            limit=20,
        )

    return build


def _args_case(
    args: tuple[str | bytes, ...],
    names: tuple[str, ...],
    expect: tuple[str, ...] = ("error",),
    env: dict[str, str] | None = None,
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        return Run(
            [*args, "--library", str(lib)], expect, names=names, env={**LEX, **(env or {})}, library=lib
        )

    return build


YAML_BOMB = b"a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n" + b"".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n".encode() for p, c in zip("bcdefgh", "cdefghi", strict=True)
)

cases(
    "settings",
    {
        "env-search-mode-bogus": (_env_case({"FOLIO_SEARCH_MODE": "bogus"}, ("FOLIO_SEARCH_MODE",)), True),
        "env-search-k-text": (_env_case({"FOLIO_SEARCH_K": "ten"}, ("FOLIO_SEARCH_K",)), True),
        "env-search-k-huge": (
            _env_case({"FOLIO_SEARCH_K": "99999999999999999999999"}, ("FOLIO_SEARCH_K",)),
            True,
        ),
        "env-chunk-overlap-out-of-range": (
            _env_case({"FOLIO_CHUNK_OVERLAP": "2"}, ("FOLIO_CHUNK_OVERLAP",), ("ingest", str(ALICE_TXT))),
            True,
        ),
        "env-llm-bogus": (
            _env_case({"FOLIO_LLM": "maybe"}, ("FOLIO_LLM",), ("ask", "Who is the captain?")),
            True,
        ),
        "env-sources-bogus": (
            _env_case({"FOLIO_SOURCES": "book,bogus"}, ("FOLIO_SOURCES",), ("ask", "Who is the captain?")),
            True,
        ),
        "env-ask-deadline-negative": (
            _env_case({"FOLIO_ASK_DEADLINE_SECONDS": "-1"}, ("FOLIO_ASK_DEADLINE_SECONDS",), ("ask", "Who?")),
            True,
        ),
        "env-ask-deadline-nan": (
            _env_case(
                {"FOLIO_ASK_DEADLINE_SECONDS": ".nan"}, ("FOLIO_ASK_DEADLINE_SECONDS",), ("ask", "Who?")
            ),
            True,
        ),
        "env-workers-zero": (
            _env_case({"FOLIO_WORKERS": "0"}, ("FOLIO_WORKERS",), ("ingest", str(ALICE_TXT))),
            True,
        ),
        "env-invalid-yaml": (_env_case({"FOLIO_KIWIX_MAX_BOOKS": "[1, 2"}, ("FOLIO_KIWIX_MAX_BOOKS",)), True),
        "env-url-not-text": (
            _env_case({"FOLIO_LLM_BASE_URL": "123"}, ("FOLIO_LLM_BASE_URL",), ("ask", "Who?")),
            True,
        ),
        "env-max-book-bytes-negative": (
            _env_case({"FOLIO_MAX_BOOK_BYTES": "-5"}, ("FOLIO_MAX_BOOK_BYTES",), ("ingest", str(ALICE_TXT))),
            True,
        ),
        "env-bool-not-bool": (
            _env_case({"FOLIO_DISAMBIGUATION": "maybe"}, ("FOLIO_DISAMBIGUATION",), ("ask", "Who?")),
            True,
        ),
        "env-search-k-float": (_env_case({"FOLIO_SEARCH_K": "2.5"}, ("FOLIO_SEARCH_K",)), True),
        "env-mapping-value": (_env_case({"FOLIO_SEARCH_K": "{a: 1}"}, ("FOLIO_SEARCH_K",)), True),
        "unprefixed-search-mode-ignored": (
            _env_case({"SEARCH_MODE": "bogus", **LEX}, (), expect=("ok",)),
            True,
        ),
        "unprefixed-llm-ignored": (
            _env_case(
                {"LLM": "openai", "WORKERS": "abc", "SOURCES": "x", **LEX},
                (),
                ("ask", "Who is the captain?"),
                ("ok", "degraded"),
            ),
            True,
        ),
        "yaml-a-list": (_config_case(b"- a\n- b\n", ("PATH", "mapping")), True),
        "yaml-invalid": (_config_case(b"search_k: [1, 2\n", ("PATH", "invalid YAML")), True),
        "yaml-unknown-key": (_config_case(b"serch_k: 5\n", ("PATH", "serch_k")), True),
        "yaml-wrong-type": (_config_case(b"search_k: ten\n", ("PATH", "search_k")), True),
        "yaml-switch-bogus": (_config_case(b"kiwix: maybe\n", ("PATH", "kiwix")), True),
        "yaml-missing": (_config_case(None, ("PATH", "not found"), kind="missing"), True),
        "yaml-is-a-directory": (_config_case(None, ("PATH",), kind="dir"), True),
        "yaml-is-a-fifo": (_config_case(None, ("PATH",), kind="fifo"), True),
        "yaml-base-missing": (_config_case(b"base: nowhere.yaml\n", ("nowhere.yaml",)), True),
        "yaml-base-wrong-type": (_config_case(b"base: [1, 2]\n", ("PATH",)), True),
        "yaml-base-sets-bad-value": (
            _config_case(b"base: ROOT/base.yaml\n", ("base.yaml",), kind="file"),
            True,
        ),
        "yaml-not-utf8": (_config_case(b"search_k: \xff\xfe\n", ("PATH",)), True),
        "yaml-binary-zim": (
            _config_case(WP100.read_bytes()[:4096] if WP100.exists() else b"\0", ("PATH",)),
            True,
        ),
        "yaml-alias-bomb": (_config_case(YAML_BOMB, ("PATH",)), True),
        "yaml-agent-without-llm": (_config_case(b"answer_mode: agent\n", ("agent",), ("ask", "Who?")), True),
        "yaml-python-tag": (
            _config_case(b"search_k: !!python/object/apply:os.system ['echo pwned']\n", ("PATH",)),
            True,
        ),
        "k-huge": (_args_case(("search", "whale", "-k", "99999999999999999999999"), ("-k",)), True),
        "k-zero": (_args_case(("search", "whale", "-k", "0"), ("-k",)), True),
        "k-text": (_args_case(("search", "whale", "-k", "ten"), ("-k",)), True),
        "chapter-33000-times": (
            _args_case(
                ("search", "whale", *[a for i in range(33_000) for a in ("--chapter", f"ch-{i}")]),
                ("--chapter",),
            ),
            True,
        ),
        "query-not-utf8-search": (_args_case(("search", b"\xff\xfe whale"), ("query",)), True),
        "question-not-utf8-ask": (_args_case(("ask", b"who \xff\xfe?"), ("question",)), True),
        "mode-bogus": (_args_case(("search", "whale", "--mode", "bogus"), ("--mode",)), True),
        "book-unknown": (_args_case(("search", "whale", "--book", "no-such-book"), ("no-such-book",)), True),
        "book-ambiguous-prefix": (
            _args_case(("search", "whale", "--book", "a"), ("a",), expect=("error", "ok")),
            True,
        ),
        "profile-bogus": (_args_case(("ingest", str(ALICE_TXT), "--profile", "epic"), ("--profile",)), True),
        "remove-unknown-book": (_args_case(("remove", "no-such-book"), ("no-such-book",)), True),
        "concepts-unknown-book": (
            _args_case(("concepts", "whale", "--book", "no-such-book"), ("no-such-book",)),
            True,
        ),
        "ask-zim-missing": (
            _args_case(
                ("ask", "Who?", "--zim", "/nonexistent/a.zim"),
                ("/nonexistent/a.zim",),
                expect=("error", "degraded"),
            ),
            True,
        ),
        "ask-kiwix-url-not-a-url": (
            _args_case(
                ("ask", "Who?", "--kiwix-url", "not a url"), ("not a url",), expect=("error", "degraded")
            ),
            True,
        ),
        "ask-kiwix-url-ftp": (
            _args_case(
                ("ask", "Who?", "--kiwix-url", "ftp://example.org"),
                ("ftp://example.org",),
                expect=("error", "degraded"),
            ),
            True,
        ),
        "eval-missing-file": (_args_case(("eval", "/nonexistent/q.csv"), ("/nonexistent/q.csv",)), True),
        "experiment-missing-file": (
            _args_case(("experiment", "/nonexistent/e.yaml"), ("/nonexistent/e.yaml",)),
            True,
        ),
        "experiment-show-without-runs": (_args_case(("experiment", "show"), ("experiments.duckdb",)), True),
    },
)


@case("settings", "eval-garbage-csv")
def _eval_garbage(ctx: Ctx) -> Run:
    lib = ctx.lib()
    bad = ctx.path("q.csv")
    bad.write_bytes(os.urandom(3000))
    return Run(_lib_args(lib, "eval", str(bad)), ("error",), names=(str(bad),), env=LEX, library=lib)


@case("settings", "eval-jsonl-wrong-shape")
def _eval_jsonl(ctx: Ctx) -> Run:
    lib = ctx.lib()
    bad = ctx.path("q.jsonl")
    bad.write_text('{"question": 5}\n[1, 2]\nnot json\n')
    return Run(_lib_args(lib, "eval", str(bad)), ("error",), names=(str(bad),), env=LEX, library=lib)


@case("settings", "kiwix-without-a-source")
def _kiwix_nosource(ctx: Ctx) -> Run:
    return Run(["kiwix", "Who was Ray Charles?"], ("error",), names=("kiwix",))


@case("settings", "serve-port-out-of-range")
def _serve_port(ctx: Ctx) -> Run:
    return Run(["serve", "--port", "99999", "--library", str(ctx.lib())], ("error",), names=("99999",))


@case("settings", "serve-public-host-without-token")
def _serve_host(ctx: Ctx) -> Run:
    return Run(["serve", "--host", "0.0.0.0", "--library", str(ctx.lib())], ("error",), names=("token",))


@case("settings", "unknown-command")
def _unknown_command(ctx: Ctx) -> Run:
    return Run(["frobnicate"], ("error",), names=("frobnicate",))


@case("settings", "no-arguments")
def _no_args(ctx: Ctx) -> Run:
    return Run([], ("error",))


# --- 5. hostile queries (what already holds) ----------------------------------------------------------------
HOSTILE = {
    "fts-quote": '"unbalanced',
    "fts-near": "NEAR(whale ship",
    "fts-star": "* OR AND NOT ^",
    "fts-column": "text:whale book_id:x",
    "sql": "'; DROP TABLE books; --",
    "control": "whale\x1b[31m\x07\x7f",
    "ten-thousand-chars": "whale " * 1700,
    "emoji-rtl": "🐋 \u202e whale \u200b",
    "only-punctuation": "?!.,;:()[]{}",
}
cases(
    "queries",
    {f"search-{name}": (_args_case(("search", q), (), expect=("ok",)), True) for name, q in HOSTILE.items()}
    | {
        f"concepts-{name}": (_args_case(("concepts", q), (), expect=("ok",)), True)
        for name, q in HOSTILE.items()
        if name in ("fts-quote", "sql", "ten-thousand-chars")
    }
    | {
        f"ask-{name}": (_args_case(("ask", q), (), expect=("ok", "degraded")), True)
        for name, q in HOSTILE.items()
        if name in ("fts-near", "sql", "ten-thousand-chars")
    }
    | {"ask-empty": (_args_case(("ask", ""), ("question",)), True)}
    | {"search-empty": (_args_case(("search", ""), ("query",)), True)},
)


@case("queries", "kiwix-hostile-query")
def _kiwix_hostile(ctx: Ctx) -> Run:
    return Run(["kiwix", "\"NEAR( * '; DROP", "--zim", str(WP100)], ("ok", "degraded", "error"), limit=60)


# --- 6. servers that hang, trickle or fail ------------------------------------------------------------------
def _kiwix_server(make: Callable[[Ctx], str], command: str, limit: float = 30) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        url = make(ctx)
        if command == "ask":
            lib = ctx.lib()
            return Run(
                _lib_args(lib, "ask", "Why did the Beatles stop touring?", "--kiwix-url", url),
                ("degraded",),
                names=(url,),
                env={**LEX, "FOLIO_ASK_DEADLINE_SECONDS": "5", "FOLIO_KIWIX_TIMEOUT_SECONDS": "3"},
                library=lib,
                limit=limit,
            )
        return Run(
            ["kiwix", "Why did the Beatles stop touring?", "--kiwix-url", url],
            ("error",),
            names=(url,),
            env={"FOLIO_KIWIX_TIMEOUT_SECONDS": "3"},
            limit=limit,
        )

    return build


def _dead(ctx: Ctx) -> str:
    from tests.servers import dead_url

    return dead_url()


def _hanging(ctx: Ctx) -> str:
    from tests.servers import SlowHTTPServer

    return str(ctx.serve(SlowHTTPServer(delay=300)).url)


def _trickling(ctx: Ctx) -> str:
    return str(ctx.serve(TricklingServer(interval=0.2)).url)


def _fixed(status: int, body: bytes, content_type: str = "text/html") -> Callable[[Ctx], str]:
    return lambda ctx: str(ctx.serve(FaultHTTPServer(status, body, content_type)).url)


KIWIX_FAULTS: dict[str, Callable[[Ctx], str]] = {
    "dead": _dead,
    "hanging": _hanging,
    "trickling": _trickling,
    "http-500": _fixed(500, b"Internal Server Error"),
    "http-404": _fixed(404, b"not found"),
    "not-opds-html": _fixed(200, b"<html><body>hello</body></html>"),
    "garbage-xml": _fixed(200, b"<feed><entry><title>x</broken", "application/atom+xml"),
    "binary-body": _fixed(200, os.urandom(4000), "application/octet-stream"),
}
cases(
    "servers",
    {f"kiwix-{name}-ask": (_kiwix_server(make, "ask"), True) for name, make in KIWIX_FAULTS.items()}
    | {f"kiwix-{name}-kiwix": (_kiwix_server(make, "kiwix"), True) for name, make in KIWIX_FAULTS.items()},
)


def _llm_case(
    reply: Callable[[Ctx], str],
    expect: tuple[str, ...] = ("ok", "degraded"),
    agent: bool = False,
    limit: float = 30,
    extra: dict[str, str] | None = None,
    names: tuple[str, ...] = (),
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        url = reply(ctx)
        env = llm_env(url, FOLIO_ASK_DEADLINE_SECONDS="6", FOLIO_LLM_TIMEOUT_SECONDS="3", **(extra or {}))
        if agent:
            env["FOLIO_ANSWER_MODE"] = "agent"
        return Run(
            _lib_args(lib, "ask", "Who was the captain of the ship?"),
            expect,
            names=names,
            env=env,
            library=lib,
            limit=limit,
        )

    return build


def _llm_reply(make: Callable[[], Any]) -> Callable[[Ctx], str]:
    return lambda ctx: str(scripted(ctx, make()).url)


def _llm_dead(ctx: Ctx) -> str:
    from tests.servers import dead_url

    return dead_url() + "/v1"


def _r(**kw: Any) -> Callable[[], Any]:
    def make() -> Any:
        from tests.servers import Reply

        return Reply(**kw)

    return make


LLM_FAULTS: dict[str, Callable[[Ctx], str]] = {
    "dead": _llm_dead,
    "hanging": _llm_reply(_r(content="late", delay=300)),
    "trickling": _llm_reply(_r(content="x" * 5000, trickle=0.2)),
    "http-500": _llm_reply(_r(status=500, body='{"error": {"message": "boom"}}')),
    "http-429-retry-after-an-hour": _llm_reply(_r(status=429, body="{}", headers=(("Retry-After", "3600"),))),
    "not-json": _llm_reply(_r(body='{"choices": [ this is not json')),
    "empty-body": _llm_reply(_r(body="")),
    "html-200": _llm_reply(_r(body="<html>proxy login</html>")),
    "no-choices": _llm_reply(_r(body="{}")),
}
cases(
    "servers",
    {f"llm-{name}": (_llm_case(make), True) for name, make in LLM_FAULTS.items()}
    | {
        f"llm-{name}-agent": (_llm_case(make, agent=True), True)
        for name, make in LLM_FAULTS.items()
        if name in ("hanging", "trickling", "not-json")
    }
    | {
        f"searxng-{name}": (
            lambda ctx, make=make: (
                lambda lib, url: Run(
                    _lib_args(lib, "ask", "What happened in the news today?"),
                    ("ok", "degraded"),
                    env={
                        **LEX,
                        "FOLIO_SEARXNG_URL": url,
                        "FOLIO_SOURCES": "book,web,news",
                        "FOLIO_ASK_DEADLINE_SECONDS": "5",
                        "FOLIO_SEARXNG_TIMEOUT_SECONDS": "3",
                    },
                    library=lib,
                    limit=30,
                )
            )(ctx.lib(), make(ctx)),
            True,
        )
        for name, make in (
            ("trickling", _trickling),
            ("hanging", _hanging),
            ("http-500", _fixed(500, b"x")),
            ("not-json", _fixed(200, b"<html/>")),
        )
    },
)


@case("servers", "kiwix-serve-real-answers")
def _kiwix_real(ctx: Ctx) -> Run:
    from tests.servers import kiwix_serve_binary, start_kiwix_serve

    if kiwix_serve_binary() is None:
        raise Skip("kiwix-serve is not installed")
    server = ctx.serve(start_kiwix_serve([WP100]))
    return Run(
        ["kiwix", "Why did the Beatles stop touring?", "--kiwix-url", server.url],
        ("ok",),
        names=("Beatles",),
        limit=60,
    )


@case("servers", "done-when-trickling-llm-ask-within-deadline")
def _done_llm(ctx: Ctx) -> Run:
    lib = ctx.lib()
    url = str(scripted(ctx, _r(content="x" * 5000, trickle=0.2)()).url)
    deadline = 4.0
    warm = [str(a) for a in _lib_args(lib, "ask", "Who was the captain?")]
    return Run(
        _lib_args(lib, "ask", "Who was the captain of the ship?"),
        ("ok", "degraded"),
        env=llm_env(url, FOLIO_ASK_DEADLINE_SECONDS=str(deadline)),
        library=lib,
        limit=deadline + 1.0,
        timed=True,
        warm_args=warm,
    )


@case("servers", "done-when-trickling-kiwix-ask-within-deadline")
def _done_kiwix(ctx: Ctx) -> Run:
    from tests.servers import dead_url

    lib = ctx.lib()
    url = _trickling(ctx)
    deadline = 4.0
    warm = [str(a) for a in _lib_args(lib, "ask", "Who was the captain?", "--kiwix-url", dead_url())]
    return Run(
        _lib_args(lib, "ask", "Why did the Beatles stop touring?", "--kiwix-url", url),
        ("degraded",),
        names=(url,),
        env={**LEX, "FOLIO_ASK_DEADLINE_SECONDS": str(deadline)},
        library=lib,
        limit=deadline + 1.0,
        timed=True,
        warm_args=warm,
    )


@case("servers", "done-when-trickling-llm-default-settings", cheap=False)
def _done_llm_default(ctx: Ctx) -> Run:
    lib = ctx.lib()
    url = str(scripted(ctx, _r(content="x" * 100_000, trickle=0.5)()).url)
    return Run(
        _lib_args(lib, "ask", "Who was the captain of the ship?"),
        ("ok", "degraded"),
        env=llm_env(url),
        library=lib,
        limit=61.0 + 15,
    )


# --- 7. malformed LLM replies -------------------------------------------------------------------------------
def _reply_case(make: Callable[[], Any], agent: bool = False, zim: bool = False) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        url = str(scripted(ctx, make()).url)
        env = llm_env(url, FOLIO_ASK_DEADLINE_SECONDS="20")
        if agent:
            env["FOLIO_ANSWER_MODE"] = "agent"
        args = _lib_args(lib, "ask", "Who was the captain of the ship?")
        if zim:
            args = _lib_args(lib, "ask", "Why did the Beatles stop touring?", "--zim", str(WP100))
        return Run(args, ("ok", "degraded"), env=env, library=lib, limit=60)

    return build


def _msg(message: Any) -> Callable[[], Any]:
    return lambda: raw_reply(message=message)


def _tools(*calls: tuple[str, Any]) -> Callable[[], Any]:
    def make() -> Any:
        from tests.servers import Reply

        return Reply.tools(*calls)

    return make


MALFORMED: dict[str, Callable[[], Any]] = {
    "message-not-object": _msg("just text"),
    "message-null": _msg(None),
    "content-not-string": _msg({"role": "assistant", "content": 42}),
    "content-a-list": _msg({"role": "assistant", "content": ["a", "b"]}),
    "content-null-no-tools": _msg({"role": "assistant", "content": None}),
    "tool-calls-not-list": _msg({"role": "assistant", "content": None, "tool_calls": "text_search"}),
    "tool-calls-garbage-items": _msg(
        {"role": "assistant", "content": None, "tool_calls": [1, "x", {"function": 5}]}
    ),
    "choices-empty": lambda: raw_reply(choices=[]),
    "choices-not-list": lambda: raw_reply(choices={"0": 1}),
    "json-wrong-shape": _msg(
        {"role": "assistant", "content": json.dumps({"route": 7, "books": "all", "answer": []})}
    ),
    "citation-out-of-range": _msg({"role": "assistant", "content": "The captain [99] was [0] here [-1]."}),
    "unknown-tool": _tools(("format_disk", {"path": "/"})),
    "tool-args-not-json": _tools(("text_search", "{not json")),
    "tool-args-empty": _tools(("text_search", "")),
}
cases(
    "llm-replies",
    {
        f"pipeline-{name}": (_reply_case(make), True)
        for name, make in MALFORMED.items()
        if name not in ("unknown-tool", "tool-args-not-json", "tool-args-empty")
    }
    | {f"agent-{name}": (_reply_case(make, agent=True), True) for name, make in MALFORMED.items()}
    | {
        f"kiwix-ranking-{name}": (_reply_case(make, zim=True), True)
        for name, make in MALFORMED.items()
        if name in ("message-not-object", "content-not-string", "json-wrong-shape")
    },
)


@case("llm-replies", "agent-cites-nothing-searched-list")
def _agent_nothing(ctx: Ctx) -> Run:
    lib = ctx.lib()
    url = str(scripted(ctx, raw_reply(message={"role": "assistant", "content": "I do not know."})).url)
    env = {**llm_env(url, FOLIO_ASK_DEADLINE_SECONDS="20"), "FOLIO_ANSWER_MODE": "agent"}
    return Run(
        _lib_args(lib, "ask", "Why did Peter Rabbit go into the garden?"),
        ("ok", "degraded"),
        env=env,
        library=lib,
        limit=60,
        stdout_check=_searched_list_whole,
    )


def _searched_list_whole(out: str) -> str | None:
    """The refusal's "Searched:" list holds whole entries, not one character per line."""
    lines = out.split("Searched:", 1)[1].strip().splitlines() if "Searched:" in out else []
    entries = [line for line in lines if line.startswith("- ")]
    if "Searched:" not in out:
        return None  # answered (the extractive fallback found support): nothing to list
    if not entries or any(len(line.strip()) <= 3 for line in entries):
        return f"the Searched: list is not whole entries: {lines[:4]!r}"
    return None


# --- 8. corrupt ZIM archives --------------------------------------------------------------------------------
def _zim_case(
    make: Callable[[Ctx], Path],
    command: str,
    expect: tuple[str, ...],
    names: tuple[str, ...],
    with_good: bool = True,
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        bad = make(ctx)
        zims = [str(bad), str(RC_MINI)] if with_good else [str(bad)]
        question = "Who was Ray Charles?"
        if command == "ask":
            lib = ctx.lib()
            return Run(
                _lib_args(lib, "ask", question, "--zim", *zims),
                expect,
                names=names,
                env=LEX,
                library=lib,
                limit=60,
            )
        return Run(["kiwix", question, "--zim", *zims], expect, names=names, limit=60)

    return build


def _zim_file(name: str, data: Callable[[], bytes]) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        path = ctx.path(name)
        path.write_bytes(data())
        return path

    return make


def _zim_truncated(ctx: Ctx) -> Path:
    path = ctx.path("cut.zim")
    path.write_bytes(WP100.read_bytes()[: WP100.stat().st_size // 2])
    return path


ZIM_FAULTS: dict[str, Callable[[Ctx], Path]] = {
    "cluster-damaged-middle": lambda ctx: damaged_zim(ctx, "middle"),
    "cluster-damaged-start": lambda ctx: damaged_zim(ctx, "start"),
    "truncated": _zim_truncated,
    "garbage": _zim_file("noise.zim", lambda: os.urandom(100_000)),
    "empty": _zim_file("empty.zim", lambda: b""),
    "text-file": _zim_file("text.zim", lambda: b"hello " * 1000),
    "directory": lambda ctx: (ctx.path("dir.zim").mkdir(), ctx.path("dir.zim"))[1],
    "fifo": lambda ctx: fifo(ctx.path("pipe.zim")),
    "missing": lambda ctx: ctx.path("missing.zim"),
}
cases(
    "zim",
    {
        f"{name}-beside-good-kiwix": (_zim_case(make, "kiwix", ("ok", "degraded"), ("Ray_Charles",)), True)
        for name, make in ZIM_FAULTS.items()
    }
    | {
        f"{name}-beside-good-ask": (_zim_case(make, "ask", ("ok", "degraded"), ("Ray_Charles",)), True)
        for name, make in ZIM_FAULTS.items()
    }
    | {
        f"{name}-alone-kiwix": (_zim_case(make, "kiwix", ("error", "degraded"), (), with_good=False), True)
        for name, make in ZIM_FAULTS.items()
        if name in ("cluster-damaged-start", "garbage", "fifo", "missing", "truncated")
    },
)


# --- 9. interruption ----------------------------------------------------------------------------------------
@case("interrupt", "ctrl-c-during-ingest", cheap=False)
def _int_ingest(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    return Run(
        _lib_args(lib, "ingest", str(TIME_MACHINE), "--quiet"),
        ("interrupt",),
        library=lib,
        intact=True,
        healthy=False,
        limit=300,
        interrupt_after=240,
        interrupt_when=lambda: next((lib / "staging").glob("*/book.sqlite"), None) is not None,
        caches_may_grow=True,
    )


@case("interrupt", "ctrl-c-during-ask-hanging-llm")
def _int_llm(ctx: Ctx) -> Run:
    lib = ctx.lib()
    url = str(scripted(ctx, _r(content="late", delay=300)()).url)
    return Run(
        _lib_args(lib, "ask", "Who was the captain?"),
        ("interrupt",),
        env=llm_env(url),
        library=lib,
        limit=60,
        interrupt_after=8,
    )


@case("interrupt", "ctrl-c-during-kiwix-hanging-server")
def _int_kiwix(ctx: Ctx) -> Run:
    return Run(
        ["kiwix", "Who was Ray Charles?", "--kiwix-url", _hanging(ctx)],
        ("interrupt",),
        limit=40,
        interrupt_after=6,
    )


@case("interrupt", "ctrl-c-during-ask-trickling-kiwix")
def _int_kiwix_ask(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "ask", "Who was Ray Charles?", "--kiwix-url", _trickling(ctx)),
        ("interrupt",),
        env=LEX,
        library=lib,
        limit=40,
        interrupt_after=6,
    )


@case("interrupt", "ctrl-c-at-start-up")
def _int_start(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "search", "whale"), ("interrupt",), env=LEX, library=lib, limit=30, interrupt_after=0.4
    )


@case("interrupt", "ctrl-c-during-search-model-load", cheap=False)
def _int_model(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    return Run(
        _lib_args(lib, "search", "white rabbit", "--mode", "semantic"),
        ("interrupt",),
        library=lib,
        limit=60,
        interrupt_after=2.5,
    )


# --- 10. nothing written outside the library (every case checks HOME and the working directory) -------------
@case("home", "version")
def _version(ctx: Ctx) -> Run:
    return Run(["--version"], ("ok",), names=("folio",))


@case("home", "help")
def _help(ctx: Ctx) -> Run:
    return Run(["--help"], ("ok",), names=("ingest",))


@case("home", "books-search-doctor-cache")
def _home_many(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(_lib_args(lib, "doctor"), ("doctor",), names=("healthy",), library=lib, intact=False)


@case("home", "kiwix-zim")
def _home_kiwix(ctx: Ctx) -> Run:
    return Run(
        ["kiwix", "Who was Ray Charles?", "--zim", str(RC_MINI)], ("ok",), names=("Ray_Charles",), limit=60
    )


@case("home", "ask-zim")
def _home_ask(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "ask", "Who was Ray Charles?", "--zim", str(RC_MINI)),
        ("ok", "degraded"),
        env=LEX,
        library=lib,
        limit=60,
    )


@case("home", "search-semantic", cheap=False)
def _home_semantic(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    return Run(
        _lib_args(lib, "search", "a girl falls down a rabbit hole", "--mode", "semantic"),
        ("ok",),
        library=lib,
        limit=120,
    )


@case("home", "ingest", cheap=False)
def _home_ingest(ctx: Ctx) -> Run:
    lib = ctx.path("fresh-lib")
    return Run(["ingest", str(ALICE_EPUB), "--quiet", "--library", str(lib)], ("ok",), limit=400)


@case("home", "ask-real-library", cheap=False)
def _home_ask_real(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    return Run(_lib_args(lib, "ask", "Who is the White Rabbit?"), ("ok", "degraded"), library=lib, limit=120)


# --- 11. output cut off by its reader, and a full disk ------------------------------------------------------
def _pipe(command: Callable[[Ctx, Path], list[str | bytes]], stdout: str = "closed") -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        expect: tuple[str, ...] = ("pipe",) if stdout == "closed" else ("error",)
        if command(ctx, lib) == ["--help"]:  # argparse's own help: lost quietly (exit 0) is fine too
            expect = (*expect, "ok")
        return Run(
            command(ctx, lib),
            expect,
            env=LEX,
            library=lib,
            stdout=stdout,
            names=("no space left",) if stdout == "full" and command(ctx, lib) != ["--help"] else (),
            intact=False,
            limit=60,
        )

    return build


PIPED: dict[str, Callable[[Ctx, Path], list[str | bytes]]] = {
    "books-json": lambda ctx, lib: _lib_args(lib, "books", "--json"),
    "search": lambda ctx, lib: _lib_args(lib, "search", "whale", "-k", "50"),
    "ask-json": lambda ctx, lib: _lib_args(lib, "ask", "Who was the captain?", "--json"),
    "doctor": lambda ctx, lib: _lib_args(lib, "doctor"),
    "cache-info": lambda ctx, lib: _lib_args(lib, "cache", "info", "--json"),
    "concepts": lambda ctx, lib: _lib_args(lib, "concepts", "whale"),
    "kiwix": lambda ctx, lib: ["kiwix", "Who was Ray Charles?", "--zim", str(RC_MINI)],
    "help": lambda ctx, lib: ["--help"],
}
cases(
    "pipe",
    {f"closed-{name}": (_pipe(make), True) for name, make in PIPED.items()}
    | {
        f"dev-full-{name}": (_pipe(make, "full"), True)
        for name, make in PIPED.items()
        if name in ("books-json", "search", "help")
    },
)


# --- 12. what already holds: kill -9, concurrent writers ----------------------------------------------------
@case("holds", "kill-9-mid-ingest-then-books", cheap=False)
def _kill9(ctx: Ctx) -> Run:
    lib = ctx.real_lib()
    proc = subprocess.Popen(
        [*folio_command(), "ingest", str(TIME_MACHINE), "--quiet", "--library", str(lib)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=base_env(ctx.home),
        cwd=ctx.cwd,
    )
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if next((lib / "staging").glob("*/book.sqlite"), None) is not None:
            break
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    return Run(_lib_args(lib, "books"), ("ok",), names=("alice",), library=lib, intact=False, limit=60)


@case("holds", "second-writer-is-refused-in-one-line")
def _two_writers(ctx: Ctx) -> Run:
    import fcntl

    lib = ctx.lib()
    lock = open(lib / ".lock", "a+")  # noqa: SIM115 - closed by the case's stack
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ctx.stack.callback(lock.close)
    return Run(_lib_args(lib, "remove", ctx.book_ids(lib)[0]), ("error",), names=("another",), library=lib)


@case("holds", "search-while-a-writer-holds-the-lock")
def _search_locked(ctx: Ctx) -> Run:
    import fcntl

    lib = ctx.lib()
    lock = open(lib / ".lock", "a+")  # noqa: SIM115 - closed by the case's stack
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    ctx.stack.callback(lock.close)
    return Run(_lib_args(lib, "search", "whale"), ("ok",), env=LEX, library=lib)


# === issue 33: classes service, mcp, concurrency, upgrade (safe to serve, nothing lost) =====================
# service: a real `folio serve` probed over HTTP while it runs (ServeProbe), then interrupted; and `remove`.
# mcp: `folio mcp` fed hostile frames on stdin (Run.stdin); every request id must get one reply.
# concurrency: reads beside a writer process committing in a loop, and beside another process upgrading.
# upgrade: an old per-book library with one damaged book: set aside in one line, the rest upgraded.
class ServeProbe:
    """Probes a ``folio serve`` run: ``poll`` (the case's ``interrupt_when``) waits for the server, runs
    ``checks`` (each returns a problem or None), then lets the run be interrupted; ``problems`` (the
    case's ``stdout_check``) names what failed."""

    def __init__(self, port: int, checks: Callable[[str], list[str]]) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.checks = checks
        self.found: list[str] | None = None

    def poll(self) -> bool:
        import httpx

        if self.found is not None:
            return True
        try:
            httpx.get(self.url + "/api/health", timeout=2)  # any answer (a 401 too): it is up
        except httpx.HTTPError:
            return False
        try:
            self.found = self.checks(self.url)
        except Exception as exc:  # a probe that broke is a failed case
            self.found = [f"probe error: {exc!r}"]
        return True

    def problems(self, _stdout: str) -> str | None:
        if self.found is None:
            return "the server never answered"
        return "; ".join(self.found) or None


def _one_error(response: Any, status: int, says: str = "") -> str | None:
    """Why ``response`` is not ``status`` with one ``{"error": ...}`` line holding ``says``, or None."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != status or not isinstance(body, dict) or set(body) != {"error"}:
        request = response.request
        return f"{request.method} {request.url.path}: {response.status_code} {response.text[:120]}"
    if "\n" in body["error"] or says not in body["error"]:
        return f"{response.request.url.path}: error line {body['error'][:120]!r} lacks {says!r}"
    return None


def _serve_case(
    checks: Callable[[Ctx, Path], Callable[[str], list[str]]], *args: str
) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        from bench.measuring import free_port

        lib = ctx.lib()
        port = free_port()
        probe = ServeProbe(port, checks(ctx, lib))
        more = [a.replace("ROOT", str(ctx.root)) for a in args]
        return Run(
            _lib_args(lib, "serve", "--port", str(port), *more),
            ("ok",),
            env=LEX,
            library=lib,
            limit=90,
            interrupt_after=90,
            interrupt_when=probe.poll,
            stdout_check=probe.problems,
        )

    return build


def _allowed_folder(ctx: Ctx) -> Path:
    allowed = ctx.path("allowed")
    allowed.mkdir(exist_ok=True)
    secret = ctx.path("secret.txt")
    secret.write_text("private notes " * 100)
    (allowed / "leak.txt").symlink_to(secret)
    return allowed


def _ingest_refused(
    paths: Callable[[Ctx], list[str]], says: str
) -> Callable[[Ctx, Path], Callable[[str], list[str]]]:
    def checks(ctx: Ctx, _lib: Path) -> Callable[[str], list[str]]:
        _allowed_folder(ctx)
        wanted = paths(ctx)

        def run(url: str) -> list[str]:
            import httpx

            out = [
                _one_error(httpx.post(url + "/api/ingest", json={"paths": [p]}, timeout=30), 403, says)
                for p in wanted
            ]
            jobs = httpx.get(url + "/api/jobs", timeout=30).json()
            return [p for p in out if p] + ([f"jobs were queued: {jobs}"] if jobs else [])

        return run

    return checks


def _probe(
    method: str, path: str, status: int, says: str = "", **kwargs: Any
) -> Callable[[Ctx, Path], Callable[[str], list[str]]]:
    def checks(ctx: Ctx, lib: Path) -> Callable[[str], list[str]]:
        first = ctx.book_ids(lib)[0]

        def run(url: str) -> list[str]:
            import httpx

            target = url + path.replace("FIRST", first)
            problem = _one_error(httpx.request(method, target, timeout=30, **kwargs), status, says)
            return [problem] if problem else []

        return run

    return checks


NESTED = b'{"question": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
JSON_TYPE = {"content-type": "application/json"}
cases(
    "service",
    {
        "ingest-off-without-books": (
            _serve_case(_ingest_refused(lambda ctx: [str(ctx.path("secret.txt"))], "is off")),
            True,
        ),
        "ingest-etc-passwd-relative": (
            _serve_case(
                _ingest_refused(lambda ctx: ["../../../../etc/passwd"], "absolute"), "--books", "ROOT/allowed"
            ),
            True,
        ),
        "ingest-outside-books": (
            _serve_case(
                _ingest_refused(lambda ctx: ["/etc/passwd", str(ctx.path("secret.txt"))], "not inside"),
                "--books",
                "ROOT/allowed",
            ),
            True,
        ),
        "ingest-symlink-leading-out": (
            _serve_case(
                _ingest_refused(lambda ctx: [str(ctx.path("allowed/leak.txt"))], "not inside"),
                "--books",
                "ROOT/allowed",
            ),
            True,
        ),
        "ingest-dotdot-out-of-books": (
            _serve_case(
                _ingest_refused(lambda ctx: [f"{ctx.path('allowed')}/../secret.txt"], "not inside"),
                "--books",
                "ROOT/allowed",
            ),
            True,
        ),
        "foreign-host-421": (
            _serve_case(_probe("GET", "/api/books", 421, "evil.example", headers={"Host": "evil.example"})),
            True,
        ),
        "foreign-host-mcp-421": (
            _serve_case(_probe("POST", "/mcp/", 421, "evil.example", headers={"Host": "evil.example"})),
            True,
        ),
        "foreign-origin-delete-403": (
            _serve_case(
                _probe("DELETE", "/api/books/FIRST", 403, "Origin", headers={"Origin": "http://evil.example"})
            ),
            True,
        ),
        "token-still-required-on-every-route": (
            _serve_case(_probe("GET", "/docs", 401, "token"), "--token", "s3cret"),
            True,
        ),
        "unknown-route-404": (_serve_case(_probe("GET", "/no/such/route", 404, "no such route")), True),
        "wrong-method-405": (_serve_case(_probe("PUT", "/api/books", 405, "not allowed")), True),
        "body-not-json-422": (
            _serve_case(_probe("POST", "/api/ask", 422, "JSON", content=b"{not json", headers=JSON_TYPE)),
            True,
        ),
        "body-nested-20000-deep": (
            _serve_case(_probe("POST", "/api/ask", 400, "", content=NESTED, headers=JSON_TYPE)),
            True,
        ),
        "remove-blank-id-http": (
            _serve_case(_probe("DELETE", "/api/books/%20%20", 400, "no book named")),
            True,
        ),
        "remove-short-prefix-http": (_serve_case(_probe("DELETE", "/api/books/a", 400, "at least 4")), True),
    },
)


@case("service", "cli-remove-empty-id")
def _remove_empty(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(_lib_args(lib, "remove", ""), ("error",), names=("no book named",), library=lib)


@case("service", "cli-remove-one-letter-lists-matches")
def _remove_short(ctx: Ctx) -> Run:
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "remove", "a"), ("error",), names=("at least 4", ctx.book_ids(lib)[0]), library=lib
    )


@case("service", "cli-remove-dry-run-changes-nothing")
def _remove_dry(ctx: Ctx) -> Run:
    lib = ctx.lib()
    first = ctx.book_ids(lib)[0]
    return Run(
        _lib_args(lib, "remove", first[:5], "--dry-run"), ("ok",), names=("would remove", first), library=lib
    )


# --- mcp: every request with an id gets a reply -------------------------------------------------------------
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "fault", "version": "1"},
    },
}
MCP_LAST = {"jsonrpc": "2.0", "id": "last", "method": "tools/list"}  # answered without the warm-up


def _mcp_case(frame: bytes, answered: tuple[Any, ...]) -> Callable[[Ctx], Run]:
    """``folio mcp`` fed initialize, ``frame`` and a tools/list request, then end of input: every id of
    ``answered`` (and ``init``, ``last``) must get one reply, ``last`` a result (the server went on)."""

    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        frames = [
            json.dumps(MCP_INIT).encode(),
            b'{"jsonrpc": "2.0", "method": "notifications/initialized"}',
            frame,
        ]
        stdin = b"\n".join([*frames, json.dumps(MCP_LAST).encode()]) + b"\n"

        def check(stdout: str) -> str | None:
            try:
                replies = [json.loads(line) for line in stdout.splitlines() if line.strip()]
            except ValueError as exc:
                return f"stdout is not JSON-RPC: {exc}"
            ids = [r.get("id") for r in replies]
            missing = [i for i in ("init", *answered, "last") if ids.count(i) != 1]
            if missing:
                return f"no single reply for ids {missing}: got {ids}"
            last = next(r for r in replies if r.get("id") == "last")
            return None if "result" in last else f"the server did not go on: {last}"

        return Run(
            _lib_args(lib, "mcp"), ("ok",), env=LEX, library=lib, stdin=stdin, stdout_check=check, limit=60
        )

    return build


def _rpc(**fields: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}).encode()


cases(
    "mcp",
    {
        "params-not-an-object": (_mcp_case(_rpc(id=1, method="tools/call", params=[1, 2]), (1,)), True),
        "params-a-string": (_mcp_case(_rpc(id=2, method="tools/call", params="books_list"), (2,)), True),
        "lone-surrogate-in-question": (
            _mcp_case(
                b'{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "ask", '
                b'"arguments": {"question": "why \\ud83d"}}}',
                (3,),
            ),
            True,
        ),
        "unknown-method": (_mcp_case(_rpc(id=4, method="no/such/method"), (4,)), True),
        "unparseable-frame": (_mcp_case(b'{"jsonrpc": "2.0", "id": 5, "method": oops', (None,)), True),
        "invalid-utf8-bytes": (
            _mcp_case(b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list"\xff\xfe}', (None,)),
            True,
        ),
        "batch-array": (_mcp_case(b"[" + _rpc(id=7, method="tools/list") + b"]", (None,)), True),
        "arguments-not-an-object": (
            _mcp_case(_rpc(id=8, method="tools/call", params={"name": "books_list", "arguments": 5}), (8,)),
            True,
        ),
        "oversized-frame-5mb": (
            _mcp_case(
                b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"q": "'
                + b"x" * (5 * 2**20)
                + b'"}}',
                (9,),
            ),
            True,
        ),
        "wrong-jsonrpc-version": (
            _mcp_case(json.dumps({"jsonrpc": "1.0", "id": 10, "method": "tools/list"}).encode(), (10,)),
            True,
        ),
    },
)


# --- concurrency: reads beside a writer committing in a loop ------------------------------------------------
def _writer_loop(ctx: Ctx, lib: Path) -> None:
    """A writer process committing into ``lib`` in a loop (tests/concurrency_workers.py) for the case's
    run, stopped after it; the run starts once the first commit is in."""
    stop = ctx.path("stop-writer")
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.concurrency_workers", "writer", str(lib), str(stop)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=base_env(ctx.home),
        cwd=ctx.cwd,
    )

    def stopped() -> None:
        stop.touch()
        try:
            writer.wait(timeout=120)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()

    ctx.stack.callback(stopped)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "looping-book" not in ",".join(ctx.book_ids(lib)):
        time.sleep(0.1)


def _concurrent(args: tuple[str, ...], names: tuple[str, ...] = ()) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = ctx.lib()
        _writer_loop(ctx, lib)
        return Run(_lib_args(lib, *args), ("ok",), names=names, env=LEX, library=lib, intact=False)

    return build


def _legacy_library(ctx: Ctx, titles: tuple[str, ...]) -> Path:
    from folio.nodes.backends.library_index import usearch_index
    from tests.test_library_index import synthetic_book, write_book_dir

    usearch_index()  # ONNX Runtime before usearch (write_book_dir imports usearch): else a segfault

    lib = ctx.path("legacy")
    for i, title in enumerate(titles):
        parts = [[" ".join(WORDS[(i + j) % len(WORDS)] for j in range(30))]]
        write_book_dir(synthetic_book(title, parts), lib / "books" / title.lower(), legacy=True)
    return lib


@case("concurrency", "books-while-an-upgrade-runs")
def _upgrade_race(ctx: Ctx) -> Run:
    lib = _legacy_library(ctx, ("Alpha", "Beta", "Gamma", "Delta", "Epsilon", "Zeta"))
    other = subprocess.Popen(
        [*folio_command(), "books", "--library", str(lib)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**base_env(ctx.home), **LEX},
        cwd=ctx.cwd,
    )
    ctx.stack.callback(lambda: other.wait(timeout=120))
    return Run(_lib_args(lib, "books"), ("ok",), names=("Alpha", "Zeta"), env=LEX, library=lib, intact=False)


@case("concurrency", "mcp-books-list-while-a-writer-commits")
def _mcp_beside_writer(ctx: Ctx) -> Run:
    lib = ctx.lib()
    _writer_loop(ctx, lib)
    call = {
        "jsonrpc": "2.0",
        "id": "books",
        "method": "tools/call",
        "params": {"name": "books_list", "arguments": {}},
    }
    frames = [
        MCP_INIT,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call,
        call | {"id": "again"},
    ]
    stdin = b"".join(json.dumps(f).encode() + b"\n" for f in frames)

    def check(stdout: str) -> str | None:
        replies = {r.get("id"): r for r in map(json.loads, filter(str.strip, stdout.splitlines()))}
        bad = [i for i in ("books", "again") if replies.get(i, {}).get("result", {}).get("isError", True)]
        return f"books_list failed beside the writer: {[replies.get(i) for i in bad]}" if bad else None

    return Run(
        _lib_args(lib, "mcp"), ("ok",), env=LEX, library=lib, intact=False, stdin=stdin, stdout_check=check
    )


cases(
    "concurrency",
    {
        "books-while-a-writer-commits": (_concurrent(("books", "--json"), ("alpha",)), True),
        "search-while-a-writer-commits": (
            _concurrent(("search", "whale harpoon", "--mode", "lexical")),
            True,
        ),
        "concepts-while-a-writer-commits": (_concurrent(("concepts", "whale")), True),
    },
)


# --- upgrade: an old per-book library with damaged books ----------------------------------------------------
def _damaged_legacy(damage: Callable[[Path], object], says: str) -> Callable[[Ctx], Run]:
    def build(ctx: Ctx) -> Run:
        lib = _legacy_library(ctx, ("Alpha", "Beta"))
        damage(lib / "books" / "alpha")
        return Run(
            _lib_args(lib, "books"), ("degraded",), names=("alpha", says, "Beta"), library=lib, intact=False
        )

    return build


cases(
    "upgrade",
    {
        "book-sqlite-missing": (
            _damaged_legacy(lambda d: (d / "book.sqlite").unlink(), "book.sqlite is missing"),
            True,
        ),
        "vectors-npy-missing": (
            _damaged_legacy(lambda d: (d / "vectors.npy").unlink(), "vectors.npy is missing"),
            True,
        ),
        "book-json-missing": (
            _damaged_legacy(lambda d: (d / "book.json").unlink(), "book.json is missing"),
            True,
        ),
        "book-json-not-an-object": (
            _damaged_legacy(lambda d: (d / "book.json").write_text("[1, 2]"), "no book_id"),
            True,
        ),
        "book-sqlite-garbage": (
            _damaged_legacy(lambda d: garbage(d / "book.sqlite", 8192), "not upgraded"),
            True,
        ),
        "book-sqlite-truncated": (
            _damaged_legacy(lambda d: truncate(d / "book.sqlite", 0.3), "not upgraded"),
            True,
        ),
        "vectors-npy-garbage": (
            _damaged_legacy(lambda d: garbage(d / "vectors.npy", 4096), "not upgraded"),
            True,
        ),
        "book-sqlite-is-a-folder": (
            _damaged_legacy(
                lambda d: ((d / "book.sqlite").unlink(), (d / "book.sqlite").mkdir()),
                "book.sqlite is missing",
            ),
            True,
        ),
    },
)


# --- 13. book formats (issue 28): damaged and hostile PDF, MOBI, EPUB and DOCX files --------------------
FORMATS = BOOKS.parent / "formats"


def _pdf_bytes(objects: list[bytes], trailer: bytes = b"") -> bytes:
    """A PDF of these objects (1 is the catalog) with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R " % (len(objects) + 1) + trailer + b">>\n"
    return bytes(out + b"startxref\n%d\n%%%%EOF\n" % xref)


def _empty_pages_pdf(ctx: Ctx) -> Path:
    """A PDF of 100,000 empty pages (10 MB)."""
    n = 100_000
    kids = b" ".join(b"%d 0 R" % (i + 3) for i in range(n))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n,
    ]
    objects += [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>"] * n
    path = ctx.path("empty-pages.pdf")
    path.write_bytes(_pdf_bytes(objects))
    return path


def _password_pdf(ctx: Ctx) -> Path:
    """A PDF under the standard security handler whose user password is not empty."""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>",
        b"<< /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >>",
    ]
    ident = b"<00112233445566778899aabbccddeeff>"
    path = ctx.path("locked.pdf")
    path.write_bytes(_pdf_bytes(objects, b"/Encrypt 4 0 R /ID [" + ident + b" " + ident + b"] "))
    return path


def _blank_pdf(ctx: Ctx) -> Path:
    """Three blank pages: no text layer, and nothing for OCR (``folio[ocr]``) to find either."""
    pages = [b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] >>"] * 3
    path = ctx.path("blank.pdf")
    path.write_bytes(
        _pdf_bytes(
            [
                b"<< /Type /Catalog /Pages 2 0 R >>",
                b"<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 3 >>",
                *pages,
            ]
        )
    )
    return path


def _damaged_pdf(ctx: Ctx) -> Path:
    path = ctx.path("damaged.pdf")
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 200)
    return path


def _zip_bomb(name: str, member: str, prefix: dict[str, str]) -> Callable[[Ctx], Path]:
    """A zip posing as an EPUB or DOCX whose one member inflates 1 MB of zeros 900 times (900 MB)."""

    def make(ctx: Ctx) -> Path:
        path = ctx.path(name)
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for entry, text in prefix.items():
                zf.writestr(entry, text)
            with zf.open(member, "w", force_zip64=True) as out:
                block = b"\0" * 1_000_000
                for _ in range(900):
                    out.write(block)
        return path

    return make


def _real_format_file(relative: str) -> Callable[[Ctx], Path]:
    def make(ctx: Ctx) -> Path:
        path = ctx.path(Path(relative).name)
        shutil.copyfile(FORMATS / relative, path)
        return path

    return make


EPUB_PREFIX = {"mimetype": "application/epub+zip", "META-INF/container.xml": "<container/>"}
cases(
    "book-formats",
    {
        "pdf-100000-empty-pages": (_ingest(_empty_pages_pdf, ("empty-pages.pdf", "100,000"), limit=60), True),
        "pdf-password-protected": (_ingest(_password_pdf, ("locked.pdf", "password"), limit=30), True),
        "pdf-damaged": (_ingest(_damaged_pdf, ("damaged.pdf", "damaged PDF"), limit=30), True),
        "pdf-blank-pages-no-text-layer": (
            _ingest(_blank_pdf, ("blank.pdf", "no text layer"), limit=60),
            True,
        ),
        "mobi-drm": (
            _ingest(_real_format_file("mobi/libmobi-drm-v2.mobi"), ("Mobipocket DRM",), limit=30),
            True,
        ),
        "epub-readium-lcp": (
            _ingest(_real_format_file("epub/moby-dick-lcp-drm.epub"), ("Readium LCP",), limit=30),
            True,
        ),
        "zip-bomb-epub": (
            _ingest(_zip_bomb("bomb.epub", "OEBPS/a.xhtml", EPUB_PREFIX), ("bomb.epub", "unpack"), limit=90),
            True,
        ),
        "zip-bomb-docx": (
            _ingest(_zip_bomb("bomb.docx", "word/document.xml", {}), ("bomb.docx", "unpack"), limit=90),
            True,
        ),
    },
)


# --- 14. Calibre libraries: metadata.db locked, damaged, of an unknown schema, a path leaving the library --
QUICK_START_LIBRARY = BOOKS.parent / "formats" / "calibre" / "quick-start-guide-library"


def calibre_copy(ctx: Ctx) -> Path:
    """A writable copy of the real quick-start-guide Calibre library (its files are read-only)."""
    target = ctx.path("calibre")
    shutil.copytree(QUICK_START_LIBRARY, target, copy_function=shutil.copyfile)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def _calibre_sql(database: Path, *statements: str) -> None:
    import sqlite3

    con = sqlite3.connect(database)
    con.create_function("title_sort", 1, lambda title: title)  # Calibre's triggers call its own functions
    con.create_function("uuid4", 0, lambda: "00000000-0000-4000-8000-000000000000")
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


@case("calibre", "metadata-db-locked-by-a-writer")
def _calibre_locked(ctx: Ctx) -> Run:
    import sqlite3

    calibre = calibre_copy(ctx)
    writer = sqlite3.connect(calibre / "metadata.db", isolation_level=None)
    writer.execute("BEGIN EXCLUSIVE")  # Calibre in the middle of a write
    ctx.stack.callback(writer.close)
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "ingest", str(calibre)), ("error",), names=("metadata.db", "locked"), library=lib
    )


@case("calibre", "metadata-db-damaged")
def _calibre_damaged(ctx: Ctx) -> Run:
    calibre = calibre_copy(ctx)
    overwrite(calibre / "metadata.db", 0, 4096)  # the SQLite header and the first page
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "ingest", str(calibre)), ("error",), names=("metadata.db", "damaged"), library=lib
    )


@case("calibre", "metadata-db-garbage")
def _calibre_garbage(ctx: Ctx) -> Run:
    calibre = calibre_copy(ctx)
    garbage(calibre / "metadata.db")
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "sync", str(calibre)), ("error",), names=("metadata.db", "damaged"), library=lib
    )


@case("calibre", "metadata-db-unknown-schema-version")
def _calibre_schema(ctx: Ctx) -> Run:
    calibre = calibre_copy(ctx)
    _calibre_sql(
        calibre / "metadata.db",
        "ALTER TABLE books RENAME COLUMN path TO location",
        "PRAGMA user_version = 99",
    )
    lib = ctx.lib()
    return Run(
        _lib_args(lib, "ingest", str(calibre)), ("error",), names=("metadata.db", "version 99"), library=lib
    )


@case("calibre", "metadata-db-path-leaves-the-library")
def _calibre_escape(ctx: Ctx) -> Run:
    calibre = calibre_copy(ctx)
    outside = ctx.path("outside")
    outside.mkdir()
    shutil.copy(ALICE_EPUB, outside / "Quick Start Guide - John Schember.epub")
    _calibre_sql(calibre / "metadata.db", "UPDATE books SET path = '../outside' WHERE id = 1")
    lib = ctx.lib()
    # the escaping book and the book whose PDF is missing: one line each, nothing ingested
    return Run(
        _lib_args(lib, "ingest", str(calibre)),
        ("error",),
        names=("leaves the library folder", "missing on disk"),
        library=lib,
        lines=2,
    )


# --- the runner ---------------------------------------------------------------------------------------------
def selected(only_cheap: bool, pattern: str | None = None, only_model: bool = False) -> list[Case]:
    return [
        c
        for c in CASES
        if (c.cheap or not only_cheap)
        and (not c.cheap or not only_model)
        and (pattern is None or pattern in c.key)
    ]


@contextlib.contextmanager
def corpus_root() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="folio-fault-corpus-"))
    os.chmod(root, 0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def summary(results: list[Result]) -> list[str]:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(r.group, []).append(r)
    lines = [f"{'class':<16} {'cases':>5} {'pass':>5} {'fail':>5} {'skip':>5}"]
    for group, rs in groups.items():
        skipped = sum(r.skipped is not None for r in rs)
        passed = sum(r.passed and r.skipped is None for r in rs)
        lines.append(f"{group:<16} {len(rs):>5} {passed:>5} {len(rs) - passed - skipped:>5} {skipped:>5}")
    total = len(results)
    skipped = sum(r.skipped is not None for r in results)
    passed = sum(r.passed and r.skipped is None for r in results)
    lines.append(f"{'all':<16} {total:>5} {passed:>5} {total - passed - skipped:>5} {skipped:>5}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cheap", action="store_true", help="only the cases that load no model")
    parser.add_argument("--model", action="store_true", help="only the cases that load the encoder")
    parser.add_argument("-k", default=None, help="only the cases whose class/name holds this text")
    parser.add_argument("--json", default=None, metavar="FILE", help="write every result as JSON")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep", action="store_true", help="keep each case's folder (debugging)")
    args = parser.parse_args(argv)
    chosen = selected(args.cheap, args.k, args.model)
    if args.list:
        for c in chosen:
            print(f"{c.key}{'' if c.cheap else '  (model)'}")
        print(f"{len(chosen)} case(s)")
        return 0
    results: list[Result] = []
    with corpus_root() as root:
        shared = Shared(root)
        for c in chosen:
            r = run_case(c, shared, keep=args.keep)
            results.append(r)
            mark = "skip" if r.skipped else ("ok  " if r.passed else "FAIL")
            detail = r.skipped or "; ".join(r.problems)
            print(f"{mark} {r.seconds:6.1f}s {r.key}" + (f"  — {detail}" if detail else ""), flush=True)
    print("\n".join(summary(results)))
    if args.json:
        Path(args.json).write_text(json.dumps([r.__dict__ for r in results], indent=1))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
