"""Degenerate model output and non-finite numbers: garbage, endless brackets and megabytes of text are wrong
answers scored in bounded time, never a crash; "no call" earns the reward only as a plain-text answer; and a
diverged update or a non-finite reward is refused before anything is written, naming the setting to change."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from genenv_cli.core.errors import ConfigError
from hostile import E1, cli, snapshot, vouch
from paths import FIXTURES

# ---------------------------------------------------------------- degenerate rollouts and predictions

# long, call-shaped garbage: what a parser could spend its time on
DEGENERATE_CALLS = [
    "[" * 1024,
    "<tool_call>" + "[" * 1024 + "</tool_call>",
    '<tool_call>{"name": "get_weather", "arguments": {"city": ' + "9" * 5000 + "}}</tool_call>",
    "[get_weather(city=" + "-" * 1000 + "1)]",
    "[get_weather(city='" + "[" * 600 + "]" * 600 + "')]",
    "[f(x=" + "+".join(["1"] * 5000) + ")]",
    "[" + ".".join(["a"] * 5000) + "(x=1)]",
    "x" * 300_000,
]


def test_degenerate_rollouts_are_wrong_answers_and_score_completes(run):
    path = run / E1 / "rollouts.parquet"
    df = pl.read_parquet(path)
    comps = [DEGENERATE_CALLS[i % len(DEGENERATE_CALLS)] for i in range(df.height)]
    df.with_columns(pl.Series("completion", comps)).write_parquet(path)
    vouch(run, str(E1 / "rollouts.parquet"))  # as if the model had written them: rollout's manifest records them
    cli("score", "--epoch", 1, "--run", run, "-q", expect=0)
    scores = pl.read_parquet(run / E1 / "scores.parquet")
    assert scores.height == df.height
    assert scores["reward"].sum() == 0 and not scores["success"].any()


@pytest.mark.parametrize("bench, data", [("bfcl", FIXTURES / "bfcl"), ("api-bank", FIXTURES / "api_bank")])
def test_degenerate_predictions_are_wrong_answers(run, tmp_path, bench, data):
    exported = tmp_path / "inputs.jsonl"
    cli("evaluate", "--bench", bench, "--data", data, "--export", exported, "--run", run, expect=0)
    ids = [json.loads(line)["id"] for line in exported.read_text().splitlines()]
    preds = tmp_path / "degenerate.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "output": DEGENERATE_CALLS[k % len(DEGENERATE_CALLS)]}) + "\n"
                             for k, i in enumerate(ids)))
    r = cli("evaluate", "--bench", bench, "--data", data, "--predictions", preds, "--run", run, "--json", expect=0)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    result = json.loads(Path(summary["path"]).read_text())
    assert result["counts"]["correct"] <= sum(1 for i in ids if "irrelevance" in i)  # no call is right there


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
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.catalogue.suites import get_benchmark

    dom = get_domain("bfcl")
    item = next(s for s in dom.seeds("train") if s.shape == "irrelevance").payload
    for text in DEGENERATE:
        assert dom.score(item, text).reward == 0.0, repr(text[:20])
        if "<tool_call" not in text:  # BFCL: whatever does not decode as a call passes irrelevance
            assert get_benchmark("bfcl").score(dom.sample(item), text, "official").correct, repr(text[:20])
    assert dom.score(item, PLAIN[3]).reward == 1.0


def test_the_plain_text_check_is_linear():
    import time

    from genenv_cli.core.plaintext import plain_answer_problem

    # a megabyte of adversarial text is judged within 1 s of CPU time (CPU, not wall: the machine may be shared)
    for text in ("[" * 1_000_000, "(" * 500_000 + ")" * 500_000 + "x", "(x)" * 330_000, "[a]" * 330_000,
                 "(()" * 250_000 + ")" * 250_000, " " * 1_000_000, "a" * 1_000_000, "\x00" * 1_000_000):
        t0 = time.process_time()
        plain_answer_problem(text)
        assert time.process_time() - t0 < 1.0


# ---------------------------------------------------------------- non-finite training never publishes

@pytest.mark.parametrize("stage,section", [("update-agent", "agent_update"), ("update-env", "env_update")])
def test_a_diverged_update_fails_before_writing_and_names_the_learning_rate(run, monkeypatch, stage, section):
    import torch

    import genenv_cli.machinery.training.policy_loading as common

    real = common.load_policy

    def diverged(*a, **k):  # the weights the update would publish hold NaN (as a learning rate of 1e6 makes them)
        policy = real(*a, **k)
        with torch.no_grad():
            next(p for p in policy.model.parameters() if p.requires_grad).fill_(float("nan"))
        return policy

    monkeypatch.setattr(common, "load_policy", diverged)
    before = snapshot(run)
    r = cli(stage, "--epoch", 1, "--run", run, "--force")
    assert f"`{section}.learning_rate`" in r.stderr and "Nothing was written" in r.stderr, r.stderr
    assert "NaN or infinity" in r.stderr
    assert snapshot(run) == before
    monkeypatch.setattr(common, "load_policy", real)
    assert "up to date" in cli(stage, "--epoch", 1, "--run", run, expect=0).output


def test_a_non_finite_training_step_is_refused_with_its_number():
    from types import SimpleNamespace

    import torch

    from genenv_cli.catalogue.settings import AgentUpdateConfig
    from genenv_cli.machinery.training.publishing import check_finite

    policy = SimpleNamespace(model=torch.nn.Linear(2, 2))
    check_finite(policy, [{"step": 1, "loss": 0.5}], role="agent", epoch=3, train=AgentUpdateConfig())
    with pytest.raises(ConfigError, match=r"the loss of step 2 is inf.*`agent_update.learning_rate` = 0.0001"):
        check_finite(policy, [{"step": 1, "loss": 0.5}, {"step": 2, "loss": float("inf")}], role="agent", epoch=3,
                     train=AgentUpdateConfig())


def test_score_never_writes_a_non_finite_reward(run, monkeypatch):
    from genenv_cli.domains.base import TaskVerdict
    from genenv_cli.domains.tool_call import ToolCallDomain

    monkeypatch.setattr(ToolCallDomain, "score_many",
                        lambda self, payloads, comps: [TaskVerdict(float("nan"), 0.0, True, None) for _ in comps])
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "reward" in r.stderr and "tool_call" in r.stderr and "not a finite number" in r.stderr, r.stderr
    assert snapshot(run) == before
