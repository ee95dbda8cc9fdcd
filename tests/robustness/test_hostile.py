"""A careless or hostile user, a full or read-only disk, a degenerate model: every CLI command answers with one
paragraph and exit 2 (or does its job), never a traceback with exit 1. Each case runs on a copy of one finished
tiny run (one whole epoch, plus an evaluation)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from paths import FIXTURES, SRC

runner = CliRunner()
FIX = FIXTURES
BAMBOOGLE = str(FIX / "bamboogle" / "bamboogle.csv")
E1 = Path("epochs") / "0001"


def cli(*args: str, expect: int | None = 2):
    """Run the CLI in-process; no unhandled exception may escape (that is CliRunner's exit 1 with a traceback)."""
    r = runner.invoke(app, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), (
        f"{args}: unhandled {type(r.exception).__name__}: {r.exception}\n{r.output}")
    assert "Traceback" not in r.output
    if expect is not None:
        assert r.exit_code == expect, f"{args}: exit {r.exit_code}\n{r.output}"
    if r.exit_code == 2 and r.stderr.startswith("error:"):
        assert r.stderr.count("\n") == 1, f"not one paragraph: {r.stderr!r}"
    return r


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "logs" not in p.parts and p.name != ".lock"}


@pytest.fixture(scope="session")
def finished(hostile_finished_run) -> Path:
    """One finished tool_call epoch (all five stages) on the tiny model, plus an evaluation of predictions
    (conftest.py: shared with the hostile-corpus test)."""
    return hostile_finished_run


@pytest.fixture
def run(finished, tmp_path) -> Path:
    dst = tmp_path / "run"
    shutil.copytree(finished, dst)
    return dst


# ---------------------------------------------------------------- 1. invalid UTF-8

def test_invalid_utf8_in_tasks_is_named(run):
    tasks = run / E1 / "tasks.jsonl"
    tasks.write_bytes(tasks.read_bytes().replace(b'"epoch"', b'"\xff\xfeepoch"', 1))
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run)
    assert "tasks.jsonl, line 1: not valid UTF-8" in r.stderr
    assert snapshot(run) == before


def test_invalid_utf8_in_predictions_is_named(run, tmp_path):
    preds = tmp_path / "p.jsonl"
    preds.write_bytes(b'{"id": "0", "output": "ok"}\n{"id": "1", "output": "\xc3\x28"}\n')
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", preds, "--run", run)
    assert "p.jsonl, line 2: not valid UTF-8" in r.stderr


def test_invalid_utf8_in_the_config_is_named(run):
    (run / "genenv.toml").write_bytes(b"[run]\nseed = 1 # \xff\n")
    r = cli("status", "--run", run)
    assert "genenv.toml: not UTF-8" in r.stderr


# ---------------------------------------------------------------- 2. degenerate model output

DEGENERATE = [
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
    comps = [DEGENERATE[i % len(DEGENERATE)] for i in range(df.height)]
    df.with_columns(pl.Series("completion", comps)).write_parquet(path)
    cli("score", "--epoch", 1, "--run", run, "-q", expect=0)
    scores = pl.read_parquet(run / E1 / "scores.parquet")
    assert scores.height == df.height
    assert scores["reward"].sum() == 0 and not scores["success"].any()


@pytest.mark.parametrize("bench, data", [("bfcl", FIX / "bfcl"), ("api-bank", FIX / "api_bank")])
def test_degenerate_predictions_are_wrong_answers(run, tmp_path, bench, data):
    exported = tmp_path / "inputs.jsonl"
    cli("evaluate", "--bench", bench, "--data", data, "--export", exported, "--run", run, expect=0)
    ids = [json.loads(line)["id"] for line in exported.read_text().splitlines()]
    preds = tmp_path / "degenerate.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "output": DEGENERATE[k % len(DEGENERATE)]}) + "\n"
                             for k, i in enumerate(ids)))
    r = cli("evaluate", "--bench", bench, "--data", data, "--predictions", preds, "--run", run, "--json", expect=0)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    result = json.loads(Path(summary["path"]).read_text())
    assert result["counts"]["correct"] <= sum(1 for i in ids if "irrelevance" in i)  # no call is right there


# ---------------------------------------------------------------- 3. arith expressions in tasks.jsonl

