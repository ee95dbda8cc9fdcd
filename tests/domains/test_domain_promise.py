"""The family domains' promise, one test over all of them: train on what you evaluate.

For every seed a family domain imports from a benchmark's files (`genenv init --seeds`, read back as training
reads the run's seeds), the agent's training prompt equals the prompt `genenv evaluate --export` writes for the
same item, and the domain's reward on a right and on a wrong prediction equals the verdict `genenv evaluate
--predictions` records. The families are the registry rows marked `family`; each declares its own case (which files
`init --seeds` and `evaluate --data` take, under which protocol: `promise_case` beside its test answers). The files
are the hand-written fixtures in the benchmarks' official formats; docs/domains.md says how to run the same check on
the real release files (GENENV_PROMISE_DATA).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from domain_cases import CASES, NoPromiseCase, data_folder, promise_for
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.cli import app
from genenv_cli.domains.answers import PromiseCase
from genenv_cli.domains.seedfiles import load_run_seeds

runner = CliRunner()
FAMILY = sorted(n for n in DOMAINS.names() if DOMAINS.facts(n).get("family"))  # the registry rows say which


def declared(name: str, data: Path) -> PromiseCase:
    """The family's own promise case for `data` (tests/domain_cases.py: `promise_for`); a family that declares none
    fails the test, saying what is missing, rather than going unchecked."""
    try:
        return promise_for(name, data)
    except NoPromiseCase as exc:
        pytest.fail(str(exc))


def _real_cases() -> dict[str, PromiseCase]:
    """GENENV_PROMISE_DATA=NAME=PATH[,NAME=PATH...]: the same check on a benchmark's real files, each family's case
    declared for PATH as for its hand-written files."""
    out: dict[str, PromiseCase] = {}
    for spec in filter(None, os.environ.get("GENENV_PROMISE_DATA", "").split(",")):
        name, _, path = spec.partition("=")
        out[name] = declared(name, Path(path))
    return out


def test_every_family_domain_declares_its_promise_case():
    assert FAMILY, "no registry row is a benchmark family"
    for name in FAMILY:
        case = declared(name, data_folder(name))
        assert case.seeds and all(p.exists() for p in [*case.seeds, case.data]), (name, case)


def test_a_family_without_a_promise_case_fails_saying_so():
    DOMAINS.register("family-without-promise", "genenv_cli.domains.arith:ArithDomain", family=True,
                     test_answers="genenv_cli.domains.answers.arith:contract_answers")
    try:
        with pytest.raises(NoPromiseCase, match="'family-without-promise' declares no promise case: its test answers "
                                                "module genenv_cli.domains.answers.arith needs a `promise_case"):
            promise_for("family-without-promise", data_folder("arith"))
    finally:
        DOMAINS.unregister("family-without-promise")


def invoke(*args: Any) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output + str(result.exception)
    return result.output


def check_promise(name: str, case: PromiseCase, tmp_path: Path) -> tuple[int, dict[str, list[str]]]:
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
    n, odd = check_promise(name, declared(name, data_folder(name)), tmp_path)
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
