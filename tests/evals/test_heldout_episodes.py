"""Train on what you evaluate, for episodes: `genenv evaluate --bench heldout` plays a multi-turn domain's items
with the episode engine, the domain's environment and its turn cap, as the rollout stage plays its tasks; with
greedy decoding a task's evaluation episode (prompts as chat messages) and its training episode (prompts as the
sampled token sequence) take the same turns and get the same reward."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from episode_domains import NAME, register
from genenv_cli.catalogue.domains import DOMAINS, get_domain
from genenv_cli.evals.heldout.benchmark import HeldOut
from genenv_cli.machinery.engines import SamplingParams
from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.episodes import play_episodes
from genenv_cli.machinery.models import resolve
from genenv_cli.stages.rollout_episodes import play_tasks


@pytest.fixture
def three_turns():
    register()
    yield get_domain(NAME)
    DOMAINS.unregister(NAME)


def test_evaluation_and_training_episodes_of_a_task_take_the_same_turns(three_turns, arith_model):
    bench = HeldOut()
    cfg = SimpleNamespace(run=SimpleNamespace(mixed=False), curriculum=SimpleNamespace(success_threshold=1.0))
    bench.configure(cfg, None, {NAME: three_turns})
    assert bench.interactive
    samples = bench.load(data=None, split="validation", version=None, protocol="official",
                         cache_dir=Path("/nonexistent")).samples[:6]
    assert all(s.meta["episode"] for s in samples)
    engine = HFEngine(resolve(str(arith_model)), device="cpu", dtype="float32", batch_size=8)
    params = SamplingParams(temperature=0.0, max_new_tokens=8, n=1, seed=0)
    evaluated = play_episodes(bench, samples, engine, params, 50, context_limit=engine.context_limit())
    trained = play_tasks(engine, {NAME: three_turns}, [{"domain": NAME, "payload": s.gold} for s in samples], params,
                         [0] * len(samples))
    for (transcript, verdict), (row,) in zip(evaluated, trained, strict=True):
        assert verdict.parsed == json.loads(row["actions"]) and len(verdict.parsed) == 3
        assert [m["content"] for m in transcript[-5:] if m["role"] == "user"] == json.loads(row["observations"])
        assert (verdict.scores["reward"], verdict.end) == (row["reward"], row["end"])
    assert sum(v.correct for _, v in evaluated) == bench.summarize(samples, [v for _, v in evaluated],
                                                                    "official")["overall"]["success_rate"] * 6 / 100
