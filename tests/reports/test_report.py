"""`genenv report`: a synthetic run directory (3 epochs, one with nulls, one with no task in the band, one
without task_stats in a second run, evals for two epochs plus a base model) rendered to HTML and PNGs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from genenv_cli.actions.report import build_report
from genenv_cli.catalogue.config import Config, render_config
from genenv_cli.core.errors import InputError
from genenv_cli.rundir import RunDir
from genenv_cli.rundir.datafiles import frame, write_parquet
from genenv_cli.rundir.metrics import sources

CHART_IDS = ["success-rate", "p-task", "band-share", "env-reward", "valid-generation", "env-signal", "lengths",
             "agent-reward", "informative", "env-kl", "evals"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# epoch -> metrics.json; epoch 2 has nulls (its update stages have not run)
METRICS = {
    1: {"tasks": 8, "env_tasks": 6, "seed_tasks": 2, "valid_generation_rate": 0.75, "success_rate": 0.125,
        "batch_p_mean": 0.15, "band_share": 0.0, "env_r_mean": 0.7, "env_batches_kept": 1,
        "mean_prompt_tokens": 200.0, "mean_completion_tokens": 40.0, "agent_train_reward": 0.2,
        "rollouts": 64, "agent_loss": 0.01, "agent_kl": 0.001, "agent_logp_mismatch": 0.0213,
        "agent_sampler_kl": 0.00041, "agent_is_truncated": 0.0125, "env_loss": 1.5, "env_kl": 0.2, "env_kl_stopped": False,
        "env_batches": 2, "env_batch_band_share": 0.0, "informative_share": 0.5,
        "env_groups": 2, "env_groups_informative_share": 0.5, "env_reward_valid": 0.7, "env_reward_invalid": 0.0,
        "env_shape_mix": {"single": 1.0}, "shape_success": {"single": {"p": 0.125, "tasks": 8, "informative": 0.5}},
        "shape_success_by_source": {"env": {"single": {"p": 0.125, "tasks": 6}}, "seed": {"single": {"p": 0.125, "tasks": 2}}}},
    2: {"tasks": 8, "env_tasks": 6, "seed_tasks": 2, "valid_generation_rate": 0.5, "success_rate": 0.4375,
        "batch_p_mean": 0.45, "band_share": 0.375, "env_r_mean": None, "env_batches_kept": None,
        "mean_prompt_tokens": 210.0, "mean_completion_tokens": 50.0, "agent_train_reward": None,
        "rollouts": 64, "agent_loss": None, "agent_kl": None, "agent_logp_mismatch": None,
        "agent_sampler_kl": None, "agent_is_truncated": None, "env_loss": None, "env_kl": None, "env_kl_stopped": None,
        "env_batches": 2, "env_batch_band_share": 0.5, "informative_share": 0.75, "env_shape_mix": None,
        "env_groups": None, "env_groups_informative_share": None, "env_reward_valid": None, "env_reward_invalid": None,
        "shape_success": None, "shape_success_by_source": None},
    3: {"tasks": 8, "env_tasks": 6, "seed_tasks": 2, "valid_generation_rate": 0.875, "success_rate": 0.5,
        "batch_p_mean": 0.5, "band_share": 0.625, "env_r_mean": 0.98, "env_batches_kept": 3,
        "mean_prompt_tokens": 230.0, "mean_completion_tokens": 60.0, "agent_train_reward": 0.45,
        "rollouts": 64, "agent_loss": 0.02, "agent_kl": 0.003, "agent_logp_mismatch": 0.0305,
        "agent_sampler_kl": 0.00062, "agent_is_truncated": 0.0, "env_loss": 1.2, "env_kl": 0.6, "env_kl_stopped": True,
        "env_batches": 2, "env_batch_band_share": 1.0, "informative_share": 0.75,
        "env_groups": 2, "env_groups_informative_share": 1.0, "env_reward_valid": 0.9, "env_reward_invalid": 0.0,
        "env_shape_mix": {"single": 1.0}, "shape_success": {"single": {"p": 0.5, "tasks": 8, "informative": 0.75}},
        "shape_success_by_source": {"env": {"single": {"p": 0.5, "tasks": 6}}, "seed": {"single": {"p": 0.5, "tasks": 2}}}},
}
# epoch -> successes of each of 8 tasks out of K = 8 (band [0.4, 0.6]: 4/8 = 0.5 in band; 3/8, 5/8 not)
SUCCESSES = {
    1: [0, 0, 0, 1, 1, 2, 8, 3],      # no task in the band
    2: [0, 4, 4, 4, 2, 8, 1, 3],      # 3 in band -> 37.5%
    3: [4, 4, 4, 4, 4, 0, 8, 7],      # 5 in band -> 62.5%
}


def _metrics(epoch: int, values: dict) -> dict:
    # eval-agent's figures: none recorded here (its own tests draw them)
    m = {"epoch": epoch, "alpha": 0.5, "band_low": 0.4, "band_high": 0.6, "heldout_success": None, "evals": None}
    m.update(values)
    assert set(sources()) <= set(m)
    return m


def _task_stats(epoch: int, successes: list[int], k: int = 8):
    rows = []
    for i, s in enumerate(successes):
        p = s / k
        rows.append({"task_id": f"e{epoch:04d}-t{i}", "batch_id": f"b{i // 4}", "source": "seed" if i < 2 else "env",
                     "shape": "single", "attempts": k, "successes": s, "p_task": p, "mean_reward": p,
                     "p_batch": 0.5, "r_env": 1.0, "filtered": False, "in_band": 0.4 <= p <= 0.6,
                     "informative": 0 < s < k, "prompt_tokens": 200})
    return frame(rows, "task_stats")


def _eval(bench: str, tag: str, epoch: int | None, value: float, protocol: str = "official") -> dict:
    return {"bench": bench, "model_tag": tag, "epoch": epoch, "protocol": protocol, "split": "test",
            "version": "v1", "data_fingerprint": "abc", "n": 40, "headline": {"name": "overall_acc", "value": value},
            "summary": {"overall": {"acc": value}, "categories": {}}, "created": "2026-11-21T12:00:00",
            "genenv_version": "0.1.0"}


def make_run(root: Path, epochs: dict = METRICS, stats: dict = SUCCESSES, evals: bool = True) -> RunDir:
    root.mkdir(parents=True, exist_ok=True)
    (root / "genenv.toml").write_text(render_config(Config()))
    run = RunDir(root)
    for e, values in epochs.items():
        d = run.epoch_dir(e)
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps(_metrics(e, values)))
        if e in stats:
            write_parquet(_task_stats(e, stats[e]), d / "task_stats.parquet", "task_stats")
    if evals:
        bdir = run.evals_dir("bfcl")
        bdir.mkdir(parents=True)
        for name, ev in [("epoch-0001-agent", _eval("bfcl", "epoch-0001-agent", 1, 12.5)),
                         ("epoch-0003-agent", _eval("bfcl", "epoch-0003-agent", 3, 37.5)),
                         ("base", _eval("bfcl", "base", None, 7.0))]:
            (bdir / f"{name}.json").write_text(json.dumps(ev))
        (bdir / "epoch-0003-agent.samples.jsonl").write_text('{"id": "x", "output": "https://example.com"}\n')
    return run


def _section(page: str, cid: str) -> str:
    m = re.search(rf'<section id="{cid}">(.*?)</section>', page, re.S)
    assert m, f"no section {cid}"
    return m.group(1)


def _row(section: str, label: str) -> list[str]:
    """The cells of the table row headed `label`."""
    m = re.search(rf'<tr><th class="row"[^>]*>{re.escape(label)}</th>(.*?)</tr>', section, re.S)
    assert m, f"no row {label}"
    return re.findall(r"<td[^>]*>(.*?)</td>", m.group(1))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One report, built once and only read by the tests that use it."""
    run = make_run(tmp_path_factory.mktemp("report") / "run")
    return run, build_report(run, Config(), None)


