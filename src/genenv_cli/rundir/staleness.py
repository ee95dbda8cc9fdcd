"""Why a stage is stale, key by key: what its manifest recorded against what it would record now.

A manifest records the stage's `values` (the models, the domain's data, code and prompts as hashes) and the
config sections it depends on (`config`, each section's keys as they were). `changes` names each difference as
a `Change`: `rollout.max_new_tokens 16 → 24`, `domain code`, `input tasks`. `genenv status` shows the first in
its table and all of them in its notes and `--json`; a one-off `--set` that differs from genenv.toml is found
the same way (`override_changes`), so the command can say what it will make stale.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from genenv_cli.catalogue.config import Config

# values added to the manifests after runs existed: a manifest without one recorded nothing to compare, so its
# absence is no change (runs made before stay done, as `late` config keys do: `Config.digest`)
LATE_VALUES = frozenset({"domain_code", "env_prompt", "agent_prompt"})

VALUE_WORDS = {"domain_data": "domain data", "domain_code": "domain code", "env_prompt": "environment prompt",
               "agent_prompt": "agent prompt", "env_model": "environment model", "agent_model": "agent model",
               "env_mode": "env.mode", "agent_mode": "agent.mode"}


def _shown(value: Any, width: int = 24) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[:width - 1] + "…"


@dataclass(frozen=True)
class Change:
    kind: str    # config | value | input | sections
    key: str     # `rollout.max_new_tokens`, `domain_code`, `tasks`
    was: Any = None
    now: Any = None

    def short(self) -> str:
        """The change in a few words, for status's table."""
        if self.kind == "config":
            return f"{self.key} {_shown(self.was)} → {_shown(self.now)}"
        if self.kind == "value":
            return VALUE_WORDS.get(self.key, self.key)
        if self.kind == "sections":  # a manifest without its config record: only the sections are known
            return f"config in {self.key}"
        return f"input {self.key}"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "key": self.key, "was": self.was, "now": self.now}


def value_changes(recorded: Any, current: dict[str, Any]) -> list[Change]:
    """The keys of a stage's `values` that differ, in name order (`current` already JSON-shaped)."""
    recorded = recorded if isinstance(recorded, dict) else {}
    out = []
    for key in sorted(set(recorded) | set(current)):
        if key in LATE_VALUES and key not in recorded:
            continue
        if recorded.get(key) != current.get(key):
            out.append(Change("value", key, recorded.get(key), current.get(key)))
    return out


def config_entry(cfg: Config, name: str) -> Any:
    """What a manifest records under `config` for a name of a stage's config sections (a section's keys, or one
    key where the name is `section.key`)."""
    if "." in name:
        section, key = name.split(".", 1)
        return getattr(getattr(cfg, section), key)
    return cfg.section(name)


def _flat(config: dict[str, Any], sections: list[str]) -> dict[str, Any]:
    out = {}
    for name in sections:
        if name not in config:
            continue
        value = config[name]
        if "." not in name and isinstance(value, dict):
            out.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            out[name] = value
    return out


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def config_changes(recorded: Any, cfg: Config, sections: list[str]) -> list[Change]:
    """The config keys whose value differs from the one a manifest recorded (`recorded`: its `config`). A key the
    manifest does not hold (added to genenv after it was written) counts only when it no longer holds its
    default, as in the config's digest."""
    if not isinstance(recorded, dict):
        return []
    was = _flat(_jsonable(recorded), sections)
    now = _flat(_jsonable({name: config_entry(cfg, name) for name in sections}), sections)
    default = _flat(_jsonable({name: config_entry(Config(), name) for name in sections}), sections)
    out = []
    for key in sorted(set(was) | set(now)):
        if key not in was and now.get(key) == default.get(key):
            continue
        if was.get(key) != now.get(key):
            out.append(Change("config", key, was.get(key), now.get(key)))
    return out


def override_changes(saved: Config, used: Config, overrides: list[str]) -> list[Change]:
    """The keys a command's `--set SECTION.KEY=VALUE` gives another value than genenv.toml does (`saved`: the
    config without them, `used`: with them), in the order given."""
    from genenv_cli.catalogue.config import parse_override

    out, seen = [], set()
    for text in overrides:
        section, key, _ = parse_override(text)
        name = f"{section}.{key}"
        if name in seen:
            continue
        seen.add(name)
        was, now = _jsonable(config_entry(saved, name)), _jsonable(config_entry(used, name))
        if was != now:
            out.append(Change("config", name, was, now))
    return out
