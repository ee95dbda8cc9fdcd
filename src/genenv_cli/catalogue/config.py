"""The run configuration: `RUN/genenv.toml`, its defaults, validation and one-off overrides.

Every setting is a dataclass field whose metadata carries its help text and, where it has them, its
allowed values or range (the TRL convention). `genenv init` writes every field, commented, so the
defaults are visible in the file; `load_config` validates what the user wrote and names the key and
the allowed values when something is off.

Overrides for one invocation use `--set SECTION.KEY=VALUE` (repeatable). VALUE is read as a TOML
value when it parses as one (`--set rollout.group_size=4`, `--set agent_update.lora=false`,
`--set agent_update.lora_targets='["q_proj","v_proj"]'`) and as a plain string otherwise
(`--set agent.model=Qwen/Qwen2.5-0.5B-Instruct`).
"""

import dataclasses
import difflib
import functools
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from genenv_cli.catalogue import trackers
from genenv_cli.catalogue.domains import DOMAINS, domain_default
from genenv_cli.catalogue.engines import AUTO, engine_facts, may_use_vllm
from genenv_cli.catalogue.settings import (
    MIXED,
    AgentConfig,
    AgentUpdateConfig,
    CurriculumConfig,
    EnvConfig,
    EnvUpdateConfig,
    EvaluateConfig,
    GenerateConfig,
    RolloutConfig,
    RunConfig,
    ScoreConfig,
    VLLMConfig,
)
from genenv_cli.core.errors import ConfigError, quoted

CONFIG_NAME = "genenv.toml"
SHARE_TOLERANCE = 1e-6  # how far the shares of run.domains may sum from 1
VLLM_MIN_TEMPERATURE = 0.01  # vLLM's SamplingParams raise any temperature in (0, 0.01) to this


def _late_default(section: str, key: str, value: Any) -> bool:
    """Whether `section.key` is a late key (see `Config.digest`) holding its default."""
    fld = _section_fields(section).get(key)
    if fld is None or not fld.metadata.get("late", False):
        return False
    default = fld.default_factory() if fld.default is dataclasses.MISSING else fld.default  # lists, tables
    return value == default


