"""The per-item watchdog: one completion whose parsing or scoring runs past score.item_timeout_s is stopped,
recorded as wrong with its reason, and the stage goes on (score, evaluate, generate-tasks)."""

from __future__ import annotations

import re
import signal
import time

import pytest

from genenv_cli.catalogue.config import Config, ConfigError, config_from_dict
from genenv_cli.core.watchdog import ItemTimeout, Watchdog
from genenv_cli.domains import tool_call
from genenv_cli.domains.arith import ArithDomain
from genenv_cli.domains.base import EnvContext, Reject
from genenv_cli.evals.base import EvalSample, Verdict
from genenv_cli.machinery import grading
from genenv_cli.rundir.contract import check_state
from genenv_cli.rundir.datafiles import read_parquet
from genenv_cli.stages import score
from genenv_cli.stages.eval_samples import score_safely
from paths import FIXTURES
from score_epoch import BAD, GOOD

# the call parser's fence regex before it was rewritten: cubic backtracking on a fence and a run of blanks
OLD_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
STUCK = "```" + " " * 3000 + "x"


def catastrophic(text: str) -> None:
    OLD_FENCE.match(STUCK)  # minutes of backtracking inside the regex engine


def spin(*_args) -> None:
    while True:
        pass


@pytest.mark.timeout(30)
def test_the_watchdog_stops_a_backtracking_regex_and_a_python_loop():
    for stuck in (catastrophic, spin, lambda _t: time.sleep(60)):
        t = time.perf_counter()
        with Watchdog(0.2) as dog, pytest.raises(ItemTimeout):
            dog.arm()
            stuck("x")
        assert time.perf_counter() - t < 5


@pytest.mark.timeout(30)
@pytest.mark.slow
def test_the_watchdog_puts_back_a_timer_it_found():
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        with Watchdog(5) as dog:
            dog.arm()
            dog.disarm()
        assert signal.getsignal(signal.SIGALRM) is not None and 0 < signal.getitimer(signal.ITIMER_REAL)[0] <= 1.0
        time.sleep(1.2)
        assert fired == [1]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.timeout(60)
