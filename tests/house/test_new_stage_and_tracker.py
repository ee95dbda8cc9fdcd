"""A stage and a tracker are registry rows like domains and suites: a throwaway stage and a throwaway tracker,
written to a temporary folder and registered in this process, take their place in the epoch (`run` runs the stage
after the one its row names and publishes to the tracker after its commit) and in `status` (its column and count).

`genenv run` starts every stage in a process of its own, which knows the built-in rows and the plugins' (the
entry-point group `genenv.stages`): a plugin's stage runs there (the last test, a stage installed as pip installs
one), and a row registered in a process is run there by `runner.run_epochs`, the same loop in one process, or as
its own command. The built-in stages are replaced here
by stand-ins that only record their turn, so the test loads no model; the throwaway stage runs for real, under the
contract. Also: the pipelines' epoch (pipelines/epoch.sh) runs the built-in stages in the registry's order, and
every row's extra is one pyproject declares and the noxfile installs."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import tomllib

import pytest
from typer.testing import CliRunner

from genenv_cli.actions import runner
from genenv_cli.catalogue.engines import ENGINES
from genenv_cli.catalogue.stages import EPOCH_STAGES, STAGES, Stage, epoch_stages
from genenv_cli.catalogue.trackers import TRACKERS
from genenv_cli.cli import app
from genenv_cli.core.ui import UI
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.contract import StageResult
from paths import ROOT

STAGE_MODULE = '''
from genenv_cli.rundir.contract import StagePlan, execute

STAGE = "count-tasks"


def plan(run_dir, cfg, epoch):
    e = run_dir.epoch_dir(epoch)
    return StagePlan(STAGE, epoch, inputs={"tasks": e / "tasks.jsonl"}, outputs={"count": e / "task_count.txt"})


def run(run_dir, cfg, epoch, *, force=False, ui=None):
    def body(out):
        n = sum(1 for line in (run_dir.epoch_dir(epoch) / "tasks.jsonl").read_text().splitlines() if line.strip())
        out.path("count").write_text(str(n))
        out.counts["tasks_counted"] = n
    return execute(run_dir, cfg, STAGE, epoch, lambda: plan(run_dir, cfg, epoch), body, force=force)


def summary(counts, metrics):
    return f"{counts.get('tasks_counted')} tasks counted"
'''

TRACKER_MODULE = '''
import json


def send(folder, identity, points, cfg):
    with open(folder / "lines.jsonl", "a") as f:
        for p in points:
            f.write(json.dumps({"tag": p.tag, "step": p.step, "value": p.value}) + "\\n")
'''


@pytest.fixture
def registered(tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "throwaway_stage.py").write_text(textwrap.dedent(STAGE_MODULE))
    (folder / "throwaway_tracker.py").write_text(textwrap.dedent(TRACKER_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    STAGES.register(Stage("count-tasks", "throwaway_stage", "Count the epoch's tasks.", short="counted",
                          count="tasks_counted", metrics={"tasks_counted": ("counts", "tasks_counted")},
                          after="generate-tasks"))
    TRACKERS.register("lines", "throwaway_tracker:send", package="json", extra="", takes="append")
    yield
    STAGES.unregister("count-tasks")
    TRACKERS.unregister("lines")


def test_a_throwaway_stage_and_tracker_appear_in_run_and_status(tmp_path, registered, monkeypatch):
    root = tmp_path / "run"
    r = CliRunner().invoke(app, ["init", str(root), "--domain", "arith", "--set", 'run.report_to=["lines"]'])
    assert r.exit_code == 0, r.output
    run = RunDir(root.resolve())
    run.epoch_dir(1).mkdir(parents=True, exist_ok=True)
    (run.epoch_dir(1) / "tasks.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n')
    assert epoch_stages() == ["generate-tasks", "count-tasks", "rollout", "score", "update-agent", "update-env",
                              "eval-agent"]

    turns = []
    real = runner.stage_module

    class StandIn:
        def __init__(self, name):
            self.name = name

        def run(self, run_dir, cfg, epoch, *, force=False, ui=None):
            turns.append(self.name)
            return StageResult(self.name, epoch, True, {}, f"{self.name}: stand-in")

    def stage_module(name):
        if name in EPOCH_STAGES:
            return StandIn(name)
        turns.append(name)
        return real(name)

    monkeypatch.setattr(runner, "stage_module", stage_module)
    results = runner.run_epochs(run, run.load_config(), 1, ui=UI(quiet=True))
    assert turns == ["generate-tasks", "count-tasks", "rollout", "score", "update-agent", "update-env", "eval-agent"]
    assert [r.stage for r in results][1] == "count-tasks" and not results[1].skipped
    assert (run.epoch_dir(1) / "task_count.txt").read_text() == "3"
    assert json.loads(run.manifest_path(1, "count-tasks").read_text())["counts"] == {"tasks_counted": 3}
    # its row's metrics reach metrics.json, though the row was registered after genenv's modules were imported
    assert json.loads(run.metrics_path(1).read_text())["tasks_counted"] == 3
    # the tracker got the stage's number after its commit (the "after" subscribers), once
    sent = [json.loads(line) for line in (run.trackers_dir() / "lines.jsonl").read_text().splitlines()]
    assert sent == [{"tag": "epoch/tasks_counted", "step": 1, "value": 3.0}]

    r = CliRunner().invoke(app, ["status", "--run", str(root), "--json"])
    assert r.exit_code == 0, r.output
    epoch = json.loads(r.output)[0] if isinstance(json.loads(r.output), list) else json.loads(r.output)
    text = json.dumps(epoch)
    assert "count-tasks" in text
    r = CliRunner().invoke(app, ["status", "--run", str(root)])
    assert r.exit_code == 0, r.output
    assert "counted" in r.output


def test_a_stage_row_must_follow_a_known_stage():
    with pytest.raises(KeyError, match="no stage"):
        STAGES.register(Stage("orphan", "nowhere", "Nothing.", after="no-such-stage"))
    assert "orphan" not in STAGES


def test_the_epoch_pipeline_runs_the_registry_order():
    """pipelines/epoch.sh's stage commands, in order, are the built-in stages in the registry's order."""
    script = (ROOT / "pipelines" / "epoch.sh").read_text(encoding="utf-8")
    called = re.findall(r"^\s*(?:CUDA_VISIBLE_DEVICES=\S+ )?\$(?:genenv|train)\s+([a-z-]+)", script, re.M)
    ordered = list(dict.fromkeys(called))
    assert ordered == list(STAGES.builtins)
    trained = re.findall(r"^\s*\$train\s+([a-z-]+)", script, re.M)
    assert trained == [name for name, s in STAGES.builtins.items() if s.training]


def test_every_rows_extra_is_declared_and_installed():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {TRACKERS.facts(n)["extra"] for n in TRACKERS.builtins} | {ENGINES.facts(n)["extra"] for n in ENGINES.builtins}
    named |= {e for s in STAGES.builtins.values() for e in s.extras}
    named.discard(None)
    assert named - set(extras) == set()
    nox = (ROOT / "noxfile.py").read_text()
    tracker_extras = re.search(r"TRACKER_EXTRAS = \(([^)]*)\)", nox).group(1)
    assert {x.strip().strip('"') for x in tracker_extras.split(",") if x.strip()} == {
        TRACKERS.facts(n)["extra"] for n in TRACKERS.builtins}


def test_a_registered_stage_has_a_command(tmp_path, registered):
    """Every row gets a command: a stage registered in this process runs as `genenv NAME --epoch N`."""
    root = tmp_path / "run"
    assert CliRunner().invoke(app, ["init", str(root), "--domain", "arith"]).exit_code == 0
    (root / "epochs" / "0001").mkdir(parents=True)
    (root / "epochs" / "0001" / "tasks.jsonl").write_text('{"id": "a"}\n{"id": "b"}\n')
    r = CliRunner().invoke(app, ["count-tasks", "--epoch", "1", "--run", str(root)])
    assert r.exit_code == 0, r.output
    assert (root / "epochs" / "0001" / "task_count.txt").read_text() == "2"
    assert "count-tasks" in CliRunner().invoke(app, ["--help"]).output


GUIDE = ROOT / "docs" / "extending.md"


def guide_files() -> dict[str, str]:
    """The files docs/extending.md shows, by path: each fenced block whose first line is `# file: PATH`."""
    blocks = re.findall(r"^```[a-z]*\n# file: (\S+)\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), re.S | re.M)
    return {path: text for path, text in blocks}


def entry_points_txt(pyproject: str) -> str:
    """The entry_points.txt pip writes into a distribution's .dist-info for the pyproject.toml `pyproject`."""
    groups = tomllib.loads(pyproject)["project"]["entry-points"]
    return "".join(f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in rows.items()) + "\n"
                   for group, rows in groups.items())