@pytest.mark.slow
def test_report_has_every_chart_and_its_numbers(report):
    run, res = report
    html_path = run.root / "report" / "report.html"
    assert res["html"] == html_path.resolve() and html_path.exists()
    assert res["epochs"] == 3
    page = html_path.read_text()
    for cid in CHART_IDS:
        sec = _section(page, cid)
        assert "<h2>" in sec and "<table>" in sec
        assert re.search(r'<img class="chart" alt="[^"]*" src="data:image/png;base64,', sec), cid
    # numbers under the charts, formatted as the tables show them; nulls as "-", never 0
    assert _row(_section(page, "band-share"), "in band") == ["0.0%", "37.5%", "62.5%"]
    assert _row(_section(page, "success-rate"), "success rate") == ["0.125", "0.438", "0.500"]
    assert _row(_section(page, "success-rate"), "paper (reference)") == ["0.138", "0.425", "0.488"]
    assert _row(_section(page, "env-reward"), "mean R_env") == ["0.700", "-", "0.980"]
    assert _row(_section(page, "valid-generation"), "valid rate") == ["75.0%", "50.0%", "87.5%"]
    lengths = _section(page, "lengths")
    assert _row(lengths, "completion tokens") == ["40.0", "50.0", "60.0"]
    assert re.findall(r"<td[^>]*>([^<]*)</td>", lengths)[-3:] == ["+0%", "+25%", "+50%"]
    assert _row(_section(page, "agent-reward"), "train reward") == ["0.200", "-", "0.450"]
    assert _row(_section(page, "agent-reward"), "sampler |Δ logprob|") == ["0.0213", "-", "0.0305"]
    assert _row(_section(page, "agent-reward"), "KL(sampler ‖ trainer)") == ["0.00041", "-", "0.00062"]
    assert _row(_section(page, "agent-reward"), "IS weight truncated") == ["1.2%", "-", "0.0%"]
    assert _row(_section(page, "informative"), "informative groups") == ["50.0%", "75.0%", "75.0%"]
    assert _row(_section(page, "informative"), "env batches in band") == ["0.0%", "50.0%", "100.0%"]
    kl = _section(page, "env-kl")
    assert _row(kl, "KL") == ["0.2", "-", "0.6"]
    assert _row(kl, "stopped by kl_max") == ["no", "-", "yes"]
    # p-hat table: epoch 1 has no task in the band and still renders
    ptask = _section(page, "p-task")
    rows = re.findall(r"<tr>(<td.*?)</tr>", ptask)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in rows]
    # epoch, tasks, seed, env, mean, median, p=0, below, in band, above, p=1, in band %, estimator, env tasks'
    # mean |p - α| (epoch 1's: 0, 1/8, 1/8, 2/8, 1, 3/8 -> 2.125 / 6)
    assert cells[0] == ["1", "8", "2", "6", "0.234", "0.125", "3", "4", "0", "0", "1", "0.0%", "rollouts", "0.354"]
    assert cells[1][0] == "2" and cells[1][8] == "3" and cells[1][11] == "37.5%"
    assert cells[2][6:12] == ["1", "0", "5", "1", "1", "62.5%"]
    # evals: two epochs charted, the base model as a reference; the samples file is ignored
    ev = _section(page, "evals")
    assert "epoch-0001-agent" in ev and "epoch-0003-agent" in ev and "base" in ev
    assert "12.5" in ev and "37.5" in ev and "7.0" in ev
    assert "samples" not in ev
    # the numbers returned
    nums = res["numbers"]
    assert nums["band-share"]["band_share"] == [0.0, 0.375, 0.625]
    assert nums["env-reward"]["env_r_mean"] == [0.7, None, 0.98]
    assert [r["in_band"] for r in nums["p-task"]["epochs"]] == [0, 3, 5]
    assert nums["p-task"]["epochs"][0]["hist_counts"] == [3, 2, 1, 1, 0, 0, 0, 0, 1]
    (g,) = nums["evals"]["groups"]
    assert g["series"][0]["x"] == [1, 3] and g["series"][0]["y"] == [12.5, 37.5]
    assert g["refs"][0]["value"] == 7.0
    json.dumps(nums)  # plain data