@pytest.mark.parametrize("expression", ["(" * 3000 + "1" + ")" * 3000, "1" * 5000 + " + 1", "-" * 3000 + "1"])
def test_hostile_arith_tasks_are_refused(make_run, expression):
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import generate_tasks
    from stagekit import complete_as, jsonl

    root = make_run(domain="arith")
    task = {"task_id": "t1", "epoch": 1, "batch_id": "t1", "source": "seed", "domain": "arith", "shape": "1op-1d",
            "payload": {"expression": expression, "answer": 2}, "parent_id": None, "context": None,
            "env_prompt": None, "env_output": None, "env_model": None}
    complete_as(RunDir(root), generate_tasks, 1, {"tasks": jsonl([task]), "rejects": ""})
    (root / E1 / "tasks.jsonl").write_text(jsonl([task]) + "\n")  # edited by hand: the domain checks it again
    r = cli("rollout", "--epoch", 1, "--run", root)
    assert "payload is not a valid arith task" in r.stderr


@pytest.mark.parametrize("line", ['{"task_id": ' + "1" * 5000 + "}", "[" * 3000 + "]" * 3000])
def test_hostile_json_lines_are_refused(run, line):
    tasks = run / E1 / "tasks.jsonl"
    tasks.write_text(tasks.read_text() + line + "\n")
    r = cli("score", "--epoch", 1, "--run", run)
    assert "tasks.jsonl, line 7" in r.stderr


# ---------------------------------------------------------------- 4. empty or truncated pool partitions