@pytest.fixture
def plugin_site(tmp_path, monkeypatch):
    """docs/extending.md's package of extras laid out as pip installs it: its modules, and a `.dist-info` whose
    entry_points.txt is what its pyproject.toml declares. It is on this process's path too (the run's config names
    the engine and the tracker, which `init` checks), and what the registries read of it is forgotten afterwards."""
    from genenv_cli.catalogue.commit_subscribers import COMMIT_SUBSCRIBERS

    files = guide_files()
    assert set(files) == {"pyproject.toml", "genenv_extras/count_tasks.py", "genenv_extras/csv_tracker.py",
                          "genenv_extras/recording_engine.py", "genenv_extras/commit_log.py"}
    site = tmp_path / "site"
    (site / "genenv_extras").mkdir(parents=True)
    (site / "genenv_extras" / "__init__.py").write_text("")
    for path, text in files.items():
        if path.endswith(".py"):
            (site / path).write_text(text)
    dist = site / "genenv_extras-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: genenv-extras\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(entry_points_txt(files["pyproject.toml"]))
    monkeypatch.syspath_prepend(str(site))
    yield site
    STAGES.forget_plugins()
    for registry, name in [(TRACKERS, "csv"), (ENGINES, "recording-hf"), (COMMIT_SUBSCRIBERS, "commit-log")]:
        registry.forget(name)
    for name in [m for m in sys.modules if m == "genenv_extras" or m.startswith("genenv_extras.")]:
        del sys.modules[name]


