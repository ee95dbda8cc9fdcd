"""Settings and arguments past any sensible value: every number has both bounds, non-finite and huge values are
refused naming the key, over-long values are quoted shortened, epochs and shard counts out of range are refused
before anything is created; and how a refusal or a bug is told (one paragraph; the traceback with --debug, or in
the log)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from genenv_cli.catalogue.config import (
    INT_MAX,
    SECTIONS,
    UPPER,
    _section_types,
    config_from_dict,
    render_config,
)
from genenv_cli.cli import app
from genenv_cli.core.errors import ConfigError, elide, quoted
from hostile import E1, cli, in_subprocess, runner

# ---------------------------------------------------------------- every number has both bounds

def _numeric_fields():
    for section, cls in SECTIONS.items():
        types = _section_types(section)
        for fld in dataclasses.fields(cls):
            if types[fld.name] in (int, float):
                yield section, fld


@pytest.mark.parametrize("section,fld", list(_numeric_fields()), ids=lambda x: getattr(x, "name", x))
def test_every_numeric_setting_has_an_explicit_lower_and_upper_bound(section, fld):
    meta, full = fld.metadata, f"{section}.{fld.name}"
    if "choices" in meta:  # a closed list bounds it both ways
        assert all(isinstance(c, int | float) for c in meta["choices"])
        return
    assert "min" in meta, f"{full} has no lower bound (min=)"
    upper = meta.get("max", UPPER.get(full))
    assert upper is not None, f"{full} has no upper bound (max= or config.UPPER): only the generic fallback"
    assert meta["min"] <= fld.default <= upper and upper < INT_MAX
    assert fld.metadata["help"], f"{full} has no help text"
    with pytest.raises(ConfigError, match=rf"`{full}` = .* (above its maximum|out of range)"):
        config_from_dict({section: {fld.name: type(fld.default)(upper) * 2 + 1}}, "genenv.toml")


@pytest.mark.parametrize("key", ["agent_update.learning_rate", "env_update.learning_rate"])
def test_a_learning_rate_of_a_million_is_refused(key):
    section, name = key.split(".")
    with pytest.raises(ConfigError, match=rf"`{key}` = 1000000.0 is above its maximum 1.0"):
        config_from_dict({section: {name: 1e6}}, "genenv.toml")


# ---------------------------------------------------------------- config values

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


def test_invalid_utf8_in_the_config_is_named(run):
    (run / "genenv.toml").write_bytes(b"[run]\nseed = 1 # \xff\n")
    r = cli("status", "--run", run)
    assert "genenv.toml: not UTF-8" in r.stderr


# ---------------------------------------------------------------- over-long values are quoted shortened

def test_quoted_elides_the_middle_and_says_how_much():
    text = quoted("a" * 10_000_000 + "END")
    assert len(text) < 200 and text.startswith("'aaa") and text.endswith("aEND'")
    assert "characters left out" in text
    assert quoted("short") == "'short'" and elide("x" * 10, 10) == "x" * 10


@pytest.mark.slow
def test_a_ten_megabyte_value_makes_a_short_config_error():
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"group_size": "8" * 10_000_000}}, "genenv.toml")
    assert len(str(err.value)) < 400 and "rollout.group_size" in str(err.value)
    with pytest.raises(ConfigError) as err:
        config_from_dict({"rollout": {"k" * 10_000_000: 1}}, "genenv.toml")
    assert len(str(err.value)) < 600


@pytest.mark.parametrize("prefix", ["/", "", "org/"])
@pytest.mark.slow
def test_a_ten_megabyte_agent_model_makes_a_short_error_line(tmp_path, prefix):
    from genenv_cli.catalogue.config import Config

    cfg = Config()
    cfg.agent.model = prefix + "m" * 10_000_000
    (tmp_path / "genenv.toml").write_text(render_config(cfg))
    r = cli("evaluate", "--bench", "bfcl", "--limit", 1, "--run", tmp_path)
    assert r.stderr.startswith("error: ") and len(r.stderr) < 2_500, len(r.stderr)


# ---------------------------------------------------------------- epochs and shard counts out of range

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


def test_a_huge_shard_count_is_refused_and_one_found_on_disk_is_ignored(run):
    r = cli("rollout", "--epoch", 1, "--shard", "1/99999999999999999999", "--run", run)
    assert "1 <= I <= N <= 4,096" in r.stderr
    m = run / E1 / "manifests"
    (m / "rollout.json").rename(m / "rollout.shard-1-of-99999999999999999999.json")
    r = in_subprocess("status", "--json", "--run", str(run))
    assert r.returncode == 0, r.stderr
    r = in_subprocess("score", "--epoch", "1", "--run", str(run), "--force")
    assert r.returncode == 2 and "Traceback" not in r.stderr


# ---------------------------------------------------------------- --debug, and a bug

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