def test_grading_records_a_stuck_pair_as_wrong_and_goes_on(monkeypatch):
    """score_many takes the pairs in order: the one running when the clock fires is the one recorded."""
    real = tool_call.parse_tool_calls

    def slow_on_bad(text):
        if text == BAD:
            catastrophic(text)
        return real(text)

    monkeypatch.setattr(tool_call, "parse_tool_calls", slow_on_bad)
    payload = {"request": "Weather in Lima?", "tools": ["get_weather"],
               "calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}]}
    comps = [GOOD, BAD, GOOD, GOOD, BAD, GOOD]
    t = time.perf_counter()
    got = grading.grade_pairs("tool_call", {"t": payload}, ["t"] * len(comps), comps, workers=1, limit=0.3).verdicts()
    assert time.perf_counter() - t < 20
    assert [g.reward for g in got] == [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    for g, c in zip(got, comps, strict=True):
        if c == BAD:
            assert g.valid is False and g.error.startswith("timed out") and "score.item_timeout_s" in g.error
        else:
            assert g.valid is True and g.error is None


@pytest.mark.timeout(60)
def test_grading_times_each_pair_when_score_many_reads_them_all_first(monkeypatch):
    """A plugin's score_many that reads every pair before grading: the slow pair is still the one found."""
    dom = ArithDomain()

    def score_many(payloads, completions):
        pairs = list(zip(payloads, completions, strict=True))
        return [dom.score(p, c) for p, c in pairs]

    def score_one(payload, completion):
        if completion == "hang":
            spin()
        return ArithDomain.score(dom, payload, completion)

    monkeypatch.setattr(dom, "score_many", score_many)
    monkeypatch.setattr(dom, "score", score_one)
    monkeypatch.setattr(grading, "_init", lambda name, payloads, limit: _set(dom, payloads, limit))
    payload = {"expression": "1 + 2", "answer": 3}
    got = grading.grade_pairs("arith", {"t": payload}, ["t"] * 3, ["Answer: 3", "hang", "Answer: 4"], workers=1,
                              limit=0.3).verdicts()
    assert [g.reward for g in got] == [1.0, 0.0, 0.0]
    assert got[1].error.startswith("timed out") and got[2].error == "answered 4, expected 3"


def _set(dom, payloads, limit):
    grading._DOMAIN, grading._PAYLOADS, grading._LIMIT = dom, payloads, limit


@pytest.mark.timeout(120)
@pytest.mark.slow
def test_score_finishes_with_the_stuck_rollouts_wrong_and_their_reason_recorded(epoch1, monkeypatch):
    real = tool_call.parse_tool_calls

    def slow_on_bad(text):
        if text == BAD:
            catastrophic(text)
        return real(text)

    monkeypatch.setattr(tool_call, "parse_tool_calls", slow_on_bad)
    run = epoch1
    score.run(run, run.load_config(["score.item_timeout_s=0.3"]), 1)
    scores = read_parquet(run.epoch_dir(1) / "scores.parquet", "scores")
    assert scores.height == 20
    bad = scores.filter(~scores["success"])
    assert bad.height == 9  # the BAD attempts, as without the watchdog: they were wrong anyway
    assert not bad["valid"].any() and all(e.startswith("timed out") for e in bad["error"].to_list())
    assert scores.filter(scores["success"])["valid"].all()
    # the manifest records the limit those "timed out" came from, and another limit makes score stale
    manifest = run.read_manifest(1, "score")
    assert manifest["config"]["score.item_timeout_s"] == 0.3
    state = check_state(run, run.load_config(), score.plan(run, run.load_config(), 1))
    assert state.state == "stale" and "score.item_timeout_s" in " ".join(state.reasons)


def test_the_watchdogs_limit_is_part_of_scores_config():
    """A changed item_timeout_s changes score's config digest (so a finished score is stale); the default leaves
    the digest as it was before the limit was part of it (a finished run stays done after an upgrade)."""
    sections = score.CONFIG_SECTIONS
    before = Config().digest(["run.domain", "run.domains", "curriculum"])
    assert Config().digest(sections) == before
    other = config_from_dict({"score": {"item_timeout_s": 0.5}}, "t")
    assert other.digest(sections) != before


class _Slow:
    name = "slow"

    def score(self, sample, output, protocol):
        if output:
            spin()
        return Verdict(False, None, "no answer", {"accuracy": 0.0})


@pytest.mark.timeout(60)
def test_evaluate_scores_a_stuck_sample_as_incorrect_with_its_reason():
    sample = EvalSample(id="1", category="c", messages=[], gold=None)
    v = score_safely(_Slow(), sample, "anything", "official", 0.3)
    assert v.correct is False and v.reason.startswith("timed out") and v.scores == {"accuracy": 0.0}


@pytest.mark.timeout(60)
def test_generate_tasks_rejects_an_environment_output_whose_parsing_is_stuck(monkeypatch):
    from genenv_cli.stages import env_batches

    dom = ArithDomain()
    monkeypatch.setattr(dom, "parse_env_output", lambda text, ctx: spin())
    counts = {"generations": 0, "accepted": 0, "rejected_parse": 0, "rejected_invalid": 0, "rejected_duplicate": 0}
    s = env_batches.Sampling(cfg=config_from_dict({"score": {"item_timeout_s": 0.3}}, "test"), epoch=1, domain=dom,
                             model_name="m", model_tag="m", novelty=env_batches.Novelty(dom, 0.9), variations=2,
                             id_prefix="e1", ui=None, counts=counts, rejects=[])
    ctx = EnvContext("p", "1op-1d", {"expression": "1 + 2", "answer": 3}, None, None, [])
    batch: list = []
    env_batches._accept(s, "e1-b0000", ctx, [], "EXERCISE: 1 + 1", batch)
    assert batch == [] and counts["rejected_parse"] == 1
    assert s.rejects[0]["reason"].startswith("parse: timed out")


def test_the_bound_is_a_setting_with_both_bounds():
    assert Config().score.item_timeout_s == 10.0
    assert config_from_dict({"score": {"item_timeout_s": 0.5}}, "t").score.item_timeout_s == 0.5
    for bad in (0, -1, 1e9, float("nan")):
        with pytest.raises(ConfigError, match="score.item_timeout_s"):
            config_from_dict({"score": {"item_timeout_s": bad}}, "t")


def test_reject_is_not_swallowed_by_a_scorer_that_catches_everything():
    """ItemTimeout is not an Exception: a scorer's `except Exception` cannot hide it."""
    assert not issubclass(ItemTimeout, Exception) and issubclass(Reject, Exception)


def test_scoring_predictions_keeps_the_sample_limit_apart_from_the_watchdog_bound(tmp_path):
    """`--limit N` names the result file (`.limitN`) and the recorded config; the watchdog's bound is another
    number and must not take its place."""

    from genenv_cli.actions.evaluate import evaluate
    from genenv_cli.catalogue.config import config_from_dict

    data = FIXTURES / "bamboogle" / "bamboogle.csv"
    preds = tmp_path / "preds.jsonl"
    preds.write_text("")
    cfg = config_from_dict({}, "test")
    out = evaluate(None, cfg, "bamboogle", data=data, predictions=preds, limit=3,
                   out_dir=tmp_path / "evals")
    assert out["config"]["limit"] == 3 and out["n"] == 3
    assert sorted(p.name for p in (tmp_path / "evals" / "bamboogle").glob("*.json")) == ["pred-preds.limit3.json"]
