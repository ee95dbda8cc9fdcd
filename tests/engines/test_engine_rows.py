"""An engine is one file plus one row of `ENGINES` (catalogue/engines.py): a throwaway engine, written to a temporary
folder and registered in this process, is a value `run.engine` accepts and serves a stage; what the config checks
for vLLM and for LoRA runs follows the rows' facts, not the engines' names."""

from __future__ import annotations

import importlib
import json
import sys
import textwrap

import pytest

from genenv_cli.catalogue.config import apply_overrides, config_from_dict
from genenv_cli.catalogue.engines import ENGINE_CHOICES, ENGINES
from genenv_cli.core.errors import ConfigError, RegistryError
from genenv_cli.rundir import RunDir

ENGINE_MODULE = '''
import json
import os

from genenv_cli.machinery.engines.hf import open_hf


def open_counting(ref, **kwargs):
    """The hf engine, recording in $COUNTING_LOG each call it serves."""
    engine = open_hf(ref, **kwargs)
    generate = engine.generate

    def counted(convs, params, **kw):
        with open(os.environ["COUNTING_LOG"], "a") as f:
            f.write(json.dumps({"prompts": len(convs), "n": params.n}) + "\\n")
        return generate(convs, params, **kw)

    engine.generate = counted
    return engine
'''


@pytest.fixture
def counting(tmp_path, monkeypatch):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "throwaway_engine.py").write_text(textwrap.dedent(ENGINE_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("COUNTING_LOG", str(log))
    ENGINES.register("counting", "throwaway_engine:open_counting", extra=None, vllm=False, lora=True)
    yield log
    ENGINES.unregister("counting")
    sys.modules.pop("throwaway_engine", None)


def _config(*overrides: str):
    return config_from_dict(apply_overrides({"run": {"domain": "arith"}}, list(overrides)), "test")


def test_a_registered_engine_serves_a_stage(counting, make_run):
    generate_tasks = importlib.import_module("genenv_cli.stages.generate_tasks")

    root = make_run("run.engine=counting", domain="arith")
    run = RunDir(root)
    cfg = run.load_config()
    assert cfg.run.engine == "counting"
    result = generate_tasks.run(run, cfg, 1)
    calls = [json.loads(line) for line in counting.read_text().splitlines()]
    assert calls and all(c["prompts"] > 0 for c in calls)
    assert result.manifest["counts"]["tasks"] == cfg.generate.tasks_per_epoch


def test_the_choices_are_the_rows():
    assert list(ENGINE_CHOICES)[:1] == ["auto"] and {"hf", "vllm"} <= set(ENGINE_CHOICES)
    with pytest.raises(ConfigError, match="`run.engine` = .*counting.* is not allowed"):
        _config("run.engine=counting")


def test_the_vllm_and_lora_checks_follow_the_rows(counting):
    # a vLLM-served engine: vLLM's adapter rank limit holds for it, whatever its name
    wide = ("agent_update.lora_r=64", "vllm.max_lora_rank=32")
    assert _config("run.engine=counting", *wide).run.engine == "counting"  # not served by vLLM: no limit
    ENGINES.register("counting", "throwaway_engine:open_counting", vllm=True)
    with pytest.raises(ConfigError, match="vllm.max_lora_rank"):
        _config("run.engine=counting", *wide)
    # an engine that serves no LoRA adapter: a LoRA run is refused, a full fine-tune is not
    ENGINES.register("counting", "throwaway_engine:open_counting", lora=False)
    with pytest.raises(ConfigError, match="serves no LoRA adapter"):
        _config("run.engine=counting")
    assert _config("run.engine=counting", "agent_update.lora=false", "env_update.lora=false")


def test_a_row_with_wrong_facts_or_named_auto_is_refused():
    with pytest.raises(RegistryError, match="vllm 'yes' is refused"):
        ENGINES.register("odd", "throwaway_engine:open_counting", vllm="yes")
    with pytest.raises(RegistryError, match="engine `auto` is refused"):
        ENGINES.register("auto", "throwaway_engine:open_counting")
    assert "odd" not in ENGINES.rows and "auto" not in ENGINES.rows
