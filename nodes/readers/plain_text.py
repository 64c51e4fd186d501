"""The plain-text reader: UTF-8/UTF-16 text, Project Gutenberg header and footer cut, chapters from the
table of contents or heading patterns (rules in ``folio.nodes.ingest.parsing``'s docstring).

No config keys. Limitations: encodings other than UTF-8/UTF-16-with-BOM are refused, not guessed;
heading detection without a table of contents is heuristic.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from folio.nodes.core.types import FolioError, ParsedBook
from folio.nodes.readers.common import (
    book_chapters,
    checked_chapters,
    clean_inline,
    is_prose,
    norm_key,
    storable,
    unwrapped,
)

# --- reading and sniffing --------------------------------------------------------------------------

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"Rar!", "a RAR archive"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
    (b"\xd0\xcf\x11\xe0", "an MS Office document"),
)


def binary_kind(data: bytes) -> str | None:
    """What a non-text file looks like ("a PNG image", ...), or None when it may be text."""
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    if b"\0" in data[:65536]:
        return "binary data (it contains NUL bytes)"
    return None


def decoded_text(data: bytes, source: str) -> str:
    """UTF-8 (BOM stripped) or UTF-16 with a BOM; anything else is a FolioError, never a guess."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            raise FolioError(source, "broken UTF-16 text; re-save the file as UTF-8") from None
    kind = binary_kind(data)
    if kind:
        raise FolioError(source, f"not a text or EPUB file: looks like {kind}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise FolioError(
            source, f"not valid UTF-8 text (byte 0x{bad} at offset {exc.start}); re-save the file as UTF-8"
        ) from None
    controls = sum(1 for ch in text[:65536] if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if controls > 0.01 * min(len(text), 65536):
        raise FolioError(source, "not a text file: it is full of control characters (binary data?)")
    return text


# --- Project Gutenberg -----------------------------------------------------------------------------

_PG_START = re.compile(
    r"^\s*\*{3}\s*START OF (?:THE|THIS) PROJECT GUTENBERG.*$|^\s*\*+\s*END\*?\s*THE SMALL PRINT.*$",
    re.IGNORECASE | re.MULTILINE,
)
_PG_END = re.compile(
    r"^\s*\*{3}\s*END OF (?:THE|THIS) PROJECT GUTENBERG.*$"
    r"|^\s*End of (?:the |this )?Project Gutenberg.*$"
    r"|^\s*End Project Gutenberg.*$"
    r"|^\s*\*{3}\s*START: FULL LICENSE.*$",
    re.IGNORECASE | re.MULTILINE,
)
_PG_CREDIT = re.compile(
    r"^(?:produced|scanned|transcribed|prepared|e-?text prepared|this e-?text was prepared|"
    r"this e-?book was produced)\s+by\b",
    re.IGNORECASE,
)


def without_gutenberg(sections: Sequence[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """Sections of a converted Project Gutenberg book (HTML, MOBI) without its header and footer: every
    paragraph up to the last "*** START OF ..." marker, and from the "*** END OF ..." marker on, dropped
    (a no-op without markers)."""
    flat = [(n, i) for n, (_, paragraphs) in enumerate(sections) for i in range(len(paragraphs))]

    def at(n: int, i: int) -> str:
        return sections[n][1][i]

    starts = [k for k, (n, i) in enumerate(flat) if _PG_START.search(at(n, i))]
    first = starts[-1] + 1 if starts else 0
    end = next((k for k, (n, i) in enumerate(flat) if k >= first and _PG_END.search(at(n, i))), len(flat))
    keep = set(flat[first:end])
    return [
        (title, [p for i, p in enumerate(paragraphs) if (n, i) in keep])
        for n, (title, paragraphs) in enumerate(sections)
    ]


def gutenberg_split(text: str) -> tuple[str, str]:
    """``(header, body)``: the Project Gutenberg header and footer cut off (no-op without markers).

    The body also loses the "Produced by ..." / "Scanned by ..." credit paragraphs that follow the header.
    """
    header = ""
    starts = list(_PG_START.finditer(text))
    if starts:
        last = starts[-1]
        header, text = text[: last.start()], text[last.end() :]
    end = _PG_END.search(text)
    if end:
        text = text[: end.start()]
    paragraphs = re.split(r"\n[ \t]*\n", text.lstrip("\n"))
    while paragraphs and (not paragraphs[0].strip() or _PG_CREDIT.match(paragraphs[0].strip())):
        paragraphs.pop(0)
    return header, "\n\n".join(paragraphs)


_LANGUAGES = {
    "english": "en",
    "french": "fr",
    "german": "de",
    "spanish": "es",
    "italian": "it",
    "portuguese": "pt",
    "dutch": "nl",
    "latin": "la",
    "finnish": "fi",
    "swedish": "sv",
    "danish": "da",
    "norwegian": "no",
    "russian": "ru",
    "chinese": "zh",
    "japanese": "ja",
    "greek": "el",
    "polish": "pl",
    "hungarian": "hu",
    "esperanto": "eo",
}


def gutenberg_metadata(header: str) -> dict[str, str]:
    """``title``/``author``/``language`` from "Title:", "Author:", "Language:" lines (continuations
    joined)."""
    found: dict[str, str] = {}
    lines = header.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"^\s*(Title|Author|Language)\s*:\s*(.*\S)\s*$", line)
        if not match or match.group(1).lower() in found:
            continue
        value = match.group(2)
        for follow in lines[i + 1 :]:
            if not follow.strip() or not follow.startswith((" ", "\t")):
                break
            value += " " + follow.strip()
        found[match.group(1).lower()] = clean_inline(value)
    if "language" in found:
        found["language"] = _LANGUAGES.get(found["language"].split()[0].lower(), found["language"])
    return found


# --- plain text: blocks, headings, table of contents -----------------------------------------------

# A block is ``(blank_lines_before, lines)``: lines are the raw (unstripped) lines of one paragraph.
_Block = tuple[int, tuple[str, ...]]

_ILLUSTRATION = re.compile(r"\[Illustrations?(?:[:.][^\]]*)?\]", re.IGNORECASE)
_WORD_NUMBERS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
    "sixteen|seventeen|eighteen|nineteen|twenty|first|second|third|fourth|fifth|sixth|seventh|"
    "eighth|ninth|tenth|last"
)
_LABEL = re.compile(
    rf"^(?:chapter|book|part|letter|stave|canto)\s+(?:\d+|[ivxlcdm]+|{_WORD_NUMBERS})\b(?P<rest>.*)$",
    re.IGNORECASE,
)
_BARE_NUMBER = re.compile(
    r"^(?:(?=[IVXLCDM])M{0,4}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})|\d{1,3})\.?$"
)
_NAMED = re.compile(
    r"^(?:prologue|epilogue|preface|introduction|conclusion|afterword|foreword|postscript|appendix|"
    r"envoi|l'envoi|finale)\.?$",
    re.IGNORECASE,
)
_SMALL_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "nor",
        "but",
        "of",
        "in",
        "on",
        "at",
        "to",
        "by",
        "for",
        "with",
        "from",
        "into",
        "upon",
        "as",
        "o",
    ]
)
_CONTENTS = frozenset({"contents", "table of contents", "the contents", "list of contents"})


