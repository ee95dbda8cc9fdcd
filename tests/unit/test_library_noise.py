"""Libraries' warnings (transformers' deprecation notices, Python warnings) go to the stage's log, not to the
user's terminal; GENENV_VERBOSE=1 shows them too."""

import io
import logging
import warnings

import pytest
from typer.testing import CliRunner

from genenv_cli.cli import app
from genenv_cli.core.errors import InputError
from genenv_cli.core.library_noise import library_output_to_log, route_transformers_logging
from genenv_cli.core.ui import UI


@pytest.fixture(autouse=True)
def _transformers_as_it_was():
    yield
    from transformers.utils import logging as hf_logging

    hf_logging.enable_default_handler()
    hf_logging.disable_propagation()


def _noisy():
    route_transformers_logging()
    warnings.warn("`foo` is deprecated and will be removed in v6", FutureWarning, stacklevel=1)
    logging.getLogger("transformers.modeling_utils").warning("`torch_dtype` is deprecated! Use `dtype` instead!")


def test_library_warnings_go_to_the_log(tmp_path):
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO(), log_path=tmp_path / "stage.log")
    with warnings.catch_warnings(), library_output_to_log(ui):
        warnings.simplefilter("always")
        _noisy()
    assert err.getvalue() == ""
    log = (tmp_path / "stage.log").read_text()
    assert "library: py.warnings warning: FutureWarning: `foo` is deprecated" in log
    assert "library: transformers.modeling_utils warning: `torch_dtype` is deprecated!" in log


def test_verbose_shows_them(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_VERBOSE", "1")
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO(), log_path=tmp_path / "stage.log")
    with warnings.catch_warnings(), library_output_to_log(ui):
        warnings.simplefilter("always")
        _noisy()
    assert "`torch_dtype` is deprecated" in err.getvalue()


def test_a_stage_command_keeps_them_out_of_its_output(make_run, monkeypatch):
    import genenv_cli.stages.score as score

    def run(*a, **k):
        _noisy()
        raise InputError("the stage stopped here")

    monkeypatch.setattr(score, "run", run)
    root = make_run()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        r = CliRunner().invoke(app, ["score", "--epoch", "1", "--run", str(root)])
    assert r.exit_code == 2 and "the stage stopped here" in r.stderr
    assert "deprecated" not in r.stderr and "deprecated" not in r.stdout
    log = (root / "logs" / "score.log").read_text()
    assert "`foo` is deprecated" in log and "`torch_dtype` is deprecated" in log


def test_the_verbose_flag_shows_them_and_internal_lines(make_run, monkeypatch):
    import genenv_cli.stages.score as score

    monkeypatch.setenv("GENENV_VERBOSE", "0")  # and put back after the test: --verbose sets it for child processes

    def run(*a, ui, **k):
        _noisy()
        ui.detail("rank 0 trainable-parameter digest abc")
        raise InputError("the stage stopped here")

    monkeypatch.setattr(score, "run", run)
    root = make_run()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        quiet = CliRunner().invoke(app, ["score", "--epoch", "1", "--run", str(root)])
        loud = CliRunner().invoke(app, ["--verbose", "score", "--epoch", "1", "--run", str(root)])
    assert "digest abc" not in quiet.stderr and "deprecated" not in quiet.stderr
    assert loud.exit_code == 2 and "`torch_dtype` is deprecated" in loud.stderr and "digest abc" in loud.stderr
    assert (root / "logs" / "score.log").read_text().count("digest abc") == 2  # the log has it either way


@pytest.mark.parametrize(("value", "shown"), [("1", True), ("yes", True), ("0", False), ("", False), ("false", False)])
def test_genenv_verbose_reads_as_a_switch(monkeypatch, value, shown):
    from genenv_cli.core.library_noise import verbose

    monkeypatch.setenv("GENENV_VERBOSE", value)
    assert verbose() is shown