def test_report_is_self_contained(report):
    run, res = report
    page = Path(res["html"]).read_text()
    assert not re.search(r'<(script|link|iframe)\b', page, re.I)
    assert not re.search(r'(src|href)\s*=\s*["\']?\s*(https?:)?//', page, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", page, re.I)
    assert "@import" not in page
    imgs = re.findall(r'<img [^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(imgs) == len(CHART_IDS)
    for b64 in imgs:
        assert base64.b64decode(b64).startswith(PNG_MAGIC)
    # header
    for text in (str(run.root), "tool_call", "genenv", "embedded", "α = 0.5", "β = 2", "k_min = 0.1",
                 "band [0.4, 0.6]", "1-3 (3 epochs)", "generated"):
        assert text in page, text


def test_pngs_are_valid(report):
    run, res = report
    assert [p.name for p in res["pngs"]] == [f"{c}.png" for c in CHART_IDS]
    for p in res["pngs"]:
        assert p.parent == (run.root / "report").resolve()
        data = p.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 10_000, p


@pytest.mark.slow
def test_epoch_without_task_stats_is_skipped_and_said(tmp_path):
    run = make_run(tmp_path / "run", stats={1: SUCCESSES[1], 3: SUCCESSES[3]}, evals=False)
    res = build_report(run, Config(), tmp_path / "elsewhere" / "r.html")
    page = Path(res["html"]).read_text()
    assert Path(res["html"]) == (tmp_path / "elsewhere" / "r.html").resolve()
    assert res["numbers"]["p-task"]["skipped"] == [2]
    assert "Epoch 2: no task_stats.parquet" in _section(page, "p-task")
    assert "No evaluations yet" in _section(page, "evals")
    assert "evals.png" not in [p.name for p in res["pngs"]]
    assert all(p.exists() for p in res["pngs"])


@pytest.mark.slow
def test_epoch_without_metrics_shows_gaps(tmp_path):
    run = make_run(tmp_path / "run", evals=False)
    run.epoch_dir(4).mkdir()
    cfg = Config()
    cfg.env.mode = "seeds"
    res = build_report(run, cfg, None)
    page = Path(res["html"]).read_text()
    assert "env.mode = seeds" in _section(page, "env-reward")
    assert res["epochs"] == 4
    assert _row(_section(page, "band-share"), "in band") == ["0.0%", "37.5%", "62.5%", "-"]
    assert "Epoch 4: no metrics.json yet" in page
    assert res["numbers"]["p-task"]["skipped"] == [4]


def test_zero_epochs(tmp_path):
    run = make_run(tmp_path / "run", epochs={}, stats={}, evals=False)
    res = build_report(run, Config(), None)
    page = Path(res["html"]).read_text()
    assert res["epochs"] == 0 and res["pngs"] == []
    assert "No epochs yet" in page and "none yet" in page
    assert '<section id="evals">' in page  # still says there are no evals


def test_zero_epochs_with_base_model_eval(tmp_path):
    run = make_run(tmp_path / "run", epochs={}, stats={}, evals=False)
    run.evals_dir("bfcl").mkdir(parents=True)
    (run.evals_dir("bfcl") / "base.json").write_text(json.dumps(_eval("bfcl", "base", None, 7.0)))
    res = build_report(run, Config(), None)
    assert [p.name for p in res["pngs"]] == ["evals.png"]


def test_bad_inputs_name_the_file(tmp_path):
    run = make_run(tmp_path / "run", evals=False)
    bad = run.evals_dir("bfcl") / "broken.json"
    bad.parent.mkdir(parents=True)
    bad.write_text(json.dumps({"bench": "bfcl", "model_tag": "x", "epoch": 1, "protocol": "official"}))
    with pytest.raises(InputError, match=r"broken\.json.*headline"):
        build_report(run, Config(), None)
    bad.unlink()
    (run.epoch_dir(2) / "metrics.json").write_text(json.dumps({"band_share": "high"}))
    with pytest.raises(InputError, match=r"0002/metrics\.json.*band_share"):
        build_report(run, Config(), None)


def test_no_matplotlib_at_import():
    import subprocess
    import sys

    code = "import sys, genenv_cli.views.report; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_rerun_drops_charts_that_have_no_data_now(tmp_path):
    run = make_run(tmp_path / "run")
    build_report(run, Config(), None)
    assert (run.root / "report" / "evals.png").exists()
    for p in run.evals_dir("bfcl").iterdir():
        p.unlink()
    res = build_report(run, Config(), None)
    assert not (run.root / "report" / "evals.png").exists()
    assert "evals.png" not in [p.name for p in res["pngs"]]


@pytest.mark.slow
def test_a_newer_eval_of_the_same_epoch_supersedes_the_older(tmp_path):
    run = make_run(tmp_path / "run")
    newer = _eval("bfcl", "epoch-0003-agent-again", 3, 40.0)
    newer["created"] = "2026-11-22T09:00:00"
    (run.evals_dir("bfcl") / "epoch-0003-agent-again.json").write_text(json.dumps(newer))
    res = build_report(run, Config(), None)
    (g,) = res["numbers"]["evals"]["groups"]
    assert g["series"][0]["x"] == [1, 3] and g["series"][0]["y"] == [12.5, 40.0]
    ev = _section(Path(res["html"]).read_text(), "evals")
    old = re.search(r'<tr class="old">(.*?)</tr>', ev).group(1)
    assert "epoch-0003-agent<" in old and "37.5" in old
    assert "superseded" in ev
