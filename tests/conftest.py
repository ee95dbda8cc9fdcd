"""Shared fixtures: a private cache directory for every test, a domain module's domain, a tiny chat model, and run
directories."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# One torch (OpenMP) thread for every test and every process a test starts (they inherit the environment), set
# before anything imports torch. The models here are tiny, and two threads gain nothing on them; but when another
# process holds a core, each operation waits for the descheduled second thread: on this 2-core machine under load a
# tiny model's rollout took 35 s with two threads and 1.2 s with one. A value the caller set is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The shared modules here (paths, tiny, stagekit, replay, hostile, domain_cases, ...) are imported by name from tests
# in every folder below: put this folder on sys.path, as the prepend import mode only adds a test file's own folder
TESTS = str(Path(__file__).resolve().parent)
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)

from tiny import SMALL, TWO_EPOCHS, build_tiny_model  # noqa: E402 - after the path above

# fixtures shared across folders live in helper modules, registered here: `epoch1` (score's hand-made epoch),
# `alfworld_valid` and `alfworld_train_sample` (ALFWorld's real games, unpacked from ../shared/data)
pytest_plugins = ["score_epoch", "alfworld_real"]

# A test that uses the tiny model (directly, or through make_run) or a whole finished run on it is slow, whatever
# its own body costs: the fast tier (`-m "not slow"`) then never imports transformers' models, builds the model
# or runs a stage on it, which was most of its time.
SLOW_FIXTURES = {"tiny_model", "arith_model", "hostile_finished_run", "two_full_epochs"}  # hostile_finished_run: robustness/conftest.py


def pytest_collection_modifyitems(config, items):
    for item in items:
        if SLOW_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Point GENENV_CACHE at a temp dir so no test reads or writes the user's cache (simonw/llm does this)."""
    if "GENENV_TEST_KEEP_CACHE" not in os.environ:
        monkeypatch.setenv("GENENV_CACHE", str(tmp_path_factory.getbasetemp() / "genenv-cache"))
    monkeypatch.delenv("GENENV_RUN", raising=False)
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0")
    monkeypatch.setenv("GENENV_OFFLINE", "1")  # tests never reach for the network


@pytest.fixture(scope="module")
def dom(request):
    """The domain a test module is about: the one its module-level DOMAIN names (domains/test_<domain>_domain.py)."""
    from genenv_cli.catalogue.domains import get_domain

    return get_domain(request.module.DOMAIN)


@pytest.fixture(autouse=True)
def _auto_engine_is_transformers(request, monkeypatch):
    """run.engine = "auto" stays on transformers in tests, vLLM installed or not (`nox -s vllm` runs the fast tests
    beside it): an engine start per tiny-model stage would take minutes. Tests marked `vllm` choose for themselves."""
    if request.node.get_closest_marker("vllm") is None:
        monkeypatch.setenv("GENENV_AUTO_ENGINE", "hf")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def arith_model(tmp_path_factory) -> Path:
    """The tiny model taught the answer format, so GRPO groups get mixed rewards. Here, not in a test module, so
    that every module using it shares one (a session fixture imported into two modules is built twice)."""
    from tiny import teach_arith_format

    return teach_arith_format(build_tiny_model(tmp_path_factory.mktemp("tiny-arith")))


@pytest.fixture
def make_run(tmp_path, tiny_model):
    """make_run(*overrides) -> a run directory using the tiny model for agent and environment."""
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict, render_config

    def make(*overrides: str, name: str = "run", domain: str = "tool_call") -> Path:
        root = tmp_path / name
        root.mkdir()
        data = apply_overrides({"run": {"domain": domain}, "agent": {"model": str(tiny_model)},
                                "env": {"model": str(tiny_model)}}, SMALL + list(overrides))
        (root / "genenv.toml").write_text(render_config(config_from_dict(data, "test")))
        return root

    return make


@pytest.fixture(scope="session")
def two_full_epochs(tmp_path_factory, arith_model) -> Path:
    """Two whole epochs of full fine-tuning (full checkpoints, which run.keep_checkpoints deletes; LoRA adapters it
    never does) on the arith-taught tiny model, run in this process, with every checkpoint kept
    (run.keep_checkpoints = 0): tests copy it and set their own keep_checkpoints. About 3 s."""
    from typer.testing import CliRunner

    from genenv_cli.actions.runner import run_epochs
    from genenv_cli.cli import app
    from genenv_cli.core.ui import UI
    from genenv_cli.rundir import RunDir

    root = tmp_path_factory.mktemp("two-epochs") / "run"
    r = CliRunner().invoke(app, ["init", str(root), "--domain", "arith", "--agent-model", str(arith_model),
                                 "--env-model", str(arith_model), *[a for s in TWO_EPOCHS for a in ("--set", s)]])
    assert r.exit_code == 0, r.output
    run = RunDir(root.resolve())
    run_epochs(run, run.load_config(), 2, ui=UI(quiet=True))
    return run.root

