"""`run.report_to`: a two-epoch run's curves in TensorBoard, read back with TensorBoard's own reader, every epoch
figure once, also after stages are rerun; the update curves keyed over epochs; W&B (offline, its run files read back)
and trackio (its local store) given every point once, a late tracker catching up; and the refusals of a tracker that
is named but not installed, before any work."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError

runner = CliRunner()


def _needs(*modules: str) -> pytest.MarkDecorator:
    import importlib.util

    absent = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(absent), reason=f"{', '.join(absent)} not installed (`nox -s tests` installs the "
                                                   f"trackers' extras: pip install 'genenv-cli[{','.join(absent)}]')")


SETS = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.max_rounds=1", "generate.max_new_tokens=12",
        "rollout.group_size=6", "rollout.max_new_tokens=6", "agent_update.learning_rate=0.005",
        "agent_update.batch_size=4", "env_update.learning_rate=0.005", "env_update.kl_max=100",
        "curriculum.k_min=0.5", "evaluate.max_new_tokens=6", "run.eval_limit=8"]
# the figures every epoch of every run has, whatever the tiny model writes and solves
CORE = ["epoch/tasks", "epoch/seed_tasks", "epoch/env_tasks", "epoch/valid_generation_rate", "epoch/rollouts",
        "epoch/success_rate", "epoch/batch_p_mean", "epoch/band_share", "epoch/informative_share",
        "epoch/env_batches", "epoch/env_batches_kept", "epoch/agent_train_reward"]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "GENENV_AUTO_ENGINE": "hf", "OMP_NUM_THREADS": "1", "WANDB_MODE": "offline",
            "WANDB_SILENT": "true", **extra}


def _genenv(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "genenv_cli", *map(str, args)], capture_output=True, text=True,
                          env=env or _env(), timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _write_config(root: Path, model: Path, *sets: str) -> None:
    data = apply_overrides({"run": {"domain": "arith"}, "agent": {"model": str(model)}, "env": {"model": str(model)}},
                           [*SETS, *sets])
    root.mkdir(parents=True, exist_ok=True)
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar TensorBoard's own reader finds in `folder`: tag -> [(step, value)], in the order read."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _manifest_numbers(root: Path, epoch: int) -> dict[str, float]:
    """The epoch's metrics.json numbers as `epoch/<key>` tags."""
    data = json.loads((root / "epochs" / f"{epoch:04d}" / "metrics.json").read_text())
    return {f"epoch/{k}": float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool)
            and k not in ("epoch", "alpha", "band_low", "band_high")}


@pytest.fixture(scope="module")
def two_epochs(tmp_path_factory, arith_model) -> Path:
    """A two-epoch run with run.report_to = ["tensorboard"], every stage in its own process (`genenv run`)."""
    root = tmp_path_factory.mktemp("tracked") / "run"
    _write_config(root, arith_model, 'run.report_to=["tensorboard"]')
    _genenv("run", "--epochs", "2", "--run", root, "-q")
    return root


