"""Every seed source has documented size caps (docs/domains.md, "Size caps on seed files"), checked in one linear
pass before any domain reads it: a line past 32 MiB, a file past 512 MiB, a seed folder past 4 GiB are refused
with the file (and line), the cap, exit 2 and nothing written, in `init --seeds` for any domain and format, in the
run's seeds.jsonl every stage reads again, in a domain's packaged seed file and in `evaluate --data`.

The over-long line is a real 32 MiB line (written in a few tens of milliseconds); the oversized files are sparse,
so they take no disk and are refused from their size alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from genenv_cli.core.errors import InputError
from hostile import cli, snapshot
from paths import ROOT

LINE_CAP, FILE_CAP, FOLDER_CAP = 32 << 20, 512 << 20, 4 << 30  # as docs/domains.md gives them
ARITH = {"id": "a1", "split": "train", "shape": "2op-1d", "expression": "5 - 2 + 9", "answer": 12}


def _long_line_file(path: Path, record: dict, pad: int = LINE_CAP) -> Path:
    """A JSON lines file whose second line is one well-formed record padded past `pad` bytes (an extra key the
    readers otherwise ignore)."""
    first = json.dumps(record)
    second = json.dumps({**record, "id": "a2", "note": "x" * pad})
    path.write_text(first + "\n" + second + "\n")
    return path


def _sparse(path: Path, size: int) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def test_the_caps_are_the_documented_ones():
    from genenv_cli.core.sizecaps import DATA, SEEDS

    doc = (ROOT / "docs" / "domains.md").read_text()
    assert "| one line (a JSON lines record, a CSV row's line, a JSON document written on one line) | 32 MiB |" in doc
    assert "| one file | 512 MiB |" in doc and "| all files of a seed folder | 4 GiB |" in doc
    assert (SEEDS.line, SEEDS.file, SEEDS.folder, SEEDS.files) == (LINE_CAP, FILE_CAP, FOLDER_CAP, 100_000)
    assert (DATA.line, DATA.file) == (SEEDS.line, SEEDS.file)


def test_init_refuses_a_seed_line_past_the_cap_with_its_line(tmp_path):
    seeds = _long_line_file(tmp_path / "seeds.jsonl", ARITH)
    r = cli("init", tmp_path / "r", "--domain", "arith", "--seeds", seeds)
    assert "seeds.jsonl, line 2" in r.stderr and "32 MiB" in r.stderr and "seed file" in r.stderr
    assert not (tmp_path / "r" / "genenv.toml").exists() and not (tmp_path / "r" / "seeds").exists()


def test_init_refuses_a_seed_file_past_the_cap_from_its_size(tmp_path):
    seeds = _sparse(tmp_path / "huge.csv", FILE_CAP + 1)
    r = cli("init", tmp_path / "r", "--domain", "bamboogle", "--seeds", seeds)
    assert "huge.csv" in r.stderr and "512 MiB" in r.stderr and f"{FILE_CAP + 1:,} bytes" in r.stderr
    assert not (tmp_path / "r" / "genenv.toml").exists()


def test_init_refuses_a_seed_folder_past_the_cap_before_reading_it(tmp_path):
    folder = tmp_path / "train"
    folder.mkdir()
    for i in range(9):  # nine files under the file cap, over 4 GiB together
        trial = folder / f"pick_and_place_simple-Mug-None-Desk-{i}" / "trial_1"
        trial.mkdir(parents=True)
        _sparse(trial / "game.tw-pddl", FOLDER_CAP // 8)
    r = cli("init", tmp_path / "r", "--domain", "alfworld-game", "--seeds", folder)
    assert "--seeds" in r.stderr and "4 GiB" in r.stderr and "folder" in r.stderr
    assert not (tmp_path / "r" / "genenv.toml").exists()


def test_the_runs_seed_file_is_checked_at_every_stage(tmp_path):
    """A hand-edited RUN/seeds/seeds.jsonl with a line past the cap stops a stage's start with its line."""
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps(ARITH) + "\n")
    root = tmp_path / "r"
    cli("init", root, "--domain", "arith", "--seeds", seeds, "--agent-model", "replay", "--env-model", "replay",
        expect=0)
    run_seeds = root / "seeds" / "seeds.jsonl"
    row = json.loads(run_seeds.read_text().splitlines()[0])
    run_seeds.write_text(json.dumps(row) + "\n" + json.dumps({**row, "id": "a2", "pad": "x" * LINE_CAP}) + "\n")
    before = snapshot(root)
    r = cli("generate-tasks", "--epoch", "1", "--run", root)
    assert "seeds.jsonl, line 2" in r.stderr and "32 MiB" in r.stderr
    assert snapshot(root) == before