@pytest.mark.parametrize("stage, pool", [("update-agent", "agent_train"), ("update-env", "env_sft")])
@pytest.mark.parametrize("damage", ["empty", "truncated"])
def test_damaged_pool_partition_is_named(run, stage, pool, damage):
    part = run / "pools" / pool / "epoch=0001.parquet"
    part.write_bytes(b"" if damage == "empty" else part.read_bytes()[: part.stat().st_size // 2])
    r = cli(stage, "--epoch", 1, "--run", run, "--force")
    assert "epoch=0001.parquet: not a readable Parquet file" in r.stderr
    assert (run / E1 / stage.split("-")[1]).is_dir()  # the previous checkpoint is still there


# ---------------------------------------------------------------- 5, 6. config values

@pytest.mark.parametrize("setting, words", [
    ("curriculum.alpha=nan", "not a finite number"), ("curriculum.k_min=nan", "not a finite number"),
    ("curriculum.lam=inf", "not a finite number"), ("curriculum.beta=-inf", "not a finite number"),
    ("generate.tasks_per_epoch=1000000000", "largest allowed is 1,000,000"),
    ("rollout.group_size=100000000000000000000000", "largest allowed is 1,024"),
    ("run.seed=99999999999999999999999999", "out of range"),
])
def test_config_values_are_bounded(run, setting, words):
    r = cli("score", "--epoch", 1, "--run", run, "--set", setting)
    assert words in r.stderr and setting.split("=")[0] in r.stderr


def test_nan_in_the_config_file_is_refused(run):
    text = (run / "genenv.toml").read_text().replace("alpha = 0.5", "alpha = nan")
    (run / "genenv.toml").write_text(text)
    r = cli("status", "--run", run)
    assert "`curriculum.alpha` = nan is not a finite number" in r.stderr


# ---------------------------------------------------------------- 7. read-only storage

def _readonly(run: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the CLI on `run` mounted read-only (a user namespace with a read-only bind mount when root; plain
    permissions otherwise). Skips where neither can be had."""
    cmd = [sys.executable, "-m", "genenv_cli", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    if os.geteuid() != 0:
        for p in [run, *run.rglob("*")]:
            if not p.is_symlink():
                p.chmod(p.stat().st_mode & ~0o222)
        return subprocess.run(cmd, capture_output=True, text=True, env=env)
    if not shutil.which("unshare"):
        pytest.skip("root without unshare: cannot make a read-only view")
    script = (f'mount --bind "{run}" "{run}" && mount -o remount,bind,ro "{run}" "{run}" && '
              f'touch "{run}/probe" 2>/dev/null && exit 99; exec "$@"')
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *cmd], capture_output=True, text=True, env=env)
    if r.returncode == 99 or "unshare:" in r.stderr or "mount:" in r.stderr:
        pytest.skip(f"no read-only bind mount here: {r.stderr.strip()[:200]}")
    return r


@pytest.mark.parametrize("args", [
    ["status"], ["status", "--json"], ["score", "--epoch", "1"], ["update-agent", "--epoch", "1"], ["report"],
    ["evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", "PREDS"],
])
def test_reading_a_finished_run_works_on_read_only_storage(run, tmp_path, monkeypatch, args):
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"id": "0", "output": "<answer>x</answer>"}) + "\n")
    args = [str(preds) if a == "PREDS" else a for a in args]
    before = snapshot(run)
    env_cache = tmp_path / "cache"
    monkeypatch.setenv("GENENV_CACHE", str(env_cache))
    r = _readonly(run, *args, "--run", str(run))
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    if args[0] in ("score", "update-agent"):
        assert "up to date" in r.stdout
    if args[0] in ("report", "evaluate"):
        assert "read-only" in r.stderr and str(env_cache) in r.stderr + r.stdout
    assert snapshot(run) == before


# ---------------------------------------------------------------- 8. a file where a folder belongs, or the reverse

def test_logs_as_a_file_does_not_stop_a_stage(run):
    shutil.rmtree(run / "logs")
    (run / "logs").write_text("not a folder")
    r = cli("score", "--epoch", 1, "--run", run, expect=0)
    assert "up to date" in r.stdout


@pytest.mark.parametrize("target, args, words", [
    ("pools/agent_train", ["score", "--epoch", "1", "--force"], "a file where a folder belongs"),
    ("epochs/0002", ["generate-tasks", "--epoch", "2"], "a file where epoch 2's folder belongs"),
    ("epochs/0001/.lock", ["score", "--epoch", "1"], "is a folder where the epoch's lock file belongs"),
    ("genenv.toml", ["status"], "is a folder; the run's config must be a TOML file"),
])
def test_file_folder_swaps_are_named(run, target, args, words):
    p = run / target
    if p.is_dir():
        shutil.rmtree(p)
        p.write_text("a file now")
    elif p.exists():
        p.unlink()
        p.mkdir()
    else:
        p.write_text("a file where a folder belongs")
    r = cli(*args, "--run", run)
    assert words in r.stderr and str(p) in r.stderr
    if target != "genenv.toml":
        cli("status", "--run", run, expect=0)


def test_predictions_folder_is_named(run, tmp_path):
    r = cli("evaluate", "--bench", "bamboogle", "--data", BAMBOOGLE, "--predictions", tmp_path, "--run", run)
    assert "is a folder; --predictions takes a JSONL file" in r.stderr


# ---------------------------------------------------------------- 9. a full disk

def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_full_disk_during_score_is_named(run, monkeypatch):
    import genenv_cli.stages.score as score_mod

    monkeypatch.setattr(score_mod, "write_parquet", _enospc)
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "no space left on device at" in r.stderr and str(run / E1) in r.stderr
    assert snapshot(run) == before


def test_full_disk_during_update_agent_is_named(run, monkeypatch):
    import genenv_cli.training.common as common

    def save(policy, folder, **kw):
        folder.mkdir(parents=True, exist_ok=True)
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                           "\"No space left on device\" })")

    monkeypatch.setattr(common, "save_checkpoint", save)
    before = snapshot(run)
    r = cli("update-agent", "--epoch", 1, "--run", run, "--force")
    assert "no space left on device at" in r.stderr
    assert snapshot(run) == before
    assert not [p for p in (run / E1).iterdir() if ".tmp-" in p.name]


# ---------------------------------------------------------------- 10. a kill between update-agent's two renames

def test_old_checkpoint_left_by_a_kill_between_renames_is_put_back(run):
    agent = run / E1 / "agent"
    files = {p.name: p.read_bytes() for p in agent.iterdir()}
    os.replace(agent, run / E1 / ".agent.old-999999999")  # the first rename happened, the second did not
    assert json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"][0]["stages"][
        "update-agent"]["state"] == "incomplete"
    r = cli("update-agent", "--epoch", 1, "--run", run, expect=0)
    assert "up to date" in r.stdout  # the old copy is back, and it is exactly what the manifest recorded
    assert {p.name: p.read_bytes() for p in agent.iterdir()} == files


# ---------------------------------------------------------------- 11. epochs out of range, no empty epoch folders

@pytest.mark.parametrize("args", [["generate-tasks", "--epoch", "99999999999999999999"],
                                  ["rollout", "--epoch", "100000"], ["run", "--epochs", "99999999999999999999"],
                                  ["evaluate", "--bench", "heldout", "--epoch", "99999999999999999999"]])
def test_huge_epochs_are_refused_before_anything_is_created(run, args):
    before = sorted(p.name for p in (run / "epochs").iterdir())
    r = cli(*args, "--run", run)
    assert "not in the range" in r.output
    assert sorted(p.name for p in (run / "epochs").iterdir()) == before
    cli("status", "--run", run, expect=0)


def test_failed_commands_leave_no_empty_epoch_folders(run):
    for stage in ("rollout", "score", "update-agent", "update-env"):
        cli(stage, "--epoch", 7, "--run", run)
    assert not (run / "epochs" / "0007").exists()
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]


# ---------------------------------------------------------------- 12. JSON of the wrong shape

@pytest.mark.parametrize("name, content", [("manifests/rollout.json", "[]"), ("manifests/score.json", "[1, 2]"),
                                           ("manifests/score.json", '{"counts": 5, "metrics": [1]}'),
                                           ("manifests/generate-tasks.json", '{"inputs": 3, "outputs": "x"}'),
                                           ("metrics.json", "[1, 2]"), ("metrics.json", '{"batch_p_mean": "high"}'),
                                           ("manifests/update-env.json", "7")])
def test_wrong_shape_json_is_handled(run, name, content):
    (run / E1 / name).write_text(content)
    out = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)
    cli("status", "--run", run, expect=0)
    stage = Path(name).stem
    if name.startswith("manifests/"):
        assert out["epochs"][0]["stages"][stage]["state"] in ("incomplete", "stale")


def test_score_force_refuses_a_wrong_shape_rollout_manifest(run):
    (run / E1 / "manifests" / "rollout.json").write_text("[]")
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert "not a valid manifest of `rollout`" in r.stderr
    assert snapshot(run) == before


# ---------------------------------------------------------------- a lock whose holder died

def test_a_dead_lock_holder_is_reported_with_its_log(run):
    (run / E1 / ".lock").write_text(json.dumps({"stage": "score", "pid": 999999999, "host": "h",
                                                "since": "2026-01-01T00:00:00"}))
    r = cli("score", "--epoch", 1, "--run", run, expect=0)
    assert "previous `score` (pid 999999999" in r.stderr and "crashed or was killed" in r.stderr
    assert str(run / "logs" / "score.log") in r.stderr
    assert (run / E1 / ".lock").read_text() == ""  # released cleanly this time: no warning next time
    assert "crashed" not in cli("score", "--epoch", 1, "--run", run, expect=0).stderr


# ---------------------------------------------------------------- --debug

def test_debug_shows_the_traceback(run, monkeypatch):
    r = runner.invoke(app, ["--debug", "status", "--run", str(run), "--set", "curriculum.alpha=nan"])
    assert type(r.exception).__name__ == "ConfigError"
    monkeypatch.setenv("GENENV_DEBUG", "1")
    r = runner.invoke(app, ["status", "--run", str(run), "--set", "curriculum.alpha=nan"])
    assert type(r.exception).__name__ == "ConfigError"


def test_a_bug_is_one_paragraph_with_the_traceback_in_the_log(run, monkeypatch):
    import genenv_cli.stages.score as score_mod

    def boom(*a, **k):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(score_mod, "write_parquet", boom)
    r = cli("score", "--epoch", 1, "--run", run, "--force", expect=1)
    assert "unexpected ZeroDivisionError: a bug. This is a bug in genenv" in r.stderr
    assert "Traceback" in (run / "logs" / "score.log").read_text()


def test_an_epoch_folder_past_the_range_is_not_an_epoch(run):
    (run / "epochs" / "99999999999999999999").mkdir()
    (run / "epochs" / "99999999999999999999" / "tasks.jsonl").write_text("")
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]
    cli("report", "--run", run, expect=0)


def test_report_takes_its_numbers_from_the_manifests_not_a_damaged_metrics_file(run):
    (run / E1 / "metrics.json").write_text("[1, 2]")  # derived state: the manifests have the numbers
    out = json.loads(cli("report", "--run", run, "--json", expect=0).stdout)
    score = json.loads((run / E1 / "manifests" / "score.json").read_text())
    assert out["numbers"]["metrics"][0]["success_rate"] == score["metrics"]["success_rate"]


def test_report_names_a_manifest_number_of_the_wrong_type(run):
    path = run / E1 / "manifests" / "score.json"
    manifest = json.loads(path.read_text())
    manifest["metrics"]["batch_p_mean"] = "high"
    path.write_text(json.dumps(manifest))
    r = cli("report", "--run", run)
    assert "`batch_p_mean` must be a number or null" in r.stderr and str(run / E1 / "manifests") in r.stderr


def test_a_folder_holding_only_a_lock_is_not_an_epoch(run):
    (run / "epochs" / "0009").mkdir()
    (run / "epochs" / "0009" / ".lock").write_text("")  # left by a failed command of an older genenv
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert [r["epoch"] for r in rows] == [1]


# ---------------------------------------------------------------- links, devices and leftovers in the run directory

def _digests(*paths: Path) -> dict[str, bytes | None]:
    return {str(p): p.read_bytes() if p.is_file() else None for p in paths}


@pytest.mark.parametrize("dangling", [False, True])
def test_a_symlinked_lock_is_refused_and_its_target_untouched(run, tmp_path, dangling):
    outside = tmp_path / "outside.txt"
    if not dangling:
        outside.write_text("precious, outside the run\n")
    lock = run / E1 / ".lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside)
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run)
    assert str(lock) in r.stderr and "symbolic link" in r.stderr
    if dangling:
        assert not outside.exists()  # a dangling link never makes genenv create its target
    else:
        assert outside.read_text() == "precious, outside the run\n"
    assert snapshot(run) == before
    cli("status", "--run", run, expect=0)  # reading the run still works


@pytest.mark.parametrize("target", ["epochs/0001/scores.parquet", "epochs/0001/manifests", "epochs/0001/metrics.json",
                                    "pools/agent_train", "logs/score.log"])
def test_links_inside_the_run_are_never_written_through(run, tmp_path, target):
    p = run / target
    outside = tmp_path / "outside"
    if p.is_dir():
        shutil.copytree(p, outside)
        shutil.rmtree(p)
    else:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.exists():
            shutil.copy(p, outside)
            p.unlink()
        else:
            outside.write_text("a log outside the run\n")
    p.symlink_to(outside)
    files = sorted(outside.rglob("*")) if outside.is_dir() else [outside]
    before = _digests(*files)
    r = cli("score", "--epoch", 1, "--run", run, "--force", expect=None)
    assert _digests(*files) == before
    if target.startswith("logs/"):
        assert r.exit_code == 0 and "not logging to" in r.output
    else:
        assert r.exit_code == 2 and "symbolic link" in r.stderr and str(p) in r.stderr


def test_init_force_on_a_mixed_run_keeps_the_previous_seeds_when_a_seed_file_is_bad(tmp_path):
    data = SRC / "genenv_cli" / "domains" / "data"
    root = tmp_path / "mix"
    cli("init", root, "--domain", "arith", "--domain", "tool_call", "--seeds",
        f"arith={data / 'arith_seeds.jsonl'}", "--seeds", f"tool_call={data / 'tool_call_seeds.jsonl'}", expect=0)
    before = snapshot(root)
    other = tmp_path / "other.jsonl"
    other.write_text('{"id": "a1", "split": "train", "expression": "2 + 3", "answer": 5}\n')
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x00\xff\xfe\x89PNG\r\n" * 50)
    r = cli("init", root, "--domain", "arith", "--domain", "tool_call", "--force", "--seeds", f"arith={other}",
            "--seeds", f"tool_call={binary}")
    assert str(binary) in r.stderr
    assert snapshot(root) == before  # the first domain's seeds, their manifest and genenv.toml as they were
    assert not [p for p in root.rglob("*") if ".tmp-" in p.name or ".old-" in p.name]


def test_metrics_json_is_derived_state_rebuilt_by_a_no_op_rerun(run):
    manifest = json.loads((run / E1 / "manifests" / "score.json").read_text())
    metrics = run / E1 / "metrics.json"
    stale = json.loads(metrics.read_text())
    stale.update({"env_r_mean": 0.123456, "tasks": 8, "alpha": 0.9})  # numbers a killed older genenv left
    metrics.write_text(json.dumps(stale))
    rows = json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"]
    assert rows[0]["metrics"]["env_r_mean"] == manifest["metrics"]["env_r_mean"]
    assert rows[0]["metrics"]["tasks"] == 6 and rows[0]["metrics"]["alpha"] == 0.5
    out = json.loads(cli("report", "--run", run, "--json", expect=0).stdout)
    assert out["numbers"]["metrics"][0]["env_r_mean"] == manifest["metrics"]["env_r_mean"]
    assert "up to date" in cli("score", "--epoch", 1, "--run", run, expect=0).stdout
    fixed = json.loads(metrics.read_text())
    assert fixed["env_r_mean"] == manifest["metrics"]["env_r_mean"] and fixed["tasks"] == 6


def _in_subprocess(*args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """The CLI in a child process with a time limit: a hang fails the test instead of stalling the suite."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        return subprocess.run([sys.executable, "-m", "genenv_cli", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"genenv {' '.join(args)} did not finish in {timeout} s")


def test_a_huge_shard_count_is_refused_and_one_found_on_disk_is_ignored(run):
    r = cli("rollout", "--epoch", 1, "--shard", "1/99999999999999999999", "--run", run)
    assert "1 <= I <= N <= 4,096" in r.stderr
    m = run / E1 / "manifests"
    (m / "rollout.json").rename(m / "rollout.shard-1-of-99999999999999999999.json")
    r = _in_subprocess("status", "--json", "--run", str(run))
    assert r.returncode == 0, r.stderr
    r = _in_subprocess("score", "--epoch", "1", "--run", str(run), "--force")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.parametrize("where", ["/dev/zero", "../outside.parquet"])
def test_a_manifest_naming_an_output_elsewhere_is_not_read(run, where):
    path = run / E1 / "manifests" / "score.json"
    manifest = json.loads(path.read_text())
    manifest["outputs"]["scores"]["path"] = where
    manifest["outputs"]["scores"]["fingerprint"].update({"size": 0, "mtime_ns": 1})
    path.write_text(json.dumps(manifest))
    r = _in_subprocess("status", "--json", "--run", str(run))
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)["epochs"][0]["stages"]["score"]
    assert st["state"] == "incomplete" and where in st["reasons"][0]


def test_a_device_where_an_input_belongs_is_named(run):
    tasks = run / E1 / "tasks.jsonl"
    tasks.unlink()
    tasks.symlink_to("/dev/zero")
    r = _in_subprocess("score", "--epoch", "1", "--run", str(run), "--force")
    assert r.returncode == 2 and "not a regular file" in r.stderr and "Traceback" not in r.stderr
    assert _in_subprocess("status", "--run", str(run)).returncode == 0


def test_manifests_being_a_file_is_named(run):
    m = run / E1 / "manifests"
    shutil.rmtree(m)
    m.write_text("not a folder")
    r = cli("status", "--run", run, expect=0)
    assert f"{m} is a file where the epoch's manifests folder belongs" in r.stdout
    assert "missing" not in r.stdout.split("\n")[2]
    r = cli("score", "--epoch", 1, "--run", run)
    assert f"{m} is a file where the epoch's manifests folder belongs" in r.stderr
    assert "Run `genenv rollout" not in r.stderr


def test_a_folder_at_an_output_path_is_named_by_its_own_name(run):
    out = run / E1 / "scores.parquet"
    out.unlink()
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    before = snapshot(run)
    r = cli("score", "--epoch", 1, "--run", run, "--force")
    assert f"{out} is a folder where `score` writes its output scores" in r.stderr and ".tmp-" not in r.stderr
    assert snapshot(run) == before
    assert not [p for p in run.rglob("*") if ".tmp-" in p.name]


def test_a_manifest_tmp_of_a_dead_writer_is_cleaned(run):
    m = run / E1 / "manifests"
    dead, alive = m / ".score.json.tmp-999999999", m / ".score.json.tmp-1"
    for p in (dead, alive):
        p.write_bytes((m / "score.json").read_bytes())
    assert "up to date" in cli("score", "--epoch", 1, "--run", run, expect=0).stdout
    assert not dead.exists() and alive.exists()  # only a writer that is gone leaves garbage
    assert json.loads(cli("status", "--json", "--run", run, expect=0).stdout)["epochs"][0]["stages"]["score"][
        "state"] == "done"
