"""`genenv compare` on three synthetic runs: two seeds of one arm and a run with other settings, which must be
flagged and kept apart, not averaged in."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.compare import CHARTS, mean_interval
from genenv_cli.config import apply_overrides, config_from_dict, render_config

EPOCHS = 3


def make_run(root: Path, seed: int, overrides: list[str], band: list[float], informative: list[float],
             heldout: list[float], mix: list[dict[str, float]]) -> Path:
    root.mkdir(parents=True)
    cfg = config_from_dict(apply_overrides({}, [f"run.seed={seed}", "run.domain=arith", *overrides]), "test")
    (root / "genenv.toml").write_text(render_config(cfg))
    for e in range(1, EPOCHS + 1):
        d = root / "epochs" / f"{e:04d}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({
            "epoch": e, "alpha": 0.5, "band_low": 0.4, "band_high": 0.6, "rollouts": 256,
            "env_batch_band_share": band[e - 1], "band_share": band[e - 1] / 2, "informative_share": informative[e - 1],
            "env_shape_mix": mix[e - 1], "shape_success": {}}))
    ev = root / "evals" / "heldout"
    ev.mkdir(parents=True)
    for e, v in enumerate(heldout):
        tag = "embedded" if e == 0 else f"run-e{e:04d}-agent"
        (ev / f"{tag}.json").write_text(json.dumps({
            "bench": "heldout", "model_tag": tag, "epoch": e or None, "protocol": "official",
            "headline": {"name": "success_rate", "value": v}, "n": 240}))
    return root


@pytest.fixture()
def runs(tmp_path):
    mix1 = [{"add-1d": 0.5, "sub-1d": 0.5}, {"add-1d": 0.25, "sub-1d": 0.75}, {"sub-1d": 1.0}]
    a = make_run(tmp_path / "g0", 0, ["env.mode=genenv"], [0.1, 0.3, 0.5], [0.4, 0.5, 0.6], [20, 22, 24, 26], mix1)
    b = make_run(tmp_path / "g1", 1, ["env.mode=genenv"], [0.3, 0.5, 0.7], [0.6, 0.7, 0.8], [20, 24, 26, 30], mix1)
    c = make_run(tmp_path / "odd", 2, ["env.mode=genenv", "rollout.group_size=4"], [0.9, 0.9, 0.9],
                 [0.1, 0.1, 0.1], [20, 90, 90, 90], mix1)
    return a, b, c


def test_interval_is_students_t():
    m = mean_interval([0.2, 0.4, 0.6])
    assert m["mean"] == pytest.approx(0.4) and m["n"] == 3
    assert m["high"] - m["mean"] == pytest.approx(4.303 * 0.2 / 3 ** 0.5, rel=1e-4)
    assert mean_interval([0.5]) == {"mean": 0.5, "low": None, "high": None, "n": 1}
    assert mean_interval([None])["mean"] is None


@pytest.mark.slow
def test_compare_overlays_arms_and_flags_other_settings(runs, tmp_path):
    out = tmp_path / "cmp" / "compare.html"
    result = CliRunner().invoke(app, ["compare", *map(str, runs), "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    # the two seeds form one arm; the run with group_size 4 is its own arm and flagged, naming the setting
    assert sorted(len(v) for v in data["arms"].values()) == [1, 2]
    assert sorted(data["arms"]) == ["genenv", "genenv (rollout.group_size=4)"]  # named by what sets it apart
    assert [f for f in data["flags"] if "rollout.group_size" in f] == [
        "arm 'genenv (rollout.group_size=4)' differs from the others in a setting besides env.mode and agent.mode: "
        "rollout.group_size 4 where the other arm has 8. It is drawn as its own arm, not a like-for-like comparison "
        "with them."]
    page = out.read_text()
    assert "rollout.group_size" in page and "⚠" in page
    # the arms table lists each arm's run.seed values under that name (a count is the runs column)
    assert "<th>runs</th><th>run.seed of each run</th>" in page and "<td>2</td><td>0, 1</td>" in page
    for cid, _ in CHARTS:
        m = re.search(rf'<section id="{cid}">.*?</section>', page, re.S)
        assert m, cid
        png = re.search(r'src="data:image/png;base64,([^"]+)"', m.group(0))
        assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG"), cid
        assert (out.parent / f"{cid}.png").exists()
    nums = data["numbers"]
    arm = next(k for k, v in data["arms"].items() if len(v) == 2)
    env_band = nums["in-band"]["env_batch_band_share"][arm]
    assert env_band["mean"] == pytest.approx([0.2, 0.4, 0.6]) and env_band["n"] == [2, 2, 2]
    inf = nums["informative"][arm]
    assert inf["mean"] == pytest.approx([0.5, 0.6, 0.7])
    assert inf["high"][0] - inf["mean"][0] == pytest.approx(12.706 * 0.1414214 / 2 ** 0.5, rel=1e-4)
    held = nums["heldout"][arm]
    assert held["rollouts"] == [0, 256, 512, 768]
    assert held["mean"] == pytest.approx([0.20, 0.23, 0.25, 0.28])
    assert nums["shape-mix"][arm]["mix"]["sub-1d"] == pytest.approx([0.5, 0.75, 1.0])
    # the numbers are in the page's tables too
    assert "23.0%" in page and "75.0%" in page


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path):
    result = CliRunner().invoke(app, ["compare", str(tmp_path), "--out", str(tmp_path / "c.html")])
    assert result.exit_code == 2 and "genenv.toml" in result.output


def test_arms_of_one_mode_keep_distinct_names():
    from genenv_cli.compare import RunData, group_arms

    base = {"env.mode": "genenv", "a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    other = [{**base, "a": 2, "b": 2, "c": 2, "d": 2}, {**base, "a": 2, "b": 2, "c": 2, "e": 2}]
    runs = [RunData(Path(f"r{i}"), i, s, "genenv", {}) for i, s in enumerate([base, *other])]
    arms, _ = group_arms(runs)
    labels = [a.label for a in arms]
    assert len(set(labels)) == 3 and labels[0] == "genenv" and labels[1].startswith("genenv (a=2, b=2, c=2")


def test_each_departure_is_flagged_once_with_only_its_own_setting():
    """Headline arms and two departures: one flag per departure naming its setting alone, none for the headline
    arms, however many pairs of arms there are."""
    from genenv_cli.compare import RunData, group_arms

    base = {"env.mode": "genenv", "agent.mode": "train", "curriculum.k_min": 0.1, "env_update.learning_rate": 1e-4}
    settings = [base, {**base, "env.mode": "frozen"}, {**base, "env.mode": "static"},
                {**base, "curriculum.k_min": 0.2}, {**base, "env_update.learning_rate": 1e-3}]
    runs = [RunData(Path(f"r{i}"), 1, s, s["env.mode"], {}) for i, s in enumerate(settings)]
    _, flags = group_arms(runs)
    assert len(flags) == 2
    assert flags[0].startswith("arm 'genenv (curriculum.k_min=0.2)'") and "curriculum.k_min 0.2 where most arms have 0.1" in flags[0]
    assert "learning_rate" not in flags[0] and "k_min" not in flags[1]
    assert "env_update.learning_rate 0.001 where most arms have 0.0001" in flags[1]


def test_runs_below_the_current_folder_show_relative_paths(runs, tmp_path, monkeypatch):
    """A run read from a record committed in the repository is shown by its path in the repository, not by the
    absolute path of the machine that drew the page; a run elsewhere keeps the path it was given."""
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cmp" / "compare.html"
    elsewhere = runs[2].rename(tmp_path.parent / f"{tmp_path.name}-odd")
    result = CliRunner().invoke(app, ["compare", str(runs[0]), str(runs[1]), str(elsewhere), "--out", str(out),
                                      "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)["arms"]
    assert shown["genenv"] == ["g0", "g1"]
    assert shown["genenv (rollout.group_size=4)"] == [str(elsewhere)]
    page = out.read_text()
    assert "<td class=\"row\">g0, g1</td>" in page and str(tmp_path / "g0") not in page