def _label_rest(title: str) -> str:
    """What follows a "Chapter N"-style label in ``title`` ("" when it has no label)."""
    m = _LABEL.match(title)
    return m["rest"] if m else ""


def _text_blocks(body: str) -> list[_Block]:
    """Paragraph blocks of a text: runs of non-blank lines, with the count of blank lines before each."""
    blocks: list[_Block] = []
    blank, lines = 0, []
    for line in body.split("\n"):
        if line.strip():
            lines.append(line.rstrip())
            continue
        if lines:
            blocks.append((blank, tuple(lines)))
            blank, lines = 0, []
        blank += 1
    if lines:
        blocks.append((blank, tuple(lines)))
    return blocks


def _is_caps_title(line: str) -> bool:
    """An all-caps title line: words in capitals except short/small words, which may be lower-case
    ("The DEATH of the HEN", "The FISHERMAN and his WIFE"); at least half of the letters capitals."""
    text = re.sub(r"\([^)]*\)", " ", line).strip()
    words = re.findall(r"[^\W\d_]+", text)
    if not words or len(text) > 80 or re.search(r"\S\s{3,}\S", text):
        return False
    if not any(len(w) >= 3 and w.isupper() for w in words) or norm_key(text) in {"the end", "finis", "end"}:
        return False
    upper = sum(len(w) for w in words if w.isupper())
    return upper * 2 >= sum(len(w) for w in words) and all(
        w.isupper() or len(w) <= 3 or w.lower() in _SMALL_WORDS for w in words
    )


def heading_kind(line: str) -> str | None:
    """Classify one raw line: "label" (CHAPTER n...), "number" (bare I./XVI/12), "named"
    (Epilogue...), "caps" (all-caps title), or None for ordinary text."""
    if re.search(r"\S\s{3,}\S", line.strip()):
        return None  # a table row ("TITLE-PAGE.        PAGE")
    line = clean_inline(line)
    if not line or len(line) > 100:
        return None
    if _LABEL.match(line):
        return "label"
    if _BARE_NUMBER.match(line):
        return "number"
    if _NAMED.match(line):
        return "named"
    if _is_caps_title(line):
        return "caps"
    return None


