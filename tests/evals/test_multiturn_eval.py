"""Multi-turn evaluation at scale: the context check before every step (an episode that would outgrow the model's
context ends as a failure with its reason, the evaluation goes on and reports its metrics), and the live episodes
advanced together, one generate call per turn, with the same results as playing them one by one.

The engine here is a stand-in that answers from the prompt alone (so batching cannot change an answer) and, as
vLLM does, refuses a whole call when one prompt is longer than its context limit."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.evals.base import CONTEXT_OVERFLOW
from genenv_cli.families.alfworld.benchmark import ALFWorld
from genenv_cli.machinery.engines.base import Engine, Generation
from genenv_cli.machinery.episodes import play_episodes
from paths import FIXTURES

FIX = FIXTURES
ALF = FIX / "alfworld"
runner = CliRunner()


class PolicyEngine(Engine):
    """Answers each prompt from its text alone: the expert's next command for the games in `expert` (found by
    the task line of the first user turn), otherwise an admissible command picked by a hash of the prompt."""

    name = "policy"

    def __init__(self, tokenizer, limit: int = 0, expert: dict[str, list[str]] | None = None):
        self.tokenizer, self.limit, self.expert = tokenizer, limit, expert or {}
        self.calls: list[int] = []

    def context_limit(self) -> int:
        return self.limit

    def answer(self, messages) -> str:
        first = messages[1]["content"]
        step = sum(m["role"] == "assistant" for m in messages)
        for task, plan in self.expert.items():
            if task in first and step < len(plan):
                return f"ACTION: {plan[step]}"
        text = messages[-1]["content"]
        if "AVAILABLE ACTIONS:\n" not in text:
            return ""
        admissible = text.split("AVAILABLE ACTIONS:\n", 1)[1].splitlines()
        digest = hashlib.sha256(json.dumps(messages).encode()).digest()
        return f"ACTION: {admissible[digest[0] % len(admissible)]}"

    def generate(self, conversations, params, on_progress=None):
        self.calls.append(len(conversations))
        out = []
        for messages in conversations:
            ids = self.prompt_ids(messages)
            if self.limit and len(ids) > self.limit:
                raise ValueError(f"The decoder prompt (length {len(ids)}) is longer than the maximum model length "
                                 f"of {self.limit}.")
            out.append([Generation(self.answer(messages), [1], [0.0], "stop", ids)])
        return out


@pytest.fixture(scope="module")
def tokenizer(tiny_model):
    from genenv_cli.machinery.models import load_tokenizer, resolve

    return load_tokenizer(resolve(str(tiny_model)))


@pytest.fixture(scope="module")
def games():
    bench = ALFWorld()
    loaded = bench.load(data=ALF, split=None, version=None, protocol="official", cache_dir=Path("/nonexistent"))
    return bench, loaded.samples


def _task(sample) -> str:
    return json.loads(Path(sample.meta["game"]).read_text())["task"]


def _greedy(max_new_tokens=8):
    from genenv_cli.machinery.engines import SamplingParams

    return SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, seed=0)


# ----------------------------------------------------------------------------------------------- batching

def test_lockstep_episodes_match_one_by_one_with_one_call_per_turn(games, tokenizer):
    bench, samples = games
    # three games played by the expert (won after 4, 5 and 7 steps), the others by a prompt-hash policy that
    # runs into the step limit: episodes end at different turns
    expert = {_task(s): s.gold for s in samples[:3]}
    params, max_steps = _greedy(), 9

    alone = PolicyEngine(tokenizer, expert=expert)
    one_by_one = [bench.run_episode(s, lambda m: alone.generate([m], params)[0][0].text, max_steps)
                  for s in samples]
    together = PolicyEngine(tokenizer, expert=expert)
    turns = []
    batched = play_episodes(bench, samples, together, params, max_steps, on_turn=lambda t, n: turns.append(n))

    for (t1, v1), (t2, v2) in zip(one_by_one, batched, strict=True):
        assert t1 == t2
        assert (v1.correct, v1.parsed, v1.reason, v1.scores, v1.end) == (v2.correct, v2.parsed, v2.reason,
                                                                          v2.scores, v2.end)
    steps = [int(v.scores["steps"]) for _, v in batched]
    assert sorted({v.end for _, v in batched}) == ["done", "turn_cap"]
    assert len(set(steps)) > 2                             # the episodes end at different turns
    # one call per turn, each holding the episodes still live then; one call per step played alone
    assert together.calls == turns == [sum(n > t for n in steps) for t in range(max(steps))]
    assert len(alone.calls) == sum(steps) and set(alone.calls) == {1}


@pytest.mark.slow
def test_lockstep_with_the_tiny_model_matches_one_by_one(games, tiny_model):
    """The hf engine on a tiny random model, greedy: batched turns (left padding) give the same transcripts."""
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    bench, samples = games
    engine = HFEngine(resolve(str(tiny_model)), device="cpu", dtype="float32", batch_size=16)
    params, max_steps = _greedy(6), 3
    one_by_one = [bench.run_episode(s, lambda m: engine.generate([m], params)[0][0].text, max_steps)
                  for s in samples]
    batched = play_episodes(bench, samples, engine, params, max_steps, context_limit=engine.context_limit())
    assert [t for t, _ in batched] == [t for t, _ in one_by_one]
    assert [v.parsed for _, v in batched] == [v.parsed for _, v in one_by_one]


# ------------------------------------------------------------------------------------------ context check

def _first_prompt_lengths(engine, bench, samples) -> list[int]:
    out = []
    for s in samples:
        episode = bench.start_episode(s, 50)
        out.append(len(engine.prompt_ids(episode.prompt())))
        episode.close()
    return out


def test_an_overflowing_episode_ends_as_a_failure_and_the_evaluation_reports(games, tokenizer, tiny_model,
                                                                             make_run, monkeypatch):
    import genenv_cli.machinery.engines as engines

    bench, samples = games
    # three games played by the expert: short episodes (won in 4, 4 and 5 steps); the limit fits every first
    # prompt and these episodes' longest, and the others, playing on towards 50 steps, outgrow it
    expert = {_task(s): s.gold for s in samples if len(s.gold) <= 5}
    probe = PolicyEngine(tokenizer, expert=expert)
    seen = []
    for s in samples:
        if _task(s) in expert:
            bench.run_episode(s, lambda m: seen.append(len(probe.prompt_ids(m))) or probe.answer(m))
    new_tokens = 8
    limit = max(*_first_prompt_lengths(probe, bench, samples), *seen) + new_tokens
    engine = PolicyEngine(tokenizer, limit=limit, expert=expert)
    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: engine)
    run = make_run()
    r = runner.invoke(app, ["evaluate", "--bench", "alfworld", "--data", str(ALF), "--model", str(tiny_model),
                            "--run", str(run), "--set", f"evaluate.max_new_tokens={new_tokens}", "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    path = Path(json.loads(r.stdout.strip().splitlines()[-1])["path"])
    result = json.loads(path.read_text())
    rows = [json.loads(line) for line in Path(str(path).replace(".json", ".samples.jsonl")).read_text().splitlines()]
    overflowed = [row for row in rows if row.get("end") == CONTEXT_OVERFLOW]
    won = [row for row in rows if row.get("end") == "done"]
    assert len(won) == len(expert) == 3 and all(row["correct"] for row in won)
    assert len(overflowed) == len(rows) - len(won) > 0
    for row in overflowed:
        assert row["correct"] is False and row["scores"]["won"] == 0.0 and row["scores"]["steps"] >= 1
        assert "context overflow before step" in row["reason"] and f"({limit} tokens)" in row["reason"]
    assert result["counts"]["context_overflow"] == len(overflowed)
    assert result["headline"] == {"name": "success_rate", "value": pytest.approx(100.0 * len(won) / len(rows))}
    assert max(engine.calls) == len(rows)          # the first turn asked every episode in one call


@pytest.mark.slow
def test_the_hf_limit_is_the_models_max_position_embeddings(games, tiny_model, make_run, tmp_path):
    """A tiny model whose config allows a short context: its episodes end by overflow, reported, not raised."""
    bench, samples = games
    small = tmp_path / "small-context"
    shutil.copytree(tiny_model, small)
    config = json.loads((small / "config.json").read_text())
    from genenv_cli.machinery.models import load_tokenizer, resolve

    probe = PolicyEngine(load_tokenizer(resolve(str(small))))
    limit = max(_first_prompt_lengths(probe, bench, samples)) + 6 + 40
    config["max_position_embeddings"] = limit
    (small / "config.json").write_text(json.dumps(config))
    run = make_run()
    r = runner.invoke(app, ["evaluate", "--bench", "alfworld", "--data", str(ALF), "--model", str(small),
                            "--run", str(run), "--limit", "2", "--set", "evaluate.max_new_tokens=6",
                            "--set", "evaluate.max_steps=10", "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    path = Path(json.loads(r.stdout.strip().splitlines()[-1])["path"])
    rows = [json.loads(line) for line in Path(str(path).replace(".json", ".samples.jsonl")).read_text().splitlines()]
    assert [row["end"] for row in rows] == [CONTEXT_OVERFLOW] * 2
    assert all(1 <= row["scores"]["steps"] < 10 and f"({limit} tokens)" in row["reason"] for row in rows)
    assert json.loads(path.read_text())["counts"]["context_overflow"] == 2


def test_a_decomposed_turn_that_does_not_fit_is_a_failure_with_its_reason(tokenizer, tiny_model, make_run,
                                                                        monkeypatch):
    """BFCL's multi-turn dialogues are scored turn by turn; a turn whose history outgrows the context is not
    sent and fails, even where the empty answer would pass (a turn whose ground truth is no call)."""
    import genenv_cli.machinery.engines as engines
    from genenv_cli.families.bfcl import BFCL

    samples = BFCL().load(data=FIX / "bfcl", split=None, version=None, protocol="paper",
                          cache_dir=Path("/nonexistent")).samples
    probe = PolicyEngine(tokenizer)
    lengths = {s.id: len(probe.prompt_ids(s.messages)) for s in samples}
    new_tokens = 8
    empty_turn = "multi_turn_long_context_1#turn1"             # ground truth: no call
    limit = lengths[empty_turn] - 1 + new_tokens                # that turn (and longer ones) no longer fit
    engine = PolicyEngine(tokenizer, limit=limit)
    monkeypatch.setattr(engines, "open_engine", lambda *a, **k: engine)
    r = runner.invoke(app, ["evaluate", "--bench", "bfcl", "--protocol", "paper", "--data", str(FIX / "bfcl"),
                            "--model", str(tiny_model), "--run", str(make_run()), "--set",
                            f"evaluate.max_new_tokens={new_tokens}", "--json"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    path = Path(json.loads(r.stdout.strip().splitlines()[-1])["path"])
    rows = {row["id"]: row for row in map(json.loads, Path(str(path).replace(".json", ".samples.jsonl"))
                                          .read_text().splitlines())}
    over = {sid for sid, n in lengths.items() if n + new_tokens > limit}
    assert empty_turn in over and len(over) < len(rows)
    for sid in over:
        assert rows[sid]["end"] == CONTEXT_OVERFLOW and rows[sid]["correct"] is False
        assert "context overflow" in rows[sid]["reason"]
    assert all("end" not in rows[sid] for sid in rows if sid not in over)
    assert json.loads(path.read_text())["counts"]["too_long"] == len(over)