@dataclass
class Config:
    run: RunConfig = field(default_factory=RunConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    agent_update: AgentUpdateConfig = field(default_factory=AgentUpdateConfig)
    env_update: EnvUpdateConfig = field(default_factory=EnvUpdateConfig)
    evaluate: EvaluateConfig = field(default_factory=EvaluateConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    score: ScoreConfig = field(default_factory=ScoreConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return dataclasses.asdict(self)

    def section(self, name: str) -> dict[str, Any]:
        return dataclasses.asdict(getattr(self, name))

    def digest(self, sections: list[str]) -> str:
        """A short hash of the named sections (`run.domain` names one key), for stale detection. A named key
        holding an empty table (run.domains of a single-domain run) is left out, and so is a key added to a
        section, or to a stage's sections, after runs existed (`late=True` in its field) while it holds its
        default, so the digests of runs made before stay as they were: upgrading genenv does not make finished
        stages stale."""
        picked = {}
        for name in sections:
            if "." in name:
                sec, key = name.split(".", 1)
                value = getattr(getattr(self, sec), key)
                if value != {} and not _late_default(sec, key, value):
                    picked[name] = value
            else:
                picked[name] = {k: v for k, v in self.section(name).items() if not _late_default(name, k, v)}
        blob = json.dumps(picked, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


SECTIONS: dict[str, type] = {f.name: f.default_factory for f in dataclasses.fields(Config)}  # type: ignore[misc]


@functools.cache
def _section_fields(section: str) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(SECTIONS[section])}


@functools.cache
def _section_types(section: str) -> dict[str, Any]:
    return get_type_hints(SECTIONS[section])


def _suggest(name: str, options: list[str]) -> str:
    close = difflib.get_close_matches(name, options, n=1)
    return f" Did you mean `{close[0]}`?" if close else ""


# Upper bounds, so that a typo (`tasks_per_epoch = 1000000000`, `group_size = 1e23`) is refused with the key's
# name instead of ending in MemoryError or the kernel's OOM killer. Generous: far past any real run.
UPPER: dict[str, int | float] = {
    "run.seed": 2**32 - 1,
    "generate.tasks_per_epoch": 1_000_000, "generate.variations": 1024, "generate.max_new_tokens": 131_072,
    "generate.batch_size": 65_536, "generate.max_rounds": 1000, "generate.frontier_examples": 64,
    "generate.static_variations": 1024,
    "rollout.group_size": 1024, "rollout.max_new_tokens": 131_072, "rollout.batch_size": 65_536,
    "curriculum.beta": 1e6,
    "evaluate.max_new_tokens": 131_072, "evaluate.batch_size": 65_536, "evaluate.max_steps": 100_000,
    **{f"{sec}.{key}": cap for sec in ("agent_update", "env_update") for key, cap in (
        ("passes", 10_000), ("batch_size", 65_536), ("grad_accum", 65_536), ("lora_r", 65_536),
        ("lora_alpha", 1_000_000), ("replay_epochs", 99_999), ("window", 99_999))},
    "vllm.max_model_len": 16_777_216, "vllm.tensor_parallel_size": 1024,
}
INT_MAX = 2**63 - 1  # any other integer setting: what torch and numpy can hold
FLOAT_MAX = 1e12     # any other number: finite and below this (no setting is meaningful past it)


def _check_value(section: str, key: str, value: Any, where: str) -> Any:
    fld = _section_fields(section)[key]
    typ = _section_types(section)[key]
    meta = fld.metadata
    full = f"{section}.{key}"
    if typ is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: `{full}` must be true or false, got {quoted(value)}.")
    elif typ is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: `{full}` must be an integer, got {quoted(value)}.")
    elif typ is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: `{full}` must be a number, got {quoted(value)}.")
        value = float(value)
    elif typ is str and not isinstance(value, str):
        raise ConfigError(f"{where}: `{full}` must be a string, got {quoted(value)}.")
    elif typ == list[str] and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{where}: `{full}` must be a list of strings, got {quoted(value)}.")
    elif typ in (dict[str, float], dict[str, str]):
        number = typ == dict[str, float]
        if not isinstance(value, dict) or not all(
                isinstance(v, int | float) and not isinstance(v, bool) if number else isinstance(v, str)
                for v in value.values()):
            what = "share (a number)" if number else "seed file"
            raise ConfigError(f"{where}: `{full}` must be a table of domain name -> {what}, e.g. "
                              f"{{arith = {'0.5' if number else json.dumps('seeds/arith/seeds.jsonl')}}}; "
                              f"got {quoted(value)}.")
        value = {k: float(v) for k, v in value.items()} if number else dict(value)
    if "choices" in meta and value not in meta["choices"]:
        allowed = ", ".join(repr(c) for c in meta["choices"])
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is not allowed; choose one of {allowed}.")
    if typ in (int, float):
        if typ is float and not math.isfinite(value):  # NaN compares false with every bound: refuse it here
            raise ConfigError(f"{where}: `{full}` = {quoted(value)} is not a finite number; give a number such as "
                              f"{fld.default!r} (the default).")
        cap = UPPER.get(full, INT_MAX if typ is int else FLOAT_MAX)
        if value > cap or value < -cap:
            shown = f"{cap:,}" if isinstance(cap, int) else f"{cap:g}"
            raise ConfigError(f"{where}: `{full}` = {quoted(value)} is out of range; the largest allowed is {shown}.")
    if "min" in meta and value < meta["min"]:
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is below its minimum {meta['min']}.")
    if "max" in meta and value > meta["max"]:
        raise ConfigError(f"{where}: `{full}` = {quoted(value)} is above its maximum {meta['max']}.")
    return value


def config_from_dict(data: dict[str, Any], where: str) -> Config:
    """Build and validate a Config; unknown sections and keys are errors with a suggestion."""
    cfg = Config()
    for section, values in data.items():
        if section not in SECTIONS:
            raise ConfigError(f"{where}: unknown section [{quoted(section)[1:-1]}].{_suggest(section, list(SECTIONS))} "
                              f"Sections: {', '.join(SECTIONS)}.")
        if not isinstance(values, dict):
            raise ConfigError(f"{where}: [{section}] must be a table of settings.")
        fields_ = _section_fields(section)
        for key, value in values.items():
            if key not in fields_:
                raise ConfigError(f"{where}: unknown key `{section}.{quoted(key)[1:-1]}`.{_suggest(key, list(fields_))} "
                                  f"Keys of [{section}]: {', '.join(fields_)}.")
            setattr(getattr(cfg, section), key, _check_value(section, key, value, where))
    _apply_domain_defaults(cfg, data)
    _check_cross(cfg, where)
    _check_trackers(cfg, where)
    _check_evals(cfg, where)
    _check_domains(cfg, where)
    _check_sampling(cfg, where)
    return cfg


def _apply_domain_defaults(cfg: Config, data: dict[str, Any]) -> None:
    """Output lengths the run's domain(s) need (their registry rows' `lengths`), for the keys the config does not
    set."""
    names = list(cfg.run.domains) if cfg.run.mixed else [cfg.run.domain]
    for full in sorted({k for d in names for k in DOMAINS.facts(d).get("lengths", {})}):
        section, key = full.split(".", 1)
        given = data.get(section)
        if not (isinstance(given, dict) and key in given):
            setattr(getattr(cfg, section), key, domain_default(full, names))


def _check_domains(cfg: Config, where: str) -> None:
    """A run is single-domain (run.domain names it, run.domains empty) or mixed (run.domain = "mixed" and
    run.domains holds two known domains or more, each share above 0, the shares summing to 1)."""
    r = cfg.run
    if not r.mixed:
        if r.domains:
            raise ConfigError(f"{where}: `run.domains` lists {quoted(', '.join(r.domains))} but `run.domain` = {quoted(r.domain)}; "
                              f"a run on several domains sets run.domain = \"{MIXED}\" (or clear run.domains for a "
                              f"single-domain run).")
        if r.domain_seeds:
            raise ConfigError(f"{where}: `run.domain_seeds` is for mixed runs; a single-domain run's seeds are "
                              f"`run.seeds`.")
        return
    if len(r.domains) < 2:
        raise ConfigError(f"{where}: run.domain = \"{MIXED}\" needs two domains or more in `run.domains` with their "
                          f"shares, e.g. domains = {{arith = 0.5, tool_call = 0.5}}; got {r.domains or '{}'}. For one "
                          f"domain set run.domain = NAME.")
    for name, share in r.domains.items():
        if name not in DOMAINS.rows and name not in DOMAINS.names():
            raise ConfigError(f"{where}: `run.domains` names an unknown domain {quoted(name)}."
                              f"{_suggest(name, DOMAINS.names())} Known: {', '.join(DOMAINS.names())}.")
        if not math.isfinite(share) or share <= 0:
            raise ConfigError(f"{where}: `run.domains.{name}` = {quoted(share)}: a share must be a number above 0.")
    total = sum(r.domains.values())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ConfigError(f"{where}: the shares of `run.domains` sum to {total:g}; they must sum to 1 "
                          f"({', '.join(f'{k} = {v:g}' for k, v in r.domains.items())}).")
    if r.seeds:
        raise ConfigError(f"{where}: `run.seeds` is for single-domain runs; a mixed run names each domain's seeds in "
                          f"`run.domain_seeds` (genenv init --seeds NAME=FILE).")
    for name, rel in r.domain_seeds.items():
        if name not in r.domains:
            raise ConfigError(f"{where}: `run.domain_seeds` names {quoted(name)}, which is not one of the run's domains "
                              f"({', '.join(r.domains)}).")
        if not rel:
            raise ConfigError(f"{where}: `run.domain_seeds.{name}` is empty; name the seed file or leave the domain "
                              f"out to use its built-in seeds.")


def _check_trackers(cfg: Config, where: str) -> None:
    for name in cfg.run.report_to:
        if not trackers.known(name):
            names = trackers.TRACKERS.names()
            raise ConfigError(f"{where}: `run.report_to` names {quoted(name)}.{_suggest(name, names)} "
                              f"Trackers: {', '.join(names)}.")
    if len(set(cfg.run.report_to)) < len(cfg.run.report_to):
        raise ConfigError(f"{where}: `run.report_to` names a tracker twice ({', '.join(cfg.run.report_to)}).")
    if not cfg.run.tracker_project.strip():
        raise ConfigError(f"{where}: `run.tracker_project` is empty; name the W&B / trackio project (default genenv).")


def _check_evals(cfg: Config, where: str) -> None:
    from genenv_cli.catalogue.suites import BENCHMARKS

    for name in cfg.run.eval_benches:
        if name not in BENCHMARKS.rows and name not in BENCHMARKS.names():
            names = BENCHMARKS.names()
            raise ConfigError(f"{where}: `run.eval_benches` names {quoted(name)}.{_suggest(name, names)} "
                              f"Benchmarks: {', '.join(names)}.")
    if len(set(cfg.run.eval_benches)) < len(cfg.run.eval_benches):
        raise ConfigError(f"{where}: `run.eval_benches` names a benchmark twice ({', '.join(cfg.run.eval_benches)}).")


def _check_cross(cfg: Config, where: str) -> None:
    c = cfg.curriculum
    if c.band_low > c.band_high:
        raise ConfigError(f"{where}: `curriculum.band_low` ({c.band_low}) must not exceed `curriculum.band_high` ({c.band_high}).")
    if c.env_reward == "uncertainty" and c.invalid_reward != 0.0:
        raise ConfigError(f"{where}: `curriculum.invalid_reward` = {c.invalid_reward:g} with `curriculum.env_reward` = "
                          f"\"uncertainty\": under that reward a generation that became no task earns what a task at "
                          f"p-hat = 0 or 1 earns, so invalid_reward is not used; leave it at 0 or use env_reward = "
                          f"\"exp\".")


def _check_sampling(cfg: Config, where: str) -> None:
    """Settings vLLM refuses when it builds its SamplingParams or loads an adapter, refused here first (for the hf
    engine too: the runs must mean the same whichever engine serves them); LoRA updates with an engine whose row says
    it serves no adapter."""
    g, r = cfg.generate, cfg.rollout
    n_env = max(g.variations, g.static_variations if cfg.env.mode == "static" else 1)
    if g.temperature == 0.0 and n_env > 1:
        raise ConfigError(f"{where}: `generate.temperature` = 0 (greedy) with {n_env} variations per context would "
                          f"write {n_env} identical tasks (vLLM refuses n > 1 with greedy sampling); set a "
                          f"temperature above 0.")
    if r.temperature == 0.0 and r.group_size > 1:
        raise ConfigError(f"{where}: `rollout.temperature` = 0 (greedy) with `rollout.group_size` = {r.group_size} "
                          f"gives identical attempts, so GRPO learns nothing (vLLM refuses n > 1 with greedy "
                          f"sampling); set a temperature above 0 or group_size = 1.")
    for name, sec in (("generate", g), ("rollout", r)):
        if sec.top_p == 0.0:
            raise ConfigError(f"{where}: `{name}.top_p` = 0 keeps no token; allowed values are above 0, up to 1.0.")
    for name, t in (("generate.temperature", g.temperature), ("rollout.temperature", r.temperature),
                    ("evaluate.temperature", cfg.evaluate.temperature)):
        if 0.0 < t < VLLM_MIN_TEMPERATURE:
            raise ConfigError(f"{where}: `{name}` = {t!r}: vLLM raises temperatures below {VLLM_MIN_TEMPERATURE} to "
                              f"{VLLM_MIN_TEMPERATURE}, so the logprobs it records would not be those of {t!r}. Use 0 "
                              f"(greedy) or a temperature of at least {VLLM_MIN_TEMPERATURE}.")
    if may_use_vllm(cfg.run.engine):  # an engine vLLM serves (its row says so), or auto: vLLM where a GPU is
        for name in ("agent_update", "env_update"):
            t = getattr(cfg, name)
            if t.lora and t.lora_r > cfg.vllm.max_lora_rank:
                raise ConfigError(f"{where}: `{name}.lora_r` = {t.lora_r} is above `vllm.max_lora_rank` = "
                                  f"{cfg.vllm.max_lora_rank}; vLLM could not serve the adapter. Lower the rank or "
                                  f"raise vllm.max_lora_rank (one of 8, 16, 32, 64, 128, 256, 320, 512); with "
                                  f"run.engine = \"{cfg.run.engine}\" vLLM serves it where it runs.")
    if cfg.run.engine != AUTO and not engine_facts(cfg.run.engine)["lora"]:
        for name in ("agent_update", "env_update"):
            if getattr(cfg, name).lora:
                raise ConfigError(f"{where}: `{name}.lora` is on, but run.engine = \"{cfg.run.engine}\" serves no "
                                  f"LoRA adapter (its row in catalogue/engines.py says lora = false), so the next "
                                  f"epoch could not generate with the trained model. Choose another engine or turn "
                                  f"`{name}.lora` off.")


def parse_override(text: str) -> tuple[str, str, Any]:
    """`section.key=value` -> (section, key, value); value read as TOML when it parses as TOML."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"--set {quoted(text)}: expected SECTION.KEY=VALUE, e.g. --set rollout.group_size=4.")
    lhs, raw = text.split("=", 1)
    section, key = lhs.strip().split(".", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except (ValueError, RecursionError):  # not TOML (TOMLDecodeError is a ValueError): the text itself
        value = raw
    return section, key, value


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for text in overrides:
        section, key, value = parse_override(text)
        merged.setdefault(section, {})[key] = value
    return merged


CONFIG_MAX = 1 << 20  # bytes of genenv.toml read at most: every setting with its help is about 11 KB


def read_config_bytes(path: Path) -> bytes:
    """genenv.toml's bytes: a regular file only (a FIFO would block, `/dev/zero` never end) and at most
    CONFIG_MAX bytes; anything else is a ConfigError naming the file."""
    from genenv_cli.core.errors import InputError
    from genenv_cli.core.safefiles import read_regular

    try:
        raw = read_regular(path, limit=CONFIG_MAX + 1)
    except InputError as exc:
        raise ConfigError(f"{str(exc).split(';')[0]}; the run's config must be a TOML file.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the run's config ({exc.strerror or exc}).") from None
    if len(raw) > CONFIG_MAX:
        raise ConfigError(f"{path}: more than {CONFIG_MAX:,} bytes, which no genenv.toml is (every setting with "
                          f"its help is about 11 KB); it is not a run config. Rewrite it with `genenv init DIR "
                          f"--force`.")
    return raw


def load_config(path: Path, overrides: list[str] | None = None) -> Config:
    if not path.exists():
        raise ConfigError(f"{path}: no run config here. Create a run with `genenv init DIR`, then pass "
                          f"`--run DIR`, set GENENV_RUN, or cd into it.")
    try:
        data = tomllib.loads(read_config_bytes(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                          f"the config must be a UTF-8 TOML file.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}).") from exc
    except (ValueError, RecursionError) as exc:  # nesting past the parser's depth, a number past the digit limit
        raise ConfigError(f"{path}: TOML that cannot be read ({type(exc).__name__}: {str(exc)[:100]}).") from None
    if overrides:
        config_from_dict(data, str(path))  # the file itself must be valid too
        data = apply_overrides(data, overrides)
        return config_from_dict(data, f"{path} with --set overrides")
    return config_from_dict(data, str(path))


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def render_config(cfg: Config) -> str:
    """The whole config as commented TOML: every key present, with its help and allowed values."""
    lines = [
        "# genenv run configuration. Every setting is listed with its help; edit values in place.",
        "# Override one for a single command with --set SECTION.KEY=VALUE (see `genenv --help`).",
        "",
    ]
    for section in SECTIONS:
        lines.append(f"[{section}]")
        obj = getattr(cfg, section)
        for fld in dataclasses.fields(obj):
            meta = fld.metadata
            note = meta["help"]
            if "choices" in meta:
                note += " One of: " + ", ".join(str(c) for c in meta["choices"]) + "."
            lines.append(f"# {note}")
            default = _toml_value(fld.default if fld.default is not dataclasses.MISSING else fld.default_factory())
            value = _toml_value(getattr(obj, fld.name))
            if value != default:
                lines.append(f"# (default: {default})")
            lines.append(f"{fld.name} = {value}")
        lines.append("")
    return "\n".join(lines)
