"""What a user hands genenv, damaged: predictions, seed files and a benchmark's data files (invalid UTF-8, lone
surrogates, a folder for a file, a CSV cell past the csv module's limit, a damaged TravelPlanner database). Each is
refused with exit 2 and a message naming the file and line, leaves no file behind, and a damaged benchmark
database is an input error, never a score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from genenv_cli.catalogue.config import render_config
from hostile import BAMBOOGLE, cli, snapshot
from paths import FIXTURES, SRC

# ---------------------------------------------------------------- predictions

def test_invalid_utf8_in_predictions_is_named(run, tmp_path):
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(b'{"id": "0", "output": "ok"}\n{"id": "1", "output": "\xc3\x28"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", preds, "--run", run)
    assert "p.jsonl, line 2: not valid UTF-8" in r.stderr


def test_predictions_folder_is_named(run, tmp_path):
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", tmp_path, "--run", run)
    assert "is a folder; --predictions takes a JSONL file" in r.stderr


def test_a_lone_surrogate_in_predictions_is_named_and_leaves_no_temp_file(tmp_path):
    from genenv_cli.catalogue.config import Config

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "genenv.toml").write_text(render_config(Config()))
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "0", "output": "fine"}\n{"id": "1", "output": "a\\udc00b"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", preds, "--run", tmp_path / "r")
    assert "preds.jsonl, line 2" in r.stderr and "lone surrogate" in r.stderr
    assert not [p for p in (tmp_path / "r").rglob("*") if ".tmp-" in p.name]


# ---------------------------------------------------------------- seed files

ARITH = '{{"id": "{id}", "split": "train", "shape": "2op-1d", "expression": "5 - 2 + 9", "answer": 12}}\n'


def test_a_lone_surrogate_in_a_seed_id_is_named(tmp_path):
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(ARITH.format(id="ok-1") + ARITH.format(id="a\\ud800"))
    r = cli("init", tmp_path / "r", "--domain", "arith", "--seeds", seeds)
    assert "seeds.jsonl, line 2" in r.stderr and "lone surrogate" in r.stderr
    assert not (tmp_path / "r").exists() or not list((tmp_path / "r").rglob("*.tmp-*"))
    pair = tmp_path / "pair.jsonl"  # an escaped surrogate pair is one ordinary character
    pair.write_text(ARITH.format(id="\\ud83d\\ude00"))
    cli("init", tmp_path / "r2", "--domain", "arith", "--seeds", pair, expect=0)


def test_init_force_on_a_mixed_run_keeps_the_previous_seeds_when_a_seed_file_is_bad(tmp_path):
    data = SRC / "genenv_cli" / "domains" / "data"
    root = tmp_path / "mix"
    cli("init", root, "--domain", "arith", "--domain", "tool_call", "--seeds",
        f"arith={data / 'arith_seeds.jsonl'}", "--seeds", f"tool_call={data / 'tool_call_seeds.jsonl'}", expect=0)
    before = snapshot(root)
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "a1", "split": "train", "expression": "2 + 3", "answer": 5}\n')
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\xff\xfe\x89PNG\r\n" * 50)
    r = cli("init", root, "--domain", "arith", "--domain", "tool_call", "--force", "--seeds", f"arith={other}",
            "--seeds", f"tool_call={binary}")
    assert str(binary) in r.stderr
    assert snapshot(root) == before  # the first domain's seeds, their manifest and genenv.toml as they were
    assert not [p for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


# ---------------------------------------------------------------- a CSV cell past the csv module's limit

def test_a_huge_bamboogle_cell_is_named_in_seeds_and_data(tmp_path):
    big = tmp_path / "big.csv"
    big.write_text('Question,Answer\nWho wrote Hamlet?,Shakespeare\n"' + "x" * 140_000 + '",y\n')
    r = cli("init", tmp_path / "r", "--domain", "bamboogle", "--seeds", big)
    assert "big.csv, line 3" in r.stderr and "field" in r.stderr
    (tmp_path / "preds.jsonl").write_text('{"id": "0", "output": "x"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", big, "--predictions", tmp_path / "preds.jsonl")
    assert "big.csv, line 3" in r.stderr


def test_a_huge_bamboogle_cell_is_refused_whatever_read_a_csv_before(tmp_path):
    """The csv module's field limit is process-wide: a TravelPlanner split file read earlier in the same process
    (whose reader needs a higher limit) must not lift the Bamboogle reader's."""
    import csv

    from genenv_cli.core.errors import InputError
    from genenv_cli.families.bamboogle.benchmark import read_bamboogle
    from genenv_cli.families.travelplanner.queries import read_records

    split = tmp_path / "validation.csv"
    split.write_text("query,days\n" + '"' + "q" * 200_000 + '",3\n')
    assert len(read_records(split)[0]["query"]) == 200_000
    assert csv.field_size_limit() == 131_072
    big = tmp_path / "big.csv"
    big.write_text('Question,Answer\nWho wrote Hamlet?,Shakespeare\n"' + "x" * 140_000 + '",y\n')
    with pytest.raises(InputError, match="line 3"):
        read_bamboogle(big)


