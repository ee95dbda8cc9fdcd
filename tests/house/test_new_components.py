"""A new domain or suite is its own files plus one registry row. A throwaway domain and a throwaway suite are written
to a temporary folder, registered with one `register` call each, and then go through what every built-in goes
through: the domain passes the domain contract (the code `genenv domains check` runs), with the answers it declares
and with the test answers its row names (read by tests/domain_cases.py, as the built-ins' are), and its row's
output lengths reach the run's config; the suite is listed by `evaluate --list`, exports its samples and scores
predictions with its own metric. Nothing else is edited."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from domain_cases import answers_for
from genenv_cli.actions.evaluate import evaluate
from genenv_cli.catalogue.config import Config, config_from_dict
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.catalogue.suites import BENCHMARKS, list_benchmarks
from genenv_cli.domains.checks import run_contract
from paths import ROOT

# the throwaway domain's test answers, in a module of its own as a built-in domain's are (genenv_cli/domains/answers/)
ANSWERS = '''
from genenv_cli.domains.checks import DomainCase


def contract_answers(data):
    return DomainCase(gold=lambda p: f"{p['value']} {p['unit']} is {p['answer']} {p['to']}. Answer: {p['answer']}",
                      wrong=lambda p: f"Answer: {2 * p['answer'] + 1}",
                      env_text=lambda d, p: "Here is one. " + d.render_task(p))
'''

EXAMPLE = ROOT / "examples" / "unitconv" / "genenv_unitconv"

SUITE = '''
import json
from pathlib import Path

from genenv_cli.evals.base import Benchmark, EvalSample, LoadedData, Verdict


class Capitals(Benchmark):
    name = "capitals"
    description = "a throwaway suite: name the capital"
    categories = ["europe"]
    splits = ["test"]
    versions = ["v1"]

    def load(self, *, data, split, version, protocol, cache_dir):
        rows = [json.loads(line) for line in Path(data).read_text().splitlines()]
        samples = [EvalSample(r["id"], "europe", [{"role": "user", "content": r["q"]}], r["a"]) for r in rows]
        return LoadedData(samples, "v1", str(data), "0" * 64)

    def score(self, sample, output, protocol):
        ok = output.strip().lower() == sample.gold.lower()
        return Verdict(ok, output.strip(), "" if ok else f"expected {sample.gold}")

    def summarize(self, samples, verdicts, protocol):
        n = len(verdicts)
        acc = 100.0 * sum(v.correct for v in verdicts) / n if n else 0.0
        return {"overall": {"accuracy": acc, "n": n}, "categories": {"europe": {"accuracy": acc, "n": n}}}
'''


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_throwaway_domain_registered_from_a_folder_passes_the_contract(on_path):
    package = on_path / "throwaway_domain"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns("__pycache__"))
    init = package / "__init__.py"
    init.write_text(init.read_text().replace("genenv_unitconv", "throwaway_domain"))
    (package / "answers.py").write_text(textwrap.dedent(ANSWERS))
    DOMAINS.register("throwaway", "throwaway_domain.domain:UnitConvDomain", lengths={"generate.max_new_tokens": 768},
                     test_answers="throwaway_domain.answers:contract_answers")
    try:
        assert "throwaway" in DOMAINS.names()
        results = run_contract(get_domain("throwaway"))
        assert [(r.name, r.status) for r in results] == [
            ("seeds", "ok"), ("answers", "ok"), ("environment output", "ok"), ("prompts", "ok"),
            ("fingerprints", "ok")], results
        case = answers_for("throwaway")  # found through the row, as a built-in domain's test answers are
        item = {"value": 3, "unit": "km", "to": "m", "answer": 3000}
        assert case is not None and case.gold(item) == "3 km is 3000 m. Answer: 3000"
        results = run_contract(get_domain("throwaway"), case)
        assert [(r.name, r.status) for r in results] == [
            ("seeds", "ok"), ("answers", "ok"), ("environment output", "ok"), ("prompts", "ok"),
            ("fingerprints", "ok")], results
        cfg = config_from_dict({"run": {"domain": "throwaway"}}, "test")
        assert cfg.generate.max_new_tokens == 768  # the row's lengths, read by the config
        mine = config_from_dict({"run": {"domain": "throwaway"}, "generate": {"max_new_tokens": 99}}, "test")
        assert mine.generate.max_new_tokens == 99  # a value the user set wins
    finally:
        DOMAINS.unregister("throwaway")
    assert "throwaway" not in DOMAINS.names()


def test_a_throwaway_suite_registered_from_a_folder_exports_and_scores(on_path):
    (on_path / "throwaway_suite.py").write_text(textwrap.dedent(SUITE))
    data = on_path / "capitals.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "fr", "q": "Capital of France?", "a": "Paris"}, {"id": "it", "q": "Capital of Italy?", "a": "Rome"},
        {"id": "es", "q": "Capital of Spain?", "a": "Madrid"}]))
    BENCHMARKS.register("capitals", "throwaway_suite:Capitals")
    try:
        assert "capitals" in [b["name"] for b in list_benchmarks()]
        exported = on_path / "inputs.jsonl"
        evaluate(None, Config(), "capitals", data=data, export=exported)
        assert [json.loads(line)["id"] for line in exported.read_text().splitlines()] == ["fr", "it", "es"]
        preds = on_path / "preds.jsonl"
        preds.write_text('{"id": "fr", "output": "Paris"}\n{"id": "it", "output": "Milan"}\n'
                         '{"id": "es", "output": " madrid "}\n')
        result = evaluate(None, Config(), "capitals", data=data, predictions=preds, out_dir=on_path / "out")
        assert result["headline"] == {"name": "accuracy", "value": pytest.approx(200 / 3)}
        assert result["counts"]["correct"] == 2
        assert (on_path / "out" / "capitals" / "pred-preds.json").is_file()
    finally:
        BENCHMARKS.unregister("capitals")
    assert "capitals" not in BENCHMARKS.names()
