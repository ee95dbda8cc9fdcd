"""Registry rows added at run time are checked where they are registered, and a tracker's files go through the
same containment and link checks as the built-in ones: a tracker with an absolute folder, or named to climb out
of the run, is refused at registration, and one that slipped past (its row changed afterwards, an entry point's
name) is refused when points are sent, with nothing written outside the run. A manifest damaged so that the run's
points cannot be worked out costs the trackers a warning, never a committed stage its exit status."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from genenv_cli.catalogue.domains import DOMAINS
from genenv_cli.catalogue.trackers import TRACKERS
from genenv_cli.core.errors import RegistryError
from genenv_cli.core.registry import Row
from genenv_cli.rundir import RunDir

TRACKER_MODULE = """
    from pathlib import Path

    def send(folder, identity, points, cfg):
        Path(folder, "sent.txt").write_text(str(len(points)))
"""


@pytest.fixture
def tracker_module(tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "hostile_tracker.py").write_text(textwrap.dedent(TRACKER_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    added: list[str] = []
    yield added
    for name in added:
        TRACKERS.added.pop(name, None)
        TRACKERS.forget(name)


def _run(tmp_path: Path) -> RunDir:
    from genenv_cli.catalogue.config import config_from_dict, render_config

    root = tmp_path / "run"
    root.mkdir()
    (root / "genenv.toml").write_text(render_config(config_from_dict({"run": {"domain": "arith"}}, "test")))
    return RunDir(root)


def _reporting(run: RunDir, name: str):
    cfg = run.load_config()
    cfg.run.report_to = [name]
    return cfg


@pytest.mark.parametrize("name,facts,said", [
    ("tb-outside", {"takes": "files", "folder": "/tmp/genenv-outside"}, "folder '/tmp/genenv-outside' is refused"),
    ("tb-climbs", {"takes": "files", "folder": "../../outside"}, "no `..`"),
    ("../../evil-ledger", {"takes": "append"}, "is refused: a name is a letter"),
])
def test_a_tracker_row_that_would_write_outside_the_run_is_refused_at_registration(name, facts, said):
    try:
        with pytest.raises(RegistryError) as err:
            TRACKERS.register(name, "genenv_cli.trackers.tensorboard_files:write_event_files", package="json", **facts)
        assert said in str(err.value)
        assert name not in TRACKERS.added
    finally:
        TRACKERS.added.pop(name, None)


@pytest.mark.parametrize("name", ["../x", "a/b", "", "x" * 65, "émoji", "1st"])
def test_a_domain_row_whose_name_is_not_an_identifier_is_refused(name):
    try:
        with pytest.raises(RegistryError, match="is refused"):
            DOMAINS.register(name, "genenv_cli.domains.arith:ArithDomain")
        assert name not in DOMAINS.added
    finally:
        DOMAINS.added.pop(name, None)


def test_a_tensorboard_row_with_an_absolute_folder_that_slipped_past_writes_nothing_outside(tmp_path, tracker_module,
                                                                                         capsys):
    from genenv_cli.trackers.sync import sync

    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "events.out.tfevents.e0001.1-score"
    victim.write_bytes(b"someone else's events")
    TRACKERS.added["tb2"] = Row("genenv_cli.trackers.tensorboard_files:write_event_files",
                                {"package": "json", "takes": "files", "folder": str(outside)})
    tracker_module.append("tb2")
    run = _run(tmp_path)
    got = sync(run, _reporting(run, "tb2"))
    assert "warning" in got and "tb2" in got["warning"], got
    assert sorted(p.name for p in outside.iterdir()) == [victim.name] and victim.read_bytes() == b"someone else's events"


def test_a_ledger_named_to_climb_out_that_slipped_past_is_not_written(tmp_path, tracker_module):
    from genenv_cli.trackers.sync import sync

    name = "../../evil-ledger"
    TRACKERS.added[name] = Row("hostile_tracker:send", {"package": "json", "takes": "append"})
    tracker_module.append(name)
    run = _run(tmp_path)
    got = sync(run, _reporting(run, name))
    assert "warning" in got, got
    assert not (tmp_path / "evil-ledger.json").exists() and not (run.root / "evil-ledger.json").exists()


def test_a_manifest_whose_counts_are_a_list_costs_the_trackers_a_warning_not_the_stage(tmp_path, tracker_module):
    from genenv_cli.trackers.sync import sync
    from stagekit import fake_stage

    TRACKERS.register("lines2", "hostile_tracker:send", package="json", takes="append")
    tracker_module.append("lines2")
    run = _run(tmp_path)
    fake_stage(run, 1, "score", {"scores": (run.epoch_dir(1) / "x.txt", "x")})
    path = run.manifest_path(1, "score")
    manifest = json.loads(path.read_text())
    manifest["counts"] = [1, 2, 3]
    path.write_text(json.dumps(manifest))
    got = sync(run, _reporting(run, "lines2"))  # raised on the damaged counts, after the stage had committed
    assert "warning" in got or "lines2" in got, got