@pytest.mark.slow
@pytest.mark.e2e
@_needs("tensorboard")
def test_tensorboard_holds_every_epoch_figure_once_also_after_reruns(two_epochs, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(two_epochs, root)
    folder = root / "trackers" / "tensorboard"
    for attempt in ("after the run", "after score and update-agent of epoch 1 were rerun"):
        scalars = tensorboard_scalars(folder)
        for tag, points in scalars.items():
            steps = [s for s, _ in points]
            assert len(steps) == len(set(steps)), (attempt, tag, steps)  # never a step twice
        for epoch in (1, 2):
            want = _manifest_numbers(root, epoch)
            for tag in CORE:
                got = [v for s, v in scalars[tag] if s == epoch]
                assert got == [pytest.approx(want[tag])], (attempt, tag, epoch)
        assert all(sorted(s for s, _ in scalars[tag]) == [1, 2] for tag in CORE), attempt
        if attempt == "after the run":
            before = {p.name: p.read_bytes() for p in folder.iterdir()}
            _genenv("score", "--epoch", "1", "--run", root, "--force", "-q")
            _genenv("update-agent", "--epoch", "1", "--run", root, "--force", "-q")
    after = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert sorted(after) == sorted(before)  # the same files, one per stage and epoch: rewritten, none added
    assert after["events.out.tfevents.e0001.3-score"] != before["events.out.tfevents.e0001.3-score"]  # new wall time
    names = {n.split(".", 3)[3] for n in after}
    assert {"e0001.1-generate-tasks", "e0001.3-score", "e0001.4-update-agent", "e0002.3-score"} <= names
    assert not {n for n in names if "rollout" in n}  # rollout adds no figure
    # evaluations: the base model at step 0 and epoch 2's agent at step 2, once each, also when evaluated again
    for epoch in ("0", "2", "2"):
        _genenv("evaluate", "--bench", "heldout", "--epoch", epoch, "--limit", "4", "--run", root, "-q")
    results = {p.stem: json.loads(p.read_text()) for p in (root / "evals" / "heldout").glob("*.json")}
    held = tensorboard_scalars(folder)["evaluate/heldout"]
    assert sorted(s for s, _ in held) == [0, 2]
    assert dict(held) == pytest.approx({r["epoch"] or 0: r["headline"]["value"] for r in results.values()})


@pytest.mark.slow
@pytest.mark.e2e
@_needs("tensorboard")
def test_a_two_epoch_run_has_held_out_curves_in_tensorboard_status_and_compare(two_epochs, tmp_path):
    """eval-agent, on by default, evaluates each epoch's agent on run.eval_limit held-out items as `genenv run` goes:
    its result files, metrics.json, TensorBoard (step = the epoch), `status` and `genenv compare` hold the same
    numbers; a run without them gets compare's message naming the settings that record them."""
    import hashlib

    root = two_epochs
    scalars = tensorboard_scalars(root / "trackers" / "tensorboard")
    want = {}
    for epoch in (1, 2):
        folder = root / "epochs" / f"{epoch:04d}" / "evals"
        result = json.loads((folder / "heldout.json").read_text())
        samples = (folder / "heldout.samples.jsonl").read_bytes()
        rows = [json.loads(line) for line in samples.decode().splitlines()]
        assert (result["stage"], result["epoch"], result["model_tag"]) == ("eval-agent", epoch, f"epoch-{epoch:04d}-agent")
        assert result["n"] == len(rows) == 8 and result["of"] == 240  # arith's validation seeds, 8 spread over them
        assert len({r["category"] for r in rows}) > 1  # spread over the shapes, not the first 8 of one
        assert result["samples"]["sha256"] == hashlib.sha256(samples).hexdigest()
        right = sum(r["correct"] for r in rows)
        assert result["headline"]["value"] == pytest.approx(100.0 * right / 8)
        metrics = json.loads((root / "epochs" / f"{epoch:04d}" / "metrics.json").read_text())
        assert metrics["heldout_success"] == pytest.approx(right / 8)
        assert metrics["evals"] == {"heldout": pytest.approx(100.0 * right / 8)}
        want[epoch] = right / 8
    assert dict(scalars["epoch/heldout_success"]) == pytest.approx(want)
    assert sorted(s for s, _ in scalars["epoch/heldout_success"]) == [1, 2]
    assert dict(scalars["epoch/evals/heldout"]) == pytest.approx({e: 100.0 * v for e, v in want.items()})
    assert "evaluate/heldout" not in scalars  # the stage's numbers are sent once, as its epoch's figures

    rows = json.loads(_genenv("status", "--run", root, "--json").stdout)["epochs"]
    assert [r["stages"]["eval-agent"]["state"] for r in rows] == ["done", "done"]
    page = json.loads(_genenv("compare", root, "--out", tmp_path / "compare" / "compare.html", "--json").stdout)
    [arm] = page["numbers"]["heldout"]["arms"].values()
    assert arm["epoch"] == [1, 2] and arm["mean"] == pytest.approx([want[1], want[2]])

    bare = tmp_path / "bare"  # the same run without the stage's results: compare names what would record them
    shutil.copytree(root, bare)
    for folder in bare.glob("epochs/*/evals"):
        shutil.rmtree(folder)
    out = tmp_path / "bare-compare" / "compare.html"
    page = json.loads(_genenv("compare", bare, "--out", out, "--json").stdout)
    assert page["numbers"]["heldout"]["arms"] == {} or not any(
        a["epoch"] for a in page["numbers"]["heldout"]["arms"].values())
    section = out.read_text().split('<section id="heldout">', 1)[1].split("</section>", 1)[0]
    assert "None of these runs records it" in section and "run.eval_every" in section
    assert "genenv evaluate --bench heldout --epoch N" in section


@pytest.mark.slow
@_needs("tensorboard")
def test_update_curves_continue_across_epochs_and_a_rerun_moves_later_epochs(make_run, tiny_model):
    """update-agent's per-step figures are at its optimizer steps counted over the run (epoch 2 after epoch 1); a
    rerun of epoch 1 with more steps rewrites epoch 2's points after them, never on top of them."""
    from genenv_cli.rundir import RunDir
    from genenv_cli.stages import update_agent
    from stagekit import agent_pool

    run = RunDir(make_run("agent_update.learning_rate=0.01", "agent_update.batch_size=4",
                          'run.report_to=["tensorboard"]'))
    agent_pool(run, tiny_model, 1, {"t1": [1.0, 0.0, 1.0, 0.0], "t2": [0.0, 1.0, 0.0, 0.0]})
    cfg = run.load_config()
    update_agent.run(run, cfg, 1)
    agent_pool(run, tiny_model, 2, {"t1": [1.0, 0.0, 0.0, 0.0], "t2": [0.0, 1.0, 1.0, 1.0]})
    update_agent.run(run, cfg, 2)
    folder = run.trackers_dir() / "tensorboard"
    loss = tensorboard_scalars(folder)["update-agent/loss"]
    assert [s for s, _ in loss] == [1, 2, 3, 4]  # 8 samples in steps of 4, each epoch
    update_agent.run(run, run.load_config(["agent_update.batch_size=2"]), 1, force=True)  # 4 steps now
    loss = tensorboard_scalars(folder)["update-agent/loss"]
    assert sorted(s for s, _ in loss) == [1, 2, 3, 4, 5, 6]  # epoch 2's two steps moved after epoch 1's four
    steps = json.loads((run.epoch_dir(1) / "manifests" / "update-agent.json").read_text())["counts"]["steps"]
    assert steps == 4


@pytest.mark.slow
@pytest.mark.e2e
@_needs("tensorboard", "wandb", "trackio")
def test_wandb_offline_and_trackio_get_every_point_once(two_epochs, tmp_path):
    """Trackers named after the run catch up at the next stage (here an up-to-date one): W&B's offline run files and
    trackio's store hold every point of the run once, as TensorBoard has it; a rerun stage sends nothing again."""
    root = tmp_path / "run"
    shutil.copytree(two_epochs, root)
    store = tmp_path / "trackio-store"
    # W&B's and trackio's own folders in the test's, not the user's home
    env = _env(TRACKIO_DIR=str(store), **{k: str(tmp_path / k.lower()) for k in (
        "WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "HF_HOME")})
    from genenv_cli.rundir import RunDir

    model = Path(RunDir(root).load_config().agent.model)
    _write_config(root, model, 'run.report_to=["tensorboard", "wandb", "trackio"]', "run.tracker_project=t34")
    done = _genenv("score", "--epoch", "2", "--run", root, env=env)  # up to date: only the trackers catch up
    assert "up to date" in done.stdout + done.stderr
    tb = {(tag, s): v for tag, pts in tensorboard_scalars(root / "trackers" / "tensorboard").items() for s, v in pts}
    ident = json.loads((root / "trackers" / "run.json").read_text())

    def wandb_points() -> Counter:
        from wandb_files import history

        seen: Counter = Counter()
        values = {}
        for row in history(root / "trackers"):
            for key, value in row.items():
                if key.startswith("_") or key in ("epoch", "update-agent/step", "update-env/step"):
                    continue
                axis = "update-agent/step" if key.startswith("update-agent/") else \
                    "update-env/step" if key.startswith("update-env/") else "epoch"
                seen[key, row[axis]] += 1
                values[key, row[axis]] = value
        return seen, values

    def trackio_points() -> Counter:
        code = ("import json, sys; from trackio.sqlite_storage import SQLiteStorage; "
                "print(json.dumps(SQLiteStorage.get_logs(sys.argv[1], sys.argv[2])))")
        out = subprocess.run([sys.executable, "-c", code, "t34", ident["name"]], capture_output=True, text=True,
                             env=env, timeout=300)
        assert out.returncode == 0, out.stderr[-2000:]
        seen: Counter = Counter()
        values = {}
        for row in json.loads(out.stdout.strip().splitlines()[-1]):
            for key, value in row.items():
                if key not in ("step", "timestamp"):
                    seen[key, row["step"]] += 1
                    values[key, row["step"]] = value
        return seen, values

    for attempt in ("caught up", "after a forced rerun of score epoch 1"):
        for name, (seen, values) in (("wandb", wandb_points()), ("trackio", trackio_points())):
            assert set(seen) >= set(tb), (attempt, name, sorted(set(tb) - set(seen))[:5])
            assert all(n == 1 for n in seen.values()), (attempt, name, [k for k, n in seen.items() if n > 1][:5])
            for key, v in tb.items():
                assert values[key] == pytest.approx(v, rel=1e-6), (attempt, name, key)
        if attempt == "caught up":
            _genenv("score", "--epoch", "1", "--run", root, "--force", env=env)
    ledger = json.loads((root / "trackers" / "wandb.json").read_text())
    assert set(ledger["sent"]) >= {f"{tag}@{s}" for tag, s in tb}


@pytest.mark.slow
@_needs("tensorboard")
def test_a_linked_trackers_folder_is_refused_and_the_stage_still_succeeds(two_epochs, tmp_path):
    root = tmp_path / "run"
    shutil.copytree(two_epochs, root)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.rmtree(root / "trackers")
    (root / "trackers").symlink_to(outside)
    done = _genenv("score", "--epoch", "2", "--run", root)
    assert "trackers" in done.stderr and "symbolic link" in done.stderr
    assert list(outside.iterdir()) == []


def test_report_to_names_known_trackers_once():
    with pytest.raises(ConfigError, match="Did you mean `tensorboard`"):
        config_from_dict({"run": {"report_to": ["tensorbaord"]}}, "t")
    with pytest.raises(ConfigError, match="names a tracker twice"):
        config_from_dict({"run": {"report_to": ["wandb", "wandb"]}}, "t")
    assert config_from_dict({"run": {"report_to": ["trackio"]}}, "t").run.report_to == ["trackio"]
    assert config_from_dict({}, "t").run.report_to == []


@pytest.fixture
def wandb_absent(monkeypatch):
    """W&B looks uninstalled (the check asks importlib, as a fresh interpreter would)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))


def test_only_the_trackers_not_installed_are_named(monkeypatch):
    import importlib.util

    from genenv_cli.catalogue import trackers

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in ("wandb", "trackio") else object())
    cfg = config_from_dict({"run": {"report_to": ["tensorboard", "wandb", "trackio"]}}, "t")
    assert trackers.missing(cfg) == ["wandb", "trackio"]
    with pytest.raises(ConfigError, match=r"names wandb, trackio, which are not installed.*genenv-cli\[wandb,trackio\]"):
        trackers.check_installed(cfg)


def test_init_refuses_a_tracker_that_is_not_installed(tmp_path, wandb_absent):
    r = runner.invoke(app, ["init", str(tmp_path / "run"), "--domain", "arith", "--set", 'run.report_to=["wandb"]'])
    assert r.exit_code == 2 and "pip install 'genenv-cli[wandb]'" in r.output
    assert not (tmp_path / "run" / "genenv.toml").exists()


def test_every_stage_and_evaluate_refuse_before_any_work(tmp_path, wandb_absent):
    root = tmp_path / "run"
    data = apply_overrides({"run": {"domain": "arith"}}, ['run.report_to=["wandb"]'])
    root.mkdir()
    (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
    for stage in ("generate-tasks", "rollout", "score", "update-agent", "update-env"):
        r = runner.invoke(app, [stage, "--epoch", "1", "--run", str(root)])
        assert r.exit_code == 2 and "pip install 'genenv-cli[wandb]'" in r.output, (stage, r.output)
    r = runner.invoke(app, ["evaluate", "--bench", "heldout", "--epoch", "0", "--run", str(root)])
    assert r.exit_code == 2 and "genenv-cli[wandb]" in r.output
    assert not (root / "epochs").exists() and not (root / "trackers").exists()  # no epoch, lock or point
