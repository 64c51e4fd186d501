"""dataflows/api.py: which files a folder given to ``ingest`` expands to."""

from __future__ import annotations

import os
from pathlib import Path

from folio.dataflows.api import book_files


def test_a_folder_expands_to_its_regular_book_files_and_stays_inside_it(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not to be ingested")
    (outside / "more").mkdir()
    (outside / "more" / "other.txt").write_text("not to be ingested either")
    books = tmp_path / "books"
    (books / "sub").mkdir(parents=True)
    (books / "a.txt").write_text("a book")
    (books / "sub" / "b.epub").write_bytes(b"PK\x03\x04")
    (books / "picture.png").write_bytes(b"\x89PNG")
    os.mkfifo(books / "pipe.txt")  # a FIFO is not a book file: never opened
    (books / "escape.txt").symlink_to(outside / "secret.txt")  # leaves the folder: not followed
    (books / "linked-folder").symlink_to(outside / "more")  # a symlinked folder is not entered
    (books / "alias.txt").symlink_to(books / "a.txt")  # stays inside the folder: kept
    assert book_files([books]) == [books / "a.txt", books / "alias.txt", books / "sub" / "b.epub"]


def test_a_plain_path_is_kept_as_given_for_the_parser_to_judge(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    assert book_files([fifo, "/dev/zero"]) == [fifo, Path("/dev/zero")]