def test_a_plugins_row_gives_its_facts(plugin_site):
    """An entry point that names a Row gives the plugin a row like a built-in's: its facts are read, and checked."""
    from genenv_cli.catalogue.commit_subscribers import subscribers
    from genenv_cli.catalogue.engines import engine_facts

    assert TRACKERS.facts("csv") == {"package": "genenv_extras", "takes": "append", "folder": "csv"}
    assert engine_facts("recording-hf") == {"extra": None, "vllm": False, "lora": True}
    assert TRACKERS.get("csv").__module__ == "genenv_extras.csv_tracker"
    assert [f.__name__ for f in subscribers("after")][-1] == "note"


def test_a_plugin_row_with_bad_facts_is_refused_naming_the_plugin(plugin_site):
    from genenv_cli.core.errors import RegistryError

    (plugin_site / "genenv_extras" / "csv_tracker.py").write_text(
        'from genenv_cli.core.registry import Row\nROW = Row("genenv_extras.csv_tracker:send", {"folder": "../out"})\n')
    with pytest.raises(RegistryError, match=r"tracker `csv`: folder \'\.\./out\' is refused"):
        TRACKERS.facts("csv")
    (plugin_site / "genenv_extras" / "commit_log.py").write_text("def note(run, cfg):\n    pass\nROW = note\n")
    from genenv_cli.catalogue.commit_subscribers import subscribers

    with pytest.raises(RegistryError, match="commit subscriber plugin `commit-log`.*names no row"):
        subscribers("after")


@pytest.mark.parametrize("body", ["raise RuntimeError('no')", "import sys\nsys.exit(0)", "import os\nos._exit(0)"])
def test_a_plugin_row_that_fails_to_import_is_the_plugins_error(plugin_site, body):
    """Reading a plugin's row imports its module: what the import raises, and an exit, is reported as the plugin's."""
    from genenv_cli.core.plugin_guard import PluginError

    (plugin_site / "genenv_extras" / "recording_engine.py").write_text(body + "\n")
    with pytest.raises(PluginError, match=r"engine plugin `recording-hf` .*loading \(import\)"):
        ENGINES.facts("recording-hf")


@pytest.mark.slow
@pytest.mark.heavy  # an epoch of the tiny model under `genenv run`, a process per stage: 40 s on 2 cores
def test_plugins_of_every_kind_run_under_genenv_run(tmp_path, make_run, plugin_site):
    """docs/extending.md's stage, tracker, engine and commit subscriber, installed as pip installs a package, each
    one file with its row: under `genenv run` (a process per stage) the stage runs after the stage its row names
    and its number reaches metrics.json and `status`, the run's engine is the plugin's, the tracker gets the run's
    points and the subscriber is called after every stage's commit."""
    import os
    import subprocess

    generations = tmp_path / "generations.jsonl"
    root = make_run("env.mode=seeds", "agent_update.lora=false", "env_update.lora=false", "run.engine=recording-hf",
                    'run.report_to=["csv"]', domain="arith")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), *sys.path]), "GENENV_PROGRESS_INTERVAL": "0",
           "GENENV_RECORD_GENERATIONS": str(generations)}
    done = subprocess.run([sys.executable, "-m", "genenv_cli", "run", "--epochs", "1", "--run", str(root), "--json"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    order = [json.loads(line)["stage"] for line in done.stdout.splitlines() if line.startswith("{")]
    assert order == ["generate-tasks", "count-tasks", "rollout", "score", "update-agent", "update-env", "eval-agent"]
    run = RunDir(root)
    tasks = len((run.epoch_dir(1) / "tasks.jsonl").read_text().splitlines())
    assert (run.epoch_dir(1) / "task_count.txt").read_text() == str(tasks)
    assert json.loads(run.metrics_path(1).read_text())["tasks_counted"] == tasks
    status = subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--run", str(root)], capture_output=True,
                            text=True, env=env, timeout=300)
    assert status.returncode == 0 and "counted" in status.stdout, status.stdout + status.stderr
    # the engine: the rollout's generations went through the plugin (env.mode = seeds: generate-tasks needs none),
    # one line per task, with the group's samples
    recorded = [json.loads(line) for line in generations.read_text().splitlines()]
    assert len(recorded) >= tasks and all(len(r["texts"]) >= 1 and r["messages"] for r in recorded)
    # the tracker: the run's points, the plugin stage's among them
    rows = (run.trackers_dir() / "csv" / "points.csv").read_text().splitlines()
    assert f"epoch/tasks_counted,1,{float(tasks)}" in rows
    # the subscriber: once after each of the seven stages' commits
    assert len((root / "commits.log").read_text().splitlines()) >= 7
