"""Edition and translator from a book file's metadata, and the always-on context that names them."""

from __future__ import annotations

import shutil
from pathlib import Path

from folio.nodes.backends.editions import edition_info, gutenberg_edition, opf_edition
from folio.nodes.core.types import BookInfo, Manifest
from folio.nodes.ingest.staging import _descriptor
from folio.nodes.query.answering import _agent_messages
from folio.nodes.query.routing import _router_messages, book_catalog

OPF2 = b"""<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/" version="2.0">
<metadata xmlns:opf="http://www.idpf.org/2007/opf"><dc:title>Fairy Tales</dc:title>
<dc:creator opf:role="aut">Grimm</dc:creator><dc:contributor opf:role="trl">Lucy  Crane</dc:contributor>
<meta name="edition" content="Second edition"/></metadata></package>"""
OPF3 = b"""<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" xmlns:dc="http://purl.org/dc/elements/1.1/" version="3.0">
<metadata><dc:contributor id="c1">Dave Cramer</dc:contributor>
<meta refines="#c1" property="role" scheme="marc:relators">mrk</meta>
<dc:contributor id="c2">Constance Garnett</dc:contributor>
<meta refines="#c2" property="role" scheme="marc:relators">trl</meta>
<meta property="schema:bookEdition">3</meta></metadata></package>"""


def test_gutenberg_headers_name_translator_and_edition(data_dir: Path) -> None:
    assert edition_info(data_dir / "books/txt/pg19068_grimm_household-stories_lucy-crane.txt") == {
        "translator": "Lucy Crane"
    }
    assert edition_info(data_dir / "books/txt/pg572_potter_great-big-treasury.txt") == {"edition": "11"}
    assert gutenberg_edition("Title: X\nTranslated by Louise Maude\n*** START OF X\nEdition: 9\n") == {
        "translator": "Louise Maude"
    }  # only the header counts


def test_opf_metadata_names_translator_and_edition_and_other_roles_do_not_count(data_dir: Path) -> None:
    assert opf_edition(OPF2) == {"translator": "Lucy Crane", "edition": "Second edition"}
    assert opf_edition(OPF3) == {"translator": "Constance Garnett", "edition": "3"}
    assert edition_info(data_dir / "books/epub/melville_moby-dick.epub") == {}  # Dave Cramer is "mrk"
    assert opf_edition(b"<not xml") == {}


def test_a_file_that_cannot_be_read_names_nothing(tmp_path: Path, data_dir: Path) -> None:
    broken = tmp_path / "broken.epub"
    broken.write_bytes(b"PK not a zip")
    assert edition_info(broken) == {} and edition_info(tmp_path / "missing.txt") == {}
    shutil.copy(data_dir / "books/txt/pg35_wells_the-time-machine.txt", tmp_path / "tm.txt")
    assert edition_info(tmp_path / "tm.txt") == {}


def test_the_always_on_context_names_translator_and_edition() -> None:
    grimm = BookInfo("grimm", "Household Stories", "Grimm", "en", "Lucy Crane", "11")
    router = _router_messages("Who is Hansel?", [grimm])[0]["content"]
    agent = _agent_messages("Who is Hansel?", [grimm])[0]["content"]
    for prompt in (router, agent):
        assert "Household Stories by Grimm; translated by Lucy Crane; edition: 11" in prompt


def test_the_book_descriptor_carries_them_to_the_catalog(data_dir: Path) -> None:
    grimm = str(data_dir / "books/txt/pg19068_grimm_household-stories_lucy-crane.txt")
    manifest = Manifest("g", "Household Stories", "Grimm", "en", grimm, "txt", "h", ())
    metadata = {"title": "Household Stories", "author": "Grimm", "authors": ["Grimm"], "language": "en"}
    descriptor = _descriptor(manifest, (), 0, "m", 800, 0.1, metadata)
    assert descriptor["translator"] == "Lucy Crane" and "edition" not in descriptor

    class Store:
        book_id = "g"

    Store.descriptor = descriptor
    (info,) = book_catalog({"g": Store()})
    assert (info.translator, info.edition) == ("Lucy Crane", "")
