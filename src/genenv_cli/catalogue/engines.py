"""`ENGINES`: the text-generation engines, one row each, and what the settings and the config read from the rows.

A row names the function that opens its engine, `open(ref, *, device, dtype, trust_remote_code, batch_size, seed,
vllm_settings) -> Engine` ("module:function", imported only when the engine is used: the engines live in
`machinery/engines/`), and says without importing it:

- `extra`: the pip extra it needs (pyproject's optional-dependencies; None: the core);
- `vllm`: whether vLLM serves it, so the `[vllm]` section configures it and vLLM's limits hold (an adapter's rank
  at most `vllm.max_lora_rank`; config.py refuses the run's settings vLLM would refuse);
- `lora`: whether it serves a LoRA checkpoint as an adapter over its base (a run whose updates train LoRA needs
  one that does).

`run.engine` is `auto` or a row's name (`ENGINE_CHOICES`); `auto` is decided by `machinery/engines`'
`choose_engine` (vLLM's CUDA build where a GPU is, else `hf`). `ENGINES.register` adds an engine for this process
(a test's throwaway engine, a script's own); the entry-point group `genenv.engines` adds a plugin's: an entry point
that names a `Row` gives its facts, one that names the opening function has the defaults (not vLLM, serving LoRA
adapters as the `hf` engine does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from genenv_cli.core.errors import RegistryError
from genenv_cli.core.registry import Registry, Row

AUTO = "auto"
DEFAULT_FACTS = {"extra": None, "vllm": False, "lora": True}  # the facts a row does not give


def check_row(name: str, facts: dict[str, Any]) -> None:
    """An engine's row: `vllm` and `lora` are true or false, `extra` a name or None; `auto` is no engine's name."""
    if name == AUTO:
        raise RegistryError(f"engine `{AUTO}` is refused: run.engine = \"{AUTO}\" chooses among the engines.")
    for key in ("vllm", "lora"):
        if not isinstance(facts.get(key, DEFAULT_FACTS[key]), bool):
            raise RegistryError(f"engine `{name}`: {key} {facts.get(key)!r} is refused; expected true or false.")
    if not isinstance(facts.get("extra"), str | None):
        raise RegistryError(f"engine `{name}`: extra {facts.get('extra')!r} is refused; expected a pip extra's name "
                            f"or None.")


ENGINES = Registry("engine", "genenv.engines", {
    "hf": Row("genenv_cli.machinery.engines.hf:open_hf", {"extra": None, "vllm": False, "lora": True}),
    "vllm": Row("genenv_cli.machinery.engines.vllm:open_vllm", {"extra": "vllm", "vllm": True, "lora": True}),
}, check=check_row, plugin_facts=True)


def engine_facts(name: str) -> dict[str, Any]:
    """The row's facts of engine `name`, with the defaults for those it does not give."""
    return {**DEFAULT_FACTS, **ENGINES.facts(name)}


def may_use_vllm(engine: str) -> bool:
    """Whether `run.engine = engine` may be served by vLLM: an engine whose row says so, or `auto` (vLLM where a GPU
    and its CUDA build are), so vLLM's limits are checked for it."""
    return engine == AUTO or engine_facts(engine)["vllm"]


class EngineChoices:
    """`run.engine`'s allowed values, read from the rows when asked: `auto` and every engine's name. Membership looks
    at the rows first and reads the entry points only for a name they lack (reading them costs milliseconds)."""

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, str):
            return False
        return value == AUTO or value in ENGINES.rows or value in ENGINES.names()

    def __iter__(self) -> Iterator[str]:
        return iter([AUTO, *ENGINES.names()])

    def __repr__(self) -> str:
        return f"EngineChoices({list(self)!r})"


ENGINE_CHOICES = EngineChoices()
