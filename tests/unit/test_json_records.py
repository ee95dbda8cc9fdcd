"""The one reader of files that hold a JSON array or JSON lines (benchmark data comes both ways): every record
with its place, and every failure naming the file and the line."""

from __future__ import annotations

import json

import pytest

from genenv_cli.core.errors import InputError
from genenv_cli.core.jsonio import json_document, json_records

RECORDS = [{"id": "a", "n": 1}, {"id": "b", "n": 2}]


def test_an_array_gives_its_records_by_index(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("\n  " + json.dumps(RECORDS, indent=2))
    assert json_records(path, "records") == [(f"{path}, record 0", RECORDS[0]), (f"{path}, record 1", RECORDS[1])]


def test_json_lines_give_their_records_by_line(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(RECORDS[0]).encode() + b"\n\n" + json.dumps(RECORDS[1]).encode())
    assert json_records(path, "records") == [(f"{path}, line 1", RECORDS[0]), (f"{path}, line 3", RECORDS[1])]


def test_empty_files_hold_no_records(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("\n  \n")
    assert json_records(path, "records") == []
    path.write_text("[]")
    assert json_records(path, "records") == []


def test_a_bad_line_is_named(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(RECORDS[0]) + "\n{broken\n")
    with pytest.raises(InputError, match=r"data.jsonl, line 2: not valid JSON \(.* at column 2\); expected records"):
        json_records(path, "records")
    path.write_bytes(json.dumps(RECORDS[0]).encode() + b'\n{"id": "\xff"}\n')
    with pytest.raises(InputError, match=r"data.jsonl, line 2: not valid UTF-8 \(byte 0xff at column 9\)"):
        json_records(path, "records")
    path.write_text(json.dumps(RECORDS[0]) + "\n" + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(InputError, match=r"data.jsonl, line 2: JSON that cannot be read"):
        json_records(path, "records", array=False)


def test_a_bad_array_is_named_by_line(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('[\n  {"id": "a"},\n  {"id": \n]\n')
    with pytest.raises(InputError, match=r"data.json, line 4: not valid JSON"):
        json_records(path, "records")
    path.write_bytes(b'[\n  {"id": "a"},\n  {"id": "\xc3\x28"}\n]')
    with pytest.raises(InputError, match=r"data.json, line 3: not valid UTF-8 \(byte 0xc3 at column 11\)"):
        json_records(path, "records")


def test_the_form_can_be_required(tmp_path):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(RECORDS[0]))
    with pytest.raises(InputError, match=r"data.json: expected a JSON list of records, got a JSON object"):
        json_records(path, "records", array=True)
    path.write_text(json.dumps(RECORDS))
    assert json_records(path, "records", array=False) == [(f"{path}, line 1", RECORDS)]  # one line, one value


def test_missing_files_and_folders_are_named(tmp_path):
    with pytest.raises(InputError, match=r"nope.json: cannot be read"):
        json_records(tmp_path / "nope.json", "records")
    with pytest.raises(InputError, match="is a folder"):
        json_document(tmp_path, "records")
