"""Scale-out as a CPU can check it: rollout shards run as separate, concurrent processes (what a Slurm array
does), each under the epoch's shared lock, and `score` merges them; the Slurm example in docs/scale-out.md maps
the array index onto --shard."""

import json
import os
import subprocess
import sys

import pytest
from test_epochs import arith_run

from genenv_cli.rundir.datafiles import read_parquet
from genenv_cli.stages import score
from paths import ROOT

DOCS = ROOT / "docs" / "scale-out.md"


@pytest.mark.slow
@pytest.mark.e2e
def test_rollout_shards_as_concurrent_processes_merge_in_score(tmp_path, arith_model):
    run = arith_run(tmp_path, arith_model)
    n = 3
    env = dict(os.environ, GENENV_OFFLINE="1")
    procs = [subprocess.Popen([sys.executable, "-m", "genenv_cli", "rollout", "--epoch", "1", "--run", str(run.root),
                               "--shard", f"{i}/{n}", "-q"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for i in range(1, n + 1)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
    tasks = {json.loads(line)["task_id"] for line in (run.epoch_dir(1) / "tasks.jsonl").read_text().splitlines() if line}
    seen: list[str] = []
    for i in range(1, n + 1):
        frame = read_parquet(run.epoch_dir(1) / f"rollouts.shard-{i}-of-{n}.parquet", "rollouts")
        seen += sorted(set(frame["task_id"]))
    assert sorted(seen) == sorted(tasks)  # every task in exactly one shard
    for i in range(1, n + 1):  # each shard its own log (and progress line): they ran at the same time
        log = (run.root / "logs" / f"rollout.shard-{i}-of-{n}.log").read_text()
        assert f"START rollout.shard-{i}-of-{n} epoch=1" in log and log.count("START") == 1
    assert not (run.root / "logs" / "rollout.log").exists()
    result = score.run(run, run.load_config(), 1)
    assert result.manifest["counts"]["rollouts"] == len(tasks) * 8
    again = subprocess.run([sys.executable, "-m", "genenv_cli", "rollout", "--epoch", "1", "--run", str(run.root),
                            "--shard", f"2/{n}"], capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0 and "up to date" in again.stdout + again.stderr


def test_scale_out_doc_maps_the_array_index_onto_shards():
    text = DOCS.read_text()
    assert "--shard $((SLURM_ARRAY_TASK_ID + 1))/$SLURM_ARRAY_TASK_COUNT" in text
    assert "pipelines/epoch.sh" in text and "TRAIN=" in text
