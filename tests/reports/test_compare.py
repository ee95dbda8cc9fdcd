"""`genenv compare` on three synthetic runs: two seeds of one arm and a run with other settings, which must be
flagged and kept apart, not averaged in."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config
from genenv_cli.cli import app
from genenv_cli.views.report.compare import CHARTS, mean_interval

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
    env_band = nums["in-band"]["arms"][arm]
    assert env_band["mean"] == pytest.approx([0.2, 0.4, 0.6]) and env_band["n"] == [2, 2, 2]
    assert nums["task-band"]["arms"][arm]["mean"] == pytest.approx([0.1, 0.2, 0.3])
    inf = nums["informative"]["arms"][arm]
    assert inf["mean"] == pytest.approx([0.5, 0.6, 0.7])
    assert inf["high"][0] - inf["mean"][0] == pytest.approx(12.706 * 0.1414214 / 2 ** 0.5, rel=1e-4)
    held = nums["heldout"]["arms"][arm]
    assert held["rollouts"] == [0, 256, 512, 768]
    assert held["mean"] == pytest.approx([0.20, 0.23, 0.25, 0.28])
    assert nums["shape-mix"][arm]["mix"]["sub-1d"] == pytest.approx([0.5, 0.75, 1.0])
    # the first arm given is the baseline: the other arm (one run, seed 2, not among the baseline's seeds) minus
    # it, unpaired, with no interval from a single run
    assert data["baselines"] == {"genenv (rollout.group_size=4)": "genenv"}
    diff = nums["in-band"]["differences"]["genenv (rollout.group_size=4)"]
    assert diff["mean"] == pytest.approx([0.7, 0.5, 0.3]) and diff["paired"] == [False] * 3 and diff["low"] == [None] * 3
    for cid in ("in-band", "task-band", "informative", "heldout"):
        assert (out.parent / f"{cid}-diff.png").exists(), cid
    # the numbers are in the page's tables too: epochs down, arms across, a mean and its interval per cell
    assert "23.0% [" in page and "75.0%" in page and "+70.0</td>" in page


def test_compare_refuses_a_folder_that_is_not_a_run(tmp_path):
    result = CliRunner().invoke(app, ["compare", str(tmp_path), "--out", str(tmp_path / "c.html")])
    assert result.exit_code == 2 and "genenv.toml" in result.output


def test_arms_of_one_mode_keep_distinct_names():
    from genenv_cli.views.report.compare import RunData, group_arms

    base = {"env.mode": "genenv", "a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    other = [{**base, "a": 2, "b": 2, "c": 2, "d": 2}, {**base, "a": 2, "b": 2, "c": 2, "e": 2}]
    runs = [RunData(Path(f"r{i}"), i, s, "genenv", {}) for i, s in enumerate([base, *other])]
    arms, _ = group_arms(runs)
    labels = [a.label for a in arms]
    assert len(set(labels)) == 3 and labels[0] == "genenv" and labels[1].startswith("genenv (a=2, b=2, c=2")


def test_each_departure_is_flagged_once_with_only_its_own_setting():
    """Headline arms and two departures: one flag per departure naming its setting alone, none for the headline
    arms, however many pairs of arms there are."""
    from genenv_cli.views.report.compare import RunData, group_arms

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


def _labelled(tmp_path, names: list[str], seeds=(0, 1)) -> tuple[list[Path], list[str]]:
    """One arm per name, each with `seeds` runs of equal settings, told apart only by their labels; arm i's
    in-band share is 0.1 * i plus 0.02 * seed, so arm i minus arm 0 is 0.1 * i exactly, paired by seed."""
    mix = [{"add-1d": 1.0}] * EPOCHS
    paths, labels = [], []
    for i, name in enumerate(names):
        for s in seeds:
            band = [0.1 * i + 0.02 * s + 0.01 * e for e in range(EPOCHS)]
            root = make_run(tmp_path / f"{name}-s{s}", s, ["env.mode=genenv"], band, band, [20] * (EPOCHS + 1), mix)
            paths.append(root)
            labels.append(f"{root}={name}")
    return paths, labels


@pytest.mark.slow
def test_labels_name_arms_and_differences_pair_by_seed(tmp_path):
    paths, labels = _labelled(tmp_path, ["base", "better"])
    out = tmp_path / "cmp" / "compare.html"
    # one label per arm is enough: the other seed of an arm joins it by its settings... unless another label claims it
    labels = [f"--label={x}" for x in labels]
    result = CliRunner().invoke(app, ["compare", *map(str, paths), "--out", str(out), "--json", *labels])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert sorted(data["arms"]) == ["base", "better"] and data["baselines"] == {"better": "base"}
    d = data["numbers"]["in-band"]["differences"]["better"]
    assert d["paired"] == [True] * EPOCHS and d["n"] == [2] * EPOCHS
    assert d["mean"] == pytest.approx([0.1] * EPOCHS) and d["low"] == pytest.approx([0.1] * EPOCHS)  # no spread
    page = out.read_text()
    assert "better − base" in page and '<td class="clear up">+10.0 [+10.0, +10.0]</td>' in page
    # the baseline named explicitly, the other way round
    result = CliRunner().invoke(app, ["compare", *map(str, paths), "--out", str(out), "--json", *labels,
                                      "--baseline", "better"])
    assert json.loads(result.stdout)["baselines"] == {"base": "better"}
    # a label that names no arm, and one given to runs whose settings differ, are refused
    bad = CliRunner().invoke(app, ["compare", *map(str, paths), "--out", str(out), *labels, "--baseline", "nope"])
    assert bad.exit_code == 2 and "'nope', which is not an arm here" in bad.output
    odd = make_run(tmp_path / "odd", 0, ["env.mode=frozen"], [0.1] * 3, [0.1] * 3, [20] * 4, [{}] * 3)
    bad = CliRunner().invoke(app, ["compare", *map(str, paths), str(odd), "--out", str(out), *labels,
                                   f"--label={odd}=base"])
    assert bad.exit_code == 2 and "names runs whose settings differ" in bad.output and "env.mode" in bad.output
    # equal settings under two labels with a run left unlabelled: which arm it joins is not guessed
    bad = CliRunner().invoke(app, ["compare", *map(str, paths), "--out", str(out), labels[0], labels[2]])
    assert bad.exit_code == 2 and "give it a --label too" in bad.output


@pytest.mark.slow
def test_more_than_three_arms_get_one_panel_each(tmp_path, monkeypatch):
    """Six arms: every figure is small multiples with at most three bands a panel (each arm beside its baseline),
    the differences one panel per compared arm, and the tables have epochs down and arms across."""
    from genenv_cli.actions.compare import build_compare
    from genenv_cli.views.report import charts

    drawn = []
    real = charts.arm_grid

    def spy(panels, *a, **kw):
        drawn.append((kw.get("zero_line", False), [[arm.label for arm in p.arms] for p in panels]))
        return real(panels, *a, **kw)

    monkeypatch.setattr(charts, "arm_grid", spy)
    names = ["frozen", "genenv", "genenv-var2", "frozen-var2", "kmin0.2", "lr1e-3"]
    paths, labels = _labelled(tmp_path, names)
    result = build_compare(paths, tmp_path / "cmp" / "compare.html", labels=labels,
                           baselines=["frozen", "genenv-var2=frozen-var2"])
    assert result["baselines"]["genenv-var2"] == "frozen-var2" and result["baselines"]["lr1e-3"] == "frozen"
    assert len(drawn) == 8  # four claims, each its arms and its differences
    for diff, panels in drawn:
        assert all(len(p) <= 3 for p in panels)
        assert len(panels) == (5 if diff else 6)
    own = next(panels for diff, panels in drawn if not diff)
    assert own[2] == ["genenv-var2", "baseline: frozen-var2"] and own[0] == ["frozen"]
    page = Path(result["html"]).read_text()
    section = re.search(r'<section id="in-band">.*?</section>', page, re.S).group(0)
    header = re.findall(r"<tr><th class=\"row\">epoch</th>(.*?)</tr>", section)
    assert len(header) == 2 and header[1].count("<th>") == 6 and "genenv-var2 − frozen-var2" in header[0]
    assert section.count('<tr><th class="row">') == 2 * (EPOCHS + 1)  # two tables, one row an epoch


def test_a_panel_never_overlays_more_than_three_bands():
    from genenv_cli.views.report import charts

    arms = [charts.Arm(str(i), [1], [0.1], [0.0], [0.2]) for i in range(4)]
    with pytest.raises(ValueError, match="at most 3"):
        charts.arm_grid([charts.Panel("too many", arms)], charts.Decor())


def _browser() -> str | None:
    import shutil

    return next((b for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)), None)


@pytest.mark.slow
@pytest.mark.skipif(_browser() is None, reason="no headless browser here (Debian: apt-get install chromium)")
def test_the_page_renders_in_a_real_browser(tmp_path):
    """Chromium renders the six-arm page headless: the screenshot shows the charts (their colours, which no text or
    table of the page uses), so the embedded PNGs decoded and the page laid out."""
    import subprocess

    import numpy as np
    from matplotlib.image import imread

    from genenv_cli.actions.compare import build_compare
    from genenv_cli.views.report.charts import PALETTE

    paths, labels = _labelled(tmp_path, ["frozen", "genenv", "genenv-var2", "frozen-var2", "kmin0.2", "lr1e-3"])
    result = build_compare(paths, tmp_path / "cmp" / "compare.html", labels=labels)
    shot = tmp_path / "page.png"
    done = subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--window-size=1000,2400", f"--screenshot={shot}", Path(result["html"]).as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file(), done.stderr[-2000:]
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1000)
    for colour in PALETTE[:2]:  # the first two arms' lines
        rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        assert (np.abs(pixels - rgb).max(axis=-1) < 0.03).sum() > 50, colour
