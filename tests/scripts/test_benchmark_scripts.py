"""The speed benchmarks still run as modules from the repository root (at toy sizes, results written to a temp dir,
not benchmarks/speed/results/)."""

import json
import os
import subprocess
import sys

import pytest

from paths import ROOT


@pytest.mark.slow
@pytest.mark.parametrize("script,args", [
    ("score_throughput", ["--rollouts", "4000"]),
    pytest.param("pool_scaling", ["--tasks", "8", "--k", "2", "--repeat", "1"],
                 marks=pytest.mark.heavy),  # scores 50 epochs' pools: about 30 s on 2 cores
    ("cli_startup", ["--repeat", "1"]),
])
def test_benchmark_script_runs(tmp_path, script, args):
    env = dict(os.environ, GENENV_BENCH_RESULTS=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", f"benchmarks.speed.{script}", *args], capture_output=True, text=True,
                         env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    (path,) = (tmp_path / script).glob("*.json")  # grouped by benchmark: results/<script>/<name>.json
    result = json.loads(path.read_text())
    assert result["figures"] and result["machine"]["cpus"] and result["versions"]["genenv-cli"]


@pytest.mark.slow
def test_multiturn_batching_script_runs(tmp_path, tiny_model):
    env = dict(os.environ, GENENV_BENCH_RESULTS=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "benchmarks.speed.multiturn_batching", "--model", str(tiny_model),
                          "--copies", "1", "--max-steps", "2", "--max-new-tokens", "4", "--repeat", "1"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads((tmp_path / "multiturn_batching" / "multiturn_batching.json").read_text())["figures"]
    # 7 games x 2 steps: 14 single-prompt calls one by one, 2 calls (one per turn) together, the same episodes
    assert figures["generate_calls"] == {"one_by_one": 14, "together": 2}
    assert figures["steps_played"] == 14 and figures["episodes_that_differ"] == 0


@pytest.mark.slow
def test_episode_throughput_script_runs(tmp_path, tiny_model):
    env = dict(os.environ, GENENV_BENCH_RESULTS=str(tmp_path))
    out = subprocess.run([sys.executable, "-m", "benchmarks.speed.episode_throughput", "--model", str(tiny_model),
                          "--tasks", "2", "--k", "2", "--tokens", "6", "--repeat", "1"],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads((tmp_path / "episode_throughput" / "episode_throughput.json").read_text())["figures"]
    # 2 tasks x 2 samples x 6 agent tokens in every arm; the episodes' 3 turns were 3 calls, with the environment's
    # tokens between them; with reuse the engine computed less of the same prompts and drew the same tokens
    assert figures["agent_tokens"] == 24 and figures["counts"]["episodes_reuse"]["calls"] == 3
    assert figures["counts"]["episodes_reuse"]["environment_tokens"] > 0
    reuse, full = figures["episodes_reuse"], figures["episodes_no_reuse"]
    assert reuse["prompt_tokens_sent_per_turn"] == full["prompt_tokens_sent_per_turn"]
    assert reuse["prompt_tokens_computed_per_turn"] < full["prompt_tokens_computed_per_turn"]
    assert reuse["cache_hit_rate"] > 0 == full["cache_hit_rate"]
    assert figures["same_agent_tokens_with_and_without_reuse"] is True