def _is_title_line(line: str) -> bool:
    """A short title-case line usable as the title after a bare number ("Down the Rabbit-Hole")."""
    line = clean_inline(line)
    words = re.findall(r"[^\W\d_]+(?:['’-][^\W\d_]+)*", line)
    if not words or len(line) > 60 or len(words) > 10 or line[:1] in "\"'“‘(":
        return False
    if line.endswith((",", ";", ":")):
        return False
    return all(w[0].isupper() for w in words if len(w) >= 4 or w.lower() not in _SMALL_WORDS)


def _joined_title(label: str, title: str) -> str:
    """``"I" + "Introduction"`` -> ``"I. Introduction"``; ``"CHAPTER I." + "..."`` -> ``"CHAPTER I. ..."``."""
    return f"{label} {title}" if label.endswith((".", ":", "—", "-")) else f"{label}. {title}"


# Gutenberg's plain-text italics: "_him_", "here—_here_—" (not "snake_case", not "31_st_")
_EMPHASIS = re.compile(r"(?<!\w)_([^\s_](?:[^_]*?[^\s_])?)_(?!\w)")


def paragraph_text(lines: Sequence[str]) -> str:
    """One paragraph of hard-wrapped lines (``unwrapped``) with its underscore italics dropped."""
    return _EMPHASIS.sub(r"\1", unwrapped(lines))


def _block_text(block: _Block) -> str:
    return paragraph_text(block[1])


def _is_prose_block(block: _Block) -> bool:
    """Running text (ends a table of contents): 25+ words, long lines, mostly lower-case."""
    text = _block_text(block)
    lines = block[1]
    mean_len = sum(len(line.strip()) for line in lines) / len(lines)
    return len(text.split()) >= 25 and mean_len >= 40 and is_prose(text)


def _toc_runs(toc_blocks: Sequence[_Block]) -> list[tuple[int, str]]:
    """Entry candidates of a table of contents: runs of 1-3 consecutive lines inside one block,
    as ``(position of the run's last line, normalised text)``, in reading order."""
    runs: list[tuple[int, str]] = []
    position = 0
    for _, lines in toc_blocks:
        for i in range(len(lines)):
            for k in range(1, 4):
                if i + k <= len(lines):
                    runs.append((position + i + k - 1, norm_key(" ".join(lines[i : i + k]))))
        position += len(lines)
    return sorted(runs)


def _toc_span(blocks: Sequence[_Block]) -> tuple[int, int] | None:
    """``(start, end)`` block indices of a table of contents (a CONTENTS heading and its entries), or None."""
    for start, block in enumerate(blocks):
        if len(block[1]) != 1 or norm_key(block[1][0]) not in _CONTENTS:
            continue
        end = start + 1
        keys: set[str] = set()
        while end < len(blocks) and not _is_prose_block(blocks[end]):
            key = norm_key(_block_text(blocks[end]))
            pair = key + " " + norm_key(_block_text(blocks[end + 1])) if end + 1 < len(blocks) else ""
            if keys and (key in keys or pair in keys):
                break  # the body starts: a heading that repeats an entry
            keys.update(text for _, text in _toc_runs([blocks[end]]))
            end += 1
        if end - start >= 2 and sum(len(b[1]) for b in blocks[start + 1 : end]) >= 2:
            return start, end
    return None


def _toc_headings(blocks: Sequence[_Block], toc_blocks: Sequence[_Block]) -> dict[int, tuple[int, str]]:
    """Headings that match the table of contents in order: ``{block index: (blocks used, title)}``."""
    runs = _toc_runs(toc_blocks)
    headings: dict[int, tuple[int, str]] = {}
    pointer = -1  # position (line index) of the last matched entry
    i = 0
    while i < len(blocks):
        options = []
        if len(blocks[i][1]) <= 3:
            first = _block_text(blocks[i])
            if i + 1 < len(blocks) and len(blocks[i + 1][1]) == 1 and len(first) <= 20:
                second = _block_text(blocks[i + 1])
                options.append((2, norm_key(first + " " + second), _joined_title(first, second)))
            options.append((1, norm_key(first), first))
        matched = False
        for used, key, title in options:
            hit = next((pos for pos, text in runs if pos > pointer and text == key), None)
            if key and hit is not None:
                headings[i] = (used, title)
                pointer, matched = hit, True
                i += used
                break
        if not matched:
            i += 1
    return headings