def test_a_domains_packaged_seed_file_is_capped(tmp_path):
    """A plugin domain's own seed file (seed_file in its package) is read with the same caps."""
    from genenv_cli.domains.arith import ArithDomain

    path = _long_line_file(tmp_path / "plugin_seeds.jsonl", ARITH)

    class Packaged(ArithDomain):
        def seed_path(self) -> Path:
            return path

    with pytest.raises(InputError) as err:
        Packaged().seeds("train")
    assert "plugin_seeds.jsonl, line 2" in str(err.value) and "32 MiB" in str(err.value)


def test_evaluate_data_is_capped(tmp_path):
    data = tmp_path / "bamboogle.jsonl"
    record = {"id": "q1", "question": "Who wrote Hamlet?", "golden_answers": ["Shakespeare"]}
    _long_line_file(data, record)
    r = cli("evaluate", "--bench", "bamboogle", "--data", data, "--export", tmp_path / "out.jsonl")
    assert "bamboogle.jsonl, line 2" in r.stderr and "32 MiB" in r.stderr and "benchmark data file" in r.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_line_at_the_cap_is_scanned_in_a_bounded_number_of_reads(tmp_path, monkeypatch):
    """The scan's work is bounded by the file's size: one read per chunk, never a step per byte or per line pair
    (a line of exactly the cap passes; one byte more is refused)."""
    from genenv_cli.core import sizecaps

    at_cap = tmp_path / "at_cap.jsonl"
    at_cap.write_bytes(b"a" * LINE_CAP + b"\n" + b"b\n" * 100_000)
    calls = []
    real_read = os.read
    monkeypatch.setattr(sizecaps.os, "read", lambda fd, n: calls.append(n) or real_read(fd, n))
    assert sizecaps.scan_file(at_cap, sizecaps.SEEDS) == at_cap.stat().st_size
    chunk = max(calls)
    assert len(calls) <= at_cap.stat().st_size // chunk + 2
    over = tmp_path / "over.jsonl"
    over.write_bytes(b"b\n" * 3 + b"a" * (LINE_CAP + 1))
    with pytest.raises(InputError, match=r"over\.jsonl, line 4: the line is longer than 32 MiB"):
        sizecaps.scan_file(over, sizecaps.SEEDS)


def test_the_capped_line_reader_holds_no_more_than_the_cap(tmp_path):
    """json_lines with caps refuses an endless line after reading one byte past the cap (a file of one 40 MiB line
    is never read whole), and reads a line of exactly the cap."""
    from genenv_cli.core.jsonio import json_lines
    from genenv_cli.core.sizecaps import SEEDS

    at_cap = tmp_path / "ok.jsonl"
    at_cap.write_bytes(b'"' + b"x" * (LINE_CAP - 2) + b'"\n')
    assert [len(v) for _, v in json_lines(at_cap, "a string", SEEDS)] == [LINE_CAP - 2]
    endless = tmp_path / "endless.jsonl"
    endless.write_bytes(b'"' + b"x" * (40 << 20))
    with pytest.raises(InputError, match=r"endless\.jsonl, line 1: the line is longer than 32 MiB"):
        list(json_lines(endless, "a string", SEEDS))


def test_the_real_benchmark_files_are_inside_the_caps():
    from genenv_cli.core.sizecaps import SEEDS, scan_source

    data = ROOT.parent / "shared" / "data" / "travelplanner"
    if not data.is_dir():
        pytest.skip("the real TravelPlanner files are not here (../shared/data/travelplanner)")
    for name in ("train_ref_info.jsonl", "std_travelplanner.jsonl"):
        scan_source(data / name, SEEDS)
    scan_source(data / "database", SEEDS)


@pytest.mark.parametrize("name", ["PayloadNotObject", "IdNotText"])
def test_a_plugin_domains_seeds_are_checked_where_they_come_back(name):
    """A plugin domain's own seeds() (not read from a seed file) is checked as it returns: a list of seed tasks with
    text fields and an object payload, named as the plugin's error."""
    from genenv_cli.catalogue.domains import DOMAINS, stage_domain
    from genenv_cli.core.plugin_guard import PluginError

    row = "hostile-seeds-" + name.lower()
    DOMAINS.register(row, f"hostile_seeds:{name}")
    try:
        with pytest.raises(PluginError, match=rf"plugin `{row}`.*seeds\(\) returned the seed task"):
            stage_domain(row, 1.0).seeds("train")
    finally:
        DOMAINS.unregister(row)
