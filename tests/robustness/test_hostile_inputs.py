"""Hostile inputs, round two: settings past any sensible value, over-long values echoed in messages, damaged data
and checkpoint files, lone surrogates, degenerate model output and non-finite training. Each answers with exit 2
and a message naming the file (or key) and what was expected, and leaves the run as it was."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.config import INT_MAX, SECTIONS, UPPER, _section_types, config_from_dict, render_config
from genenv_cli.errors import ConfigError, elide, quoted
from paths import FIXTURES

runner = CliRunner()
FIX = FIXTURES


def cli(*args: object, expect: int | None = 2):
    """Run the CLI in-process: no unhandled exception (exit 1 with a traceback) may escape."""
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{args}: unhandled {type(r.exception).__name__}: {r.exception}\n{r.output}")
    assert "Traceback" not in r.output
    if expect is not None:
        assert r.exit_code == expect, f"{args}: exit {r.exit_code}\n{r.output}"
    return r


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "logs" not in p.parts and p.name != ".lock"}


# ---------------------------------------------------------------- every number has both bounds

def _numeric_fields():
    for section, cls in SECTIONS.items():
        types = _section_types(section)
        for fld in dataclasses.fields(cls):
            if types[fld.name] in (int, float):
                yield section, fld


@pytest.mark.parametrize("section,fld", list(_numeric_fields()), ids=lambda x: getattr(x, "name", x))
def test_every_numeric_setting_has_an_explicit_lower_and_upper_bound(section, fld):
    meta, full = fld.metadata, f"{section}.{fld.name}"
    if "choices" in meta:  # a closed list bounds it both ways
        assert all(isinstance(c, int | float) for c in meta["choices"])
        return
    assert "min" in meta, f"{full} has no lower bound (min=)"
    upper = meta.get("max", UPPER.get(full))
    assert upper is not None, f"{full} has no upper bound (max= or config.UPPER): only the generic fallback"
    assert meta["min"] <= fld.default <= upper and upper < INT_MAX
    assert fld.metadata["help"], f"{full} has no help text"
    with pytest.raises(ConfigError, match=rf"`{full}` = .* (above its maximum|out of range)"):
        config_from_dict({section: {fld.name: type(fld.default)(upper) * 2 + 1}}, "genenv.toml")


@pytest.mark.parametrize("key", ["agent_update.learning_rate", "env_update.learning_rate"])
def test_a_learning_rate_of_a_million_is_refused(key):
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=rf"`{key}` = 1000000.0 is above its maximum 1.0"):
        config_from_dict({section: {name: 1e6}}, "genenv.toml")


# ---------------------------------------------------------------- over-long values are quoted shortened

def test_quoted_elides_the_middle_and_says_how_much():
    text = quoted("a" * 10_000_000 + "END")
    assert len(text) < 200 and text.startswith("'aaa") and text.endswith("aEND'")
    assert "characters left out" in text
    assert quoted("short") == "'short'" and elide("x" * 10, 10) == "x" * 10


@pytest.mark.slow
def test_a_ten_megabyte_value_makes_a_short_config_error():
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"group_size": "8" * 10_000_000}}, "genenv.toml")
    assert len(str(err.value)) < 400 and "rollout.group_size" in str(err.value)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"k" * 10_000_000: 1}}, "genenv.toml")
    assert len(str(err.value)) < 600


@pytest.mark.parametrize("prefix", ["/", "", "org/"])
@pytest.mark.slow
def test_a_ten_megabyte_agent_model_makes_a_short_error_line(tmp_path, prefix):
    from genenv_cli.config import Config

    cfg = Config()
    cfg.agent.model = prefix + "m" * 10_000_000
    (tmp_path / "genenv.toml").write_text(render_config(cfg))
    r = cli("evaluate", "--bench", "bfcl", "--limit", 1, "--run", tmp_path)
    assert r.stderr.startswith("error: ") and len(r.stderr) < 2_500, len(r.stderr)


# ---------------------------------------------------------------- "no call" must be a plain-text answer

DEGENERATE = ["", "   \n\t ", "[" * 1000, "\x00" * 50, "Sure\x00\x00", "!!! ??? ...", "```\n```",
              "{\"name\": \"get_weather\", \"arguments\": {", "[get_weather(city='Paris'", "<tool_call>",
              "<tool_call", "\x1b[31mred\x1b[0m", "ok \ud800"]
PLAIN = ["Why did the cat sit on the computer? To keep an eye on the mouse.", "No.", "42",
         "None of the functions can be used for this request.", "Ich kann das nicht (leider) tun :(",
         "[Note] No tool fits this request.", "Je ne peux pas.\n\nDésolé."]


@pytest.mark.parametrize("text", DEGENERATE, ids=range(len(DEGENERATE)))
def test_degenerate_output_is_not_a_correct_no_call_on_tool_call(text):
    from genenv_cli.domains.tool_call import ToolCallDomain

    s = ToolCallDomain().score({"request": "Tell me a joke.", "tools": ["get_weather"], "calls": []}, text)
    assert s.reward == 0.0 and not s.valid and s.error


@pytest.mark.parametrize("text", PLAIN, ids=range(len(PLAIN)))
def test_a_plain_text_answer_is_a_correct_no_call_on_tool_call(text):
    from genenv_cli.domains.tool_call import ToolCallDomain

    s = ToolCallDomain().score({"request": "Tell me a joke.", "tools": ["get_weather"], "calls": []}, text)
    assert s.reward == 1.0 and s.valid and s.error is None


def test_bfcl_training_irrelevance_refuses_garbage_but_evaluate_keeps_bfcls_rule():
    from genenv_cli.domains import get_domain
    from genenv_cli.evals import get_benchmark

    dom = get_domain("bfcl")
    item = next(s for s in dom.seeds("train") if s.shape == "irrelevance").payload
    for text in DEGENERATE:
        assert dom.score(item, text).reward == 0.0, repr(text[:20])
        if "<tool_call" not in text:  # BFCL: whatever does not decode as a call passes irrelevance
            assert get_benchmark("bfcl").score(dom.sample(item), text, "official").correct, repr(text[:20])
    assert dom.score(item, PLAIN[3]).reward == 1.0


def test_the_plain_text_check_is_linear():
    import time

    from genenv_cli.plaintext import plain_answer_problem

    # a megabyte of adversarial text is judged within 1 s of CPU time (CPU, not wall: the machine may be shared)
    for text in ("[" * 1_000_000, "(" * 500_000 + ")" * 500_000 + "x", "(x)" * 330_000, "[a]" * 330_000,
                 "(()" * 250_000 + ")" * 250_000, " " * 1_000_000, "a" * 1_000_000, "\x00" * 1_000_000):
        t0 = time.process_time()
        plain_answer_problem(text)
        assert time.process_time() - t0 < 1.0


# ---------------------------------------------------------------- a finished run to damage

E1 = Path("epochs") / "0001"
BAMBOOGLE = str(FIX / "bamboogle" / "bamboogle.csv")


@pytest.fixture(scope="session")
def finished(hostile_finished_run) -> Path:
    """One finished tool_call epoch (all five stages) on the tiny model (conftest.py: shared with the other
    tests that damage a finished run)."""
    return hostile_finished_run


@pytest.fixture
def run(finished, tmp_path) -> Path:
    import shutil

    dst = tmp_path / "run"
    shutil.copytree(finished, dst)
    return dst


def _evaluate(run: Path, *extra: object, expect: int = 2):
    return cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--limit", 1, "--run", run, "-q", *extra,
               expect=expect)


# ---------------------------------------------------------------- evaluate never falls back silently

@pytest.mark.parametrize("extra", [(), ("--epoch", 1)], ids=["latest", "epoch1"])
def test_evaluate_refuses_a_missing_agent_folder_instead_of_the_base_model(run, extra):
    import shutil

    shutil.rmtree(run / E1 / "agent")
    before = files_of(run)
    r = _evaluate(run, *extra)
    assert "epochs/0001/agent" in r.stderr and "genenv update-agent --epoch 1 --force" in r.stderr, r.stderr
    assert files_of(run) == before  # no result written for the wrong model


def test_evaluate_epoch_0_is_the_base_model_asked_for(run):
    import shutil

    shutil.rmtree(run / E1 / "agent")
    r = _evaluate(run, "--epoch", 0, "--json", expect=0)
    result = json.loads(r.stdout)
    assert result["model_tag"] != "epoch-0001-agent" and result["epoch"] is None


# ---------------------------------------------------------------- damaged checkpoint files

META = "genenv_checkpoint.json"


@pytest.mark.parametrize("damage,expected", [
    (lambda f: f.write_bytes(f.read_bytes()[:10]), "not valid JSON"),
    (lambda f: f.write_text("[1, 2]"), "holds a JSON list"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "base": 123})), "`base` is 123"),
    (lambda f: f.write_text(json.dumps({**json.loads(f.read_text()), "kind": "quantum"})), "`kind` is 'quantum'"),
    (lambda f: f.write_bytes(b"\xff\xfe" + f.read_bytes()), "not UTF-8"),
], ids=["truncated", "list", "base-int", "kind", "not-utf8"])
def test_a_damaged_checkpoint_meta_is_named(run, damage, expected):
    meta = run / E1 / "agent" / META
    damage(meta)
    before = files_of(run)
    r = _evaluate(run, "--epoch", 1)
    assert f"epochs/0001/agent/{META}" in r.stderr and expected in r.stderr, r.stderr
    assert files_of(run) == before


def test_a_truncated_adapter_is_named(run):
    weights = run / E1 / "agent" / "adapter_model.safetensors"
    assert weights.is_file()
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    before = files_of(run)
    r = _evaluate(run, "--epoch", 1)
    assert "adapter_model.safetensors: not a whole safetensors file" in r.stderr, r.stderr
    assert files_of(run) == before


# ---------------------------------------------------------------- lone surrogates

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


def test_a_lone_surrogate_in_predictions_is_named_and_leaves_no_temp_file(tmp_path):
    from genenv_cli.config import Config

    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "genenv.toml").write_text(render_config(Config()))
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"id": "0", "output": "fine"}\n{"id": "1", "output": "a\\udc00b"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", preds, "--run", tmp_path / "r")
    assert "preds.jsonl, line 2" in r.stderr and "lone surrogate" in r.stderr
    assert not [p for p in (tmp_path / "r").rglob("*") if ".tmp-" in p.name]


def test_write_jsonl_leaves_nothing_behind_when_a_record_cannot_be_written(tmp_path):
    from genenv_cli.rundir.datafiles import write_jsonl

    with pytest.raises(UnicodeEncodeError):
        write_jsonl(tmp_path / "x.tmp-1", [{"a": 1}, {"a": "\ud800"}])
    assert not list(tmp_path.iterdir())


def test_a_lone_surrogate_in_a_task_shape_stops_rollout_before_any_compute(run, monkeypatch):
    tasks = run / E1 / "tasks.jsonl"
    lines = tasks.read_text().splitlines(keepends=True)
    rec = json.loads(lines[1])
    rec["shape"] = "PLACEHOLDER"
    lines[1] = json.dumps(rec).replace("PLACEHOLDER", "\\ud800") + "\n"
    tasks.write_text("".join(lines))
    import genenv_cli.engines as engines

    def no_engine(*a, **k):
        raise AssertionError("rollout opened an engine on a tasks file it should have refused")

    monkeypatch.setattr(engines, "open_engine", no_engine)
    before = files_of(run)
    for stage in ("rollout", "score"):
        r = cli(stage, "--epoch", 1, "--run", run, "--force")
        assert "tasks.jsonl, line 2" in r.stderr and "lone surrogate" in r.stderr, r.stderr
    assert files_of(run) == before


# ---------------------------------------------------------------- a CSV cell past the csv module's limit

def test_a_huge_bamboogle_cell_is_named_in_seeds_and_data(tmp_path):
    big = tmp_path / "big.csv"
    big.write_text('Question,Answer\nWho wrote Hamlet?,Shakespeare\n"' + "x" * 140_000 + '",y\n')
    r = cli("init", tmp_path / "r", "--domain", "bamboogle", "--seeds", big)
    assert "big.csv, line 3" in r.stderr and "field" in r.stderr
    (tmp_path / "preds.jsonl").write_text('{"id": "0", "output": "x"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", big, "--predictions", tmp_path / "preds.jsonl")
    assert "big.csv, line 3" in r.stderr


# ---------------------------------------------------------------- a damaged TravelPlanner database is a data error

TRAVEL = FIX / "travelplanner"
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
    from genenv_cli.config import Config

    (tmp_path / "r" / "genenv.toml").write_text(render_config(Config()))
    ok = cli("evaluate", "--bench", "travelplanner", "--data", data, "--predictions", preds, "--run", tmp_path / "r",
             "--json", expect=0)
    assert json.loads(ok.stdout)["headline"]["value"] == 100.0
    damage(data / FLIGHTS)
    from genenv_cli.evals.travelplanner.benchmark import _open_database

    _open_database.cache_clear()  # one process reads each database once; a new command is a new process
    before = files_of(tmp_path / "r")
    r = cli("evaluate", "--bench", "travelplanner", "--data", data, "--predictions", preds, "--run", tmp_path / "r")
    assert "clean_Flights_2022.csv" in r.stderr and expected in r.stderr, r.stderr
    assert len(r.stderr) < 1000 and files_of(tmp_path / "r") == before


def test_grading_passes_a_data_error_through_instead_of_scoring_it():
    from genenv_cli import grading
    from genenv_cli.errors import InputError

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


# ---------------------------------------------------------------- non-finite training never publishes

@pytest.mark.parametrize("stage,section", [("update-agent", "agent_update"), ("update-env", "env_update")])
def test_a_diverged_update_fails_before_writing_and_names_the_learning_rate(run, monkeypatch, stage, section):
    import torch

    import genenv_cli.training.common as common

    real = common.load_policy

    def diverged(*a, **k):  # the weights the update would publish hold NaN (as a learning rate of 1e6 makes them)
        policy = real(*a, **k)
        with torch.no_grad():
            next(p for p in policy.model.parameters() if p.requires_grad).fill_(float("nan"))
        return policy

    monkeypatch.setattr(common, "load_policy", diverged)
    before = files_of(run)
    r = cli(stage, "--epoch", 1, "--run", run, "--force")
    assert f"`{section}.learning_rate`" in r.stderr and "Nothing was written" in r.stderr, r.stderr
    assert "NaN or infinity" in r.stderr
    assert files_of(run) == before
    monkeypatch.setattr(common, "load_policy", real)
    assert "up to date" in cli(stage, "--epoch", 1, "--run", run, expect=0).output


def test_a_non_finite_training_step_is_refused_with_its_number():
    from types import SimpleNamespace

    import torch

    from genenv_cli.settings import AgentUpdateConfig
    from genenv_cli.training.common import check_finite

    policy = SimpleNamespace(model=torch.nn.Linear(2, 2))
    check_finite(policy, [{"step": 1, "loss": 0.5}], role="agent", epoch=3, train=AgentUpdateConfig())
    with pytest.raises(ConfigError, match=r"the loss of step 2 is inf.*`agent_update.learning_rate` = 0.0001"):
        check_finite(policy, [{"step": 1, "loss": 0.5}, {"step": 2, "loss": float("inf")}], role="agent", epoch=3,
                     train=AgentUpdateConfig())


def test_score_never_writes_a_non_finite_reward(run, monkeypatch):
    from genenv_cli.domains.base import Score
    from genenv_cli.domains.tool_call import ToolCallDomain

    monkeypatch.setattr(ToolCallDomain, "score_many",
                        lambda self, payloads, comps: [Score(float("nan"), 0.0, True, None) for _ in comps])
    before = files_of(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "reward" in r.stderr and "tool_call" in r.stderr and "not a finite number" in r.stderr, r.stderr
    assert files_of(run) == before


def test_a_huge_bamboogle_cell_is_refused_whatever_read_a_csv_before(tmp_path):
    """The csv module's field limit is process-wide: a TravelPlanner split file read earlier in the same process
    (whose reader needs a higher limit) must not lift the Bamboogle reader's."""
    import csv

    from genenv_cli.errors import InputError
    from genenv_cli.evals.bamboogle.benchmark import read_bamboogle
    from genenv_cli.evals.travelplanner.benchmark import _read_records

    split = tmp_path / "validation.csv"
    split.write_text("query,days\n" + '"' + "q" * 200_000 + '",3\n')
    assert len(_read_records(split)[0]["query"]) == 200_000
    assert csv.field_size_limit() == 131_072
    big = tmp_path / "big.csv"
    big.write_text('Question,Answer\nWho wrote Hamlet?,Shakespeare\n"' + "x" * 140_000 + '",y\n')
    with pytest.raises(InputError, match="line 3"):
        read_bamboogle(big)