def _block_heading(blocks: Sequence[_Block], i: int, strict: bool) -> tuple[int, str] | None:
    """``(blocks used, title)`` when block ``i`` is a heading by pattern (0 used: heading line + text).

    Headings must be set off by 2+ blank lines; with ``strict`` False, "CHAPTER n" labels need not be.
    """
    blank, lines = blocks[i]
    first = clean_inline(lines[0])
    kind = heading_kind(lines[0])
    set_off = blank >= 2 or i == 0
    if kind == "label" and strict and not set_off:
        return None
    if kind == "label" and len(lines) > 3:
        return 0, first  # "CHAPTER I." followed by text in the same block
    if kind == "label":
        title = _block_text(blocks[i])
    elif kind in ("number", "named") and len(lines) == 1 and set_off:
        title = first
    elif kind == "caps" and set_off and len(lines) <= 3 and all(_is_caps_title(x) for x in lines):
        return 1, _block_text(blocks[i])
    else:
        return None
    bare = kind == "number" or (kind == "label" and not _label_rest(title).strip(" .:"))
    if bare and i + 2 < len(blocks) and len(blocks[i + 1][1]) == 1:
        subtitle = blocks[i + 1][1][0]
        if _is_title_line(subtitle) and heading_kind(subtitle) not in ("label", "number"):
            return 2, _joined_title(title, clean_inline(subtitle))
    return 1, title


def _pattern_headings(blocks: Sequence[_Block]) -> dict[int, tuple[int, str]]:
    """Headings found by pattern (see the module docstring): ``{block index: (blocks used, title)}``.

    When fewer than two headings are set off by blank lines, "CHAPTER n" labels count anywhere.
    """
    for strict in (True, False):
        headings: dict[int, tuple[int, str]] = {}
        i = 0
        while i < len(blocks):
            found = _block_heading(blocks, i, strict)
            if found:
                headings[i] = found
            i += max(found[0], 1) if found else 1
        if len(headings) >= 2:
            break
    return headings


def text_sections(body: str, book_title: str) -> list[tuple[str, list[str]]]:
    """A Gutenberg-stripped text cut into ``(title, paragraphs)`` sections at its headings."""
    blocks = _text_blocks(_ILLUSTRATION.sub("", body))
    span = _toc_span(blocks)
    headings: dict[int, tuple[int, str]] = {}
    if span:
        toc_blocks = blocks[span[0] + 1 : span[1]]
        blocks = blocks[: span[0]] + blocks[span[1] :]
        headings = _toc_headings(blocks, toc_blocks)
        entries = sum(len(b[1]) for b in toc_blocks)
        if len(headings) < max(2, entries // 2):
            headings = {}
    by_pattern = not headings
    if by_pattern:
        headings = _pattern_headings(blocks)
    sections: list[tuple[str, list[str]]] = [(book_title, [])]
    i = 0
    while i < len(blocks):
        if _is_transcriber_note(blocks[i]):
            sections.append(("", []))  # editorial, not the book: dropped up to the next heading
            i += 1
            continue
        if i in headings:
            used, title = headings[i]
            sections.append((title, []))
            if used == 0:  # heading line followed by text in the same block
                sections[-1][1].append(paragraph_text(blocks[i][1][1:]))
                used = 1
            i += used
            continue
        sections[-1][1].append(_block_text(blocks[i]))
        i += 1
    sections = _merged_headings(sections) if by_pattern else sections
    return [(title, paragraphs) for title, paragraphs in sections if title]


def _is_transcriber_note(block: _Block) -> bool:
    """A "Transcriber's Notes:" label line (at the start of a block)."""
    first = block[1][0].strip()
    return len(first) <= 40 and re.match(r"(original )?transcriber s notes?\b", norm_key(first)) is not None


def _merged_headings(sections: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """A lone empty heading directly followed by a heading with text is its prefix ("HOW MRS FOX MARRIED
    AGAIN" + "FIRST VERSION."); runs of empty headings (a contents list) are left alone."""
    out = list(sections[:1])
    for k in range(1, len(sections)):
        title, paragraphs = sections[k]
        prev_title, prev_paragraphs = out[-1]
        lone = len(out) >= 2 and bool(out[-2][1]) and not prev_paragraphs
        if lone and paragraphs:
            out[-1] = (_joined_title(prev_title, title), paragraphs)
            continue
        out.append((title, paragraphs))
    return out


def text_book(source_path: str, data: bytes) -> ParsedBook:
    text = decoded_text(data, source_path).replace("\r\n", "\n").replace("\r", "\n")
    header, body = gutenberg_split(text)
    meta = gutenberg_metadata(header)
    title = meta.get("title") or storable(Path(source_path).stem)
    chapters = checked_chapters(book_chapters(text_sections(body, title)), source_path)
    return ParsedBook(
        source_path=source_path,
        format="txt",
        title=title,
        author=meta.get("author") or "Unknown",
        language=meta.get("language") or "und",
        chapters=chapters,
    )


def read(source_path: str, data: bytes, max_bytes: int) -> ParsedBook:
    """The format table's entry point: a plain-text book."""
    return text_book(source_path, data)