# ---------------------------------------------------------------- a damaged TravelPlanner database is a data error

TRAVEL = FIXTURES / "travelplanner"

FLIGHTS = Path("database") / "flights" / "clean_Flights_2022.csv"


def _gold_predictions(path: Path) -> Path:
    gold = json.loads((TRAVEL / "gold_plans.json").read_text())
    path.write_text("".join(json.dumps({"id": k, "output": json.dumps(v)}) + "\n" for k, v in gold.items()))
    return path


@pytest.mark.parametrize("damage,expected", [
    (lambda f: f.write_bytes(bytes(range(256)) * 12), "lacks the column"),
    (lambda f: f.write_text("garbage\nfoo,bar\n"), "lacks the column"),
    (lambda f: f.write_text(f.read_text().replace("F0001001,120,", "F0001001,cheap,", 1)),
     "the Price field 'cheap' is not a number"),
], ids=["binary", "text", "price"])
def test_a_damaged_travelplanner_database_is_an_input_error_not_a_score(tmp_path, damage, expected):
    import shutil

    data = tmp_path / "tp"
    shutil.copytree(TRAVEL, data)
    preds = _gold_predictions(tmp_path / "preds.jsonl")
    (tmp_path / "r").mkdir()
    from genenv_cli.catalogue.config import Config

    (tmp_path / "r" / "genenv.toml").write_text(render_config(Config()))
    ok = cli("evaluate", "--bench", "travelplanner", "--data", data, "--predictions", preds, "--run", tmp_path / "r",
             "--json", expect=0)
    assert json.loads(ok.stdout)["headline"]["value"] == 100.0
    damage(data / FLIGHTS)
    from genenv_cli.families.travelplanner.benchmark import _open_database

    _open_database.cache_clear()  # one process reads each database once; a new command is a new process
    before = snapshot(tmp_path / "r")
    r = cli("evaluate", "--bench", "travelplanner", "--data", data, "--predictions", preds, "--run", tmp_path / "r")
    assert "clean_Flights_2022.csv" in r.stderr and expected in r.stderr, r.stderr
    assert len(r.stderr) < 1000 and snapshot(tmp_path / "r") == before


def test_grading_passes_a_data_error_through_instead_of_scoring_it():
    from genenv_cli.core.errors import InputError
    from genenv_cli.machinery import grading

    class Broken:
        def score_many(self, payloads, completions):
            raise InputError("database file flights.csv: damaged")

        def score(self, payload, completion):
            raise InputError("database file flights.csv: damaged")

    grading._DOMAIN, grading._PAYLOADS = Broken(), {"t": {}}
    try:
        with pytest.raises(InputError, match="flights.csv"):
            grading._grade((["t"], ["some completion"]))
    finally:
        grading._DOMAIN, grading._PAYLOADS = None, {}
