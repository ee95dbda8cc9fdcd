"""The family domains' promise, one test over all of them: train on what you evaluate.

For every seed a family domain imports from a benchmark's files (`genenv init --seeds`, read back as training
reads the run's seeds), the agent's training prompt equals the prompt `genenv evaluate --export` writes for the
same item, and the domain's reward on a right and on a wrong prediction equals the verdict `genenv evaluate
--predictions` records. The files are the hand-written fixtures in the benchmarks' official formats; docs/domains.md
says how to run the same check on the real release files (GENENV_PROMISE_DATA).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from domain_cases import CASES
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.cli import app
from genenv_cli.domains.seedfiles import load_run_seeds
from paths import FIXTURES

FIX = FIXTURES
runner = CliRunner()


@dataclass
class Case:
    """The right and wrong answers are the test answers the domain's registry row names (tests/domain_cases.py)."""
    seeds: list[Path]                    # the files `init --seeds` takes
    data: Path                           # what `evaluate --data` takes
    protocol: str


def _alfworld_games() -> list[Path]:
    return sorted((FIX / "alfworld").rglob("game.scripted.json"))


def cases() -> dict[str, Case]:
    bfcl = FIX / "bfcl"
    return {
        "bfcl": Case([p for p in sorted(bfcl.glob("BFCL_v4_*.json"))
                      if "multi_turn" not in p.name and "live_relevance" not in p.name], bfcl, "official"),
        "api-bank": Case([FIX / "api_bank"], FIX / "api_bank", "official"),
        "bamboogle": Case([FIX / "bamboogle" / "bamboogle.json"], FIX / "bamboogle" / "bamboogle.json", "official"),
        "alfworld": Case(_alfworld_games(), FIX / "alfworld", "paper"),
        # the domain trains on the training split only: the fixture's queries as train.csv
        "travelplanner": Case([FIX / "travelplanner" / "train.csv"], FIX / "travelplanner" / "train.csv", "official"),
    }


def _real_cases() -> dict[str, Case]:
    """GENENV_PROMISE_DATA=NAME=PATH[,NAME=PATH...]: the same check on a benchmark's real files (seeds and
    --data both PATH; a folder of BFCL question files is taken file by file)."""
    out: dict[str, Case] = {}
    base = cases()
    for spec in filter(None, os.environ.get("GENENV_PROMISE_DATA", "").split(",")):
        name, _, path = spec.partition("=")
        p = Path(path)
        seeds = [p]
        if name == "bfcl" and p.is_dir():
            seeds = [f for f in sorted(p.glob("BFCL_v*_*.json"))
                     if re.search(r"_(simple|multiple|parallel|irrelevance|live_simple|live_multiple|live_parallel)",
                                  f.name) and "live_relevance" not in f.name]
        if name == "alfworld" and p.is_dir():  # one game file per --seeds
            seeds = sorted(p.rglob("game.tw-pddl")) or sorted(p.rglob("game.scripted.json"))
        out[name] = Case(seeds, p, base[name].protocol)
    return out


FAMILY = sorted(n for n in DOMAINS.names() if DOMAINS.facts(n).get("family"))  # the registry rows say which


def test_every_family_domain_is_covered():
    assert set(FAMILY) == set(cases()) == {"bfcl", "api-bank", "bamboogle", "alfworld", "travelplanner"}


def invoke(*args: Any) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output + str(result.exception)
    return result.output


def check_promise(name: str, case: Case, tmp_path: Path) -> tuple[int, dict[str, list[str]]]:
    dom = get_domain(name)
    run = tmp_path / "run"
    invoke("init", run, "--domain", name, *[x for s in case.seeds for x in ("--seeds", s)])
    tasks = load_run_seeds(dom, run / "seeds" / "seeds.jsonl")
    export = tmp_path / "export.jsonl"
    invoke("evaluate", "--bench", dom.benchmark, "--data", case.data, "--protocol", case.protocol,
           "--export", export)
    exported = [json.loads(line) for line in export.read_text().splitlines()]
    by_prompt: dict[str, list[dict[str, Any]]] = {}
    for rec in exported:
        by_prompt.setdefault(json.dumps(rec["messages"]), []).append(rec)
    preds, expected = [], []
    for t in tasks:
        messages = dom.agent_messages(t.payload)
        matches = by_prompt.get(json.dumps(messages), [])
        assert matches, f"{name} {t.id}: its training prompt is not any prompt evaluate --export writes"
        rec = next((r for r in matches if t.id.endswith(str(r["id"]))), matches[0])
        answers = CASES[name]
        for kind, out in (("right", answers.gold(t.payload)), ("wrong", answers.wrong(t.payload))):
            preds.append({"id": rec["id"], "output": out})
            expected.append((t.id, kind, rec["id"], dom.score(t.payload, out).reward))
    # evaluate scores one prediction per id: the right ones in one file, the wrong ones in another
    odd: dict[str, list[str]] = {}   # right answers scored 0, wrong ones scored 1 (both sides agreeing)
    for kind in ("right", "wrong"):
        path = tmp_path / f"{kind}.jsonl"
        mine = {rec_id: reward for (_, k, rec_id, reward) in expected if k == kind}
        path.write_text("".join(json.dumps(p) + "\n" for p, e in zip(preds, expected, strict=True) if e[1] == kind))
        result = runner.invoke(app, ["evaluate", "--bench", dom.benchmark, "--data", str(case.data), "--protocol",
                                     case.protocol, "--predictions", str(path), "--quiet"])
        assert result.exit_code == 0, result.output
        verdicts = _verdicts(dom.benchmark, path, tmp_path)
        for rec_id, reward in mine.items():
            assert reward == float(verdicts[rec_id]), (name, kind, rec_id, reward)
        odd[kind] = sorted(i for i, r in mine.items() if r != (kind == "right"))
    return len(tasks), odd


def _verdicts(bench: str, predictions: Path, cwd: Path) -> dict[str, bool]:
    """The per-sample verdicts evaluate --predictions wrote (evals/<bench>/pred-<name>.samples.jsonl)."""
    found = sorted(Path("evals", bench).glob(f"pred-*{predictions.stem}*.samples.jsonl"),
                   key=lambda p: p.stat().st_mtime)
    assert found, f"no samples file for {predictions}"
    return {r["id"]: r["correct"] for r in map(json.loads, found[-1].read_text().splitlines())}


@pytest.mark.parametrize("name", FAMILY)
def test_training_prompt_and_reward_equal_evaluate(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    n, odd = check_promise(name, cases()[name], tmp_path)
    assert n >= 3 and odd == {"right": [], "wrong": []}, odd


@pytest.mark.skipif(not os.environ.get("GENENV_PROMISE_DATA"), reason="GENENV_PROMISE_DATA names no real files")
@pytest.mark.parametrize("name", FAMILY)
def test_promise_on_real_files(name, tmp_path, monkeypatch):
    real = _real_cases()
    if name not in real:
        pytest.skip(f"GENENV_PROMISE_DATA names no {name} files")
    monkeypatch.chdir(tmp_path)
    n, odd = check_promise(name, real[name], tmp_path)
    print(f"{name}: {n} seeds, prompt and verdict equal; right answers scoring 0 on both sides: "
          f"{len(odd['right'])} {odd['right'][:10]}; wrong answers scoring 1: {len(odd['wrong'])} {odd['wrong'][:10]}")
