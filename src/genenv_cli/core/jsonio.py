"""Reading JSON and JSON lines from files, naming the file, the line and what was expected on any failure.

The one JSON reader under everything genenv reads from disk: a run's JSONL files (validated against their schema
by `rundir.datafiles`), benchmark data files, seed files, predictions. Text that is not UTF-8, a line that is not JSON, a
number past Python's digit limit, nesting past its depth and a lone surrogate escape are each an `InputError`
naming the place, never a traceback. Files are opened with `safefiles.open_regular` (never a device or a pipe).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from genenv_cli.core.errors import InputError, elide
from genenv_cli.core.safefiles import open_regular
from genenv_cli.core.sizecaps import Caps, file_too_large, line_too_long

_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte-order mark, as spreadsheet exports write it


def _open_bytes(path: Path, expected: str) -> BinaryIO:
    if path.is_dir():
        raise InputError(f"{path} is a folder; expected a file holding {expected}.")
    try:  # bytes: text that is not UTF-8 is named by line, not a UnicodeDecodeError; never a device or a pipe
        return os.fdopen(open_regular(path), "rb")
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc}); expected {expected}.") from None


def _utf8(raw: bytes, where: str, expected: str, first_line: int = 1) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + raw.count(b"\n", 0, exc.start)
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise InputError(f"{where}, line {line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at column {column}); "
                         f"expected {expected}, in UTF-8.") from None


# A \uD800-\uDFFF escape: valid JSON, but a lone one decodes to a string that UTF-8 cannot hold, so every later
# write of it fails. Escapes that pair up (an emoji written as two escapes) decode to one ordinary character.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate(value: Any) -> str | None:
    """The first string (key or value) in a decoded JSON value that holds a lone surrogate, else None."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return v
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return None


def _loads(text: str, where: str, expected: str, line: int | None = None) -> Any:
    """json.loads naming the place of a failure: `where` is the file, and `line` the line `text` starts on (None
    when `text` is the whole file: the decoder's own line is named then). A string holding a lone surrogate
    escape (`"\\ud800"`) is refused here, on reading, rather than failing every write of it later."""
    value = _loads_json(text, where, expected, line)
    hit = _SURROGATE_ESCAPE.search(text)
    if hit is not None:
        bad = _lone_surrogate(value)
        if bad is not None:
            at = line if line is not None else text.count("\n", 0, hit.start()) + 1
            char = _SURROGATE.search(bad).group()  # type: ignore[union-attr]
            raise InputError(f"{where}, line {at}: the string {elide(ascii(bad), 80)} holds a lone surrogate "
                             f"(\\u{ord(char):04x}), which is not a character; expected {expected}, with text that "
                             f"UTF-8 can hold.")
    return value


def _loads_json(text: str, where: str, expected: str, line: int | None = None) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {line}" if line is not None else f"line {exc.lineno}"
        raise InputError(f"{where}, {at}: not valid JSON ({exc.msg} at column {exc.colno}); expected {expected}.") from None
    except (ValueError, RecursionError) as exc:  # a number past Python's digit limit, nesting past its depth
        at = f", line {line}" if line is not None else ""
        raise InputError(f"{where}{at}: JSON that cannot be read ({type(exc).__name__}: {str(exc)[:100]}); "
                         f"expected {expected}.") from None


def json_lines(path: Path, expected: str, caps: Caps | None = None) -> Iterator[tuple[str, Any]]:
    """(where, value) for each non-blank line of a JSONL file; a line that is not JSON raises InputError naming
    the file, the line and `expected` (what a line should hold). A UTF-8 byte-order mark is allowed. `caps`
    (sizecaps.py): a file larger than `caps.file`, or a line longer than `caps.line`, is refused as it is met,
    with no more than the cap read into memory."""
    with _open_bytes(path, expected) as fh:
        if caps is not None and caps.file is not None and (size := os.fstat(fh.fileno()).st_size) > caps.file:
            raise file_too_large(path, size, caps)
        lines = iter(fh) if caps is None else _capped_lines(fh, path, caps, expected)
        for lineno, raw in enumerate(lines, 1):
            if lineno == 1:
                raw = raw.removeprefix(_BOM)
            line = _utf8(raw, str(path), expected, lineno)
            if line.strip():
                yield f"{path}, line {lineno}", _loads(line, str(path), expected, lineno)


def _capped_lines(fh: BinaryIO, path: Path, caps: Caps, expected: str) -> Iterator[bytes]:
    lineno = 0
    while raw := fh.readline(caps.line + 1):
        lineno += 1
        if len(raw) > caps.line and not (len(raw) == caps.line + 1 and raw.endswith(b"\n")):
            raise line_too_long(path, lineno, caps, expected)
        yield raw


def json_document(path: Path, expected: str) -> Any:
    """The one JSON value a whole file holds; InputError naming the file and the line when it is not UTF-8 or
    not JSON (or nests deeper / holds longer numbers than Python reads)."""
    with _open_bytes(path, expected) as fh:
        raw = fh.read().removeprefix(_BOM)
    return _loads(_utf8(raw, str(path), expected), str(path), expected)


def json_records(path: Path, expected: str, *, array: bool | None = None) -> list[tuple[str, Any]]:
    """(where, record) for each record of a file holding either one JSON array of records or JSON lines, one
    record a line (benchmark files come both ways). `where` is "<path>, line N" for JSON lines and
    "<path>, record i" (the 0-based index) for an array. `array=None` decides by the file's first non-blank
    character (`[`: an array); True or False accepts only that form. `expected` says what a record is."""
    if array is None:
        with _open_bytes(path, expected) as fh:
            array = fh.read(1 << 16).removeprefix(_BOM).lstrip()[:1] == b"["
    if not array:
        return list(json_lines(path, f"{expected}, one per line"))
    value = json_document(path, f"a JSON list of {expected}")
    if not isinstance(value, list):
        raise InputError(f"{path}: expected a JSON list of {expected}, got a JSON {_json_kind(value)}.")
    return [(f"{path}, record {i}", rec) for i, rec in enumerate(value)]


def _json_kind(value: Any) -> str:
    return {dict: "object", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
