"""`genenv init`: a new run directory, its genenv.toml and its imported seeds, written in one commit.

The command line's words become a config here: `--domain` values become `run.domain` and the shares of a mixed
run (`domain_specs`), `--seeds` values become each domain's seed files (`seed_specs`), a preset's settings are
merged under the user's `--set` ones. Every domain's seed folder is built and checked under a temporary name
first; then the folders and genenv.toml are swapped in together, genenv.toml's rename being the commit point
(`rundir.swap_in`), so a bad second seed file leaves the first domain's seeds, and any previous config, as they
were.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import MIXED, Config, apply_overrides, config_from_dict, render_config
from genenv_cli.catalogue.domains import stage_domain
from genenv_cli.catalogue.presets import get_preset, preset_header, preset_overrides, vllm_installed
from genenv_cli.core.errors import ConfigError
from genenv_cli.core.safefiles import refuse_link, remove_entry
from genenv_cli.domains.seedfiles import SEEDS_DIR, SEEDS_FILE, StagedSeeds, stage_seeds
from genenv_cli.rundir import RunDir, swap_in, tmp_name, write_new

DEFAULT_DOMAIN = "tool_call"


@dataclass
class CreatedRun:
    config_path: Path
    cfg: Config
    domains: str                                          # what the line says of them: "domain arith", "domains ..."
    notes: list[str] = field(default_factory=list)       # the preset's notes, for stderr
    seed_notes: list[str] = field(default_factory=list)  # one per domain whose seeds were imported

    def message(self, directory: Path, preset: str | None) -> str:
        """The one line `genenv init` prints."""
        seed_note = "".join(f", {n}" for n in self.seed_notes)
        return (f"created {self.config_path} ({self.domains}, agent {self.cfg.agent.model}, environment {self.cfg.env.model}"
                f"{f', preset {preset}' if preset else ''}{seed_note}). "
                f"Next: genenv generate-tasks --run {directory} --epoch 1")


def domain_specs(specs: list[str]) -> tuple[str, dict[str, float]]:
    """--domain values -> (run.domain, run.domains): one NAME is a single-domain run; several (NAME or
    NAME=SHARE) a mixed one, where the domains given no share split what the others leave equally."""
    parsed: dict[str, float | None] = {}
    for text in specs:
        name, _, raw = text.partition("=")
        name = name.strip()
        if name in parsed:
            raise ConfigError(f"--domain {name} is given twice.")
        share = None
        if raw:
            try:
                share = float(raw)
            except ValueError:
                raise ConfigError(f"--domain {text}: the share must be a number, e.g. --domain {name}=0.5.") from None
            if not 0.0 < share <= 1.0:
                raise ConfigError(f"--domain {text}: the share must be above 0 and at most 1.")
        parsed[name] = share
    if len(parsed) == 1:
        (name, share), = parsed.items()
        if share is not None:
            raise ConfigError(f"--domain {specs[0]}: a share is for a run on several domains "
                              f"(--domain A=0.6 --domain B=0.4); one domain takes them all.")
        return name, {}
    given = sum(v for v in parsed.values() if v is not None)
    open_ = [k for k, v in parsed.items() if v is None]
    if open_ and given >= 1.0:
        raise ConfigError(f"--domain: the shares given sum to {given:g}, leaving nothing for "
                          f"{', '.join(open_)}; give every domain a share (summing to 1) or fewer shares.")
    rest = (1.0 - given) / len(open_) if open_ else 0.0
    return MIXED, {k: (rest if v is None else v) for k, v in parsed.items()}


def seed_specs(texts: list[str], names: list[str], mixed: bool) -> dict[str, list[Path]]:
    """--seeds values -> {domain: files}: FILE for a single-domain run, NAME=FILE in a mixed one."""
    if not mixed:
        return {names[0]: [Path(t) for t in texts]}
    out: dict[str, list[Path]] = {}
    for text in texts:
        name, sep, path = text.partition("=")
        if not sep or name not in names or not path:
            raise ConfigError(f"--seeds {text}: this run has several domains ({', '.join(names)}); say which one a "
                              f"seed file is for: --seeds NAME=FILE, e.g. --seeds {names[0]}=tasks.jsonl.")
        out.setdefault(name, []).append(Path(path))
    return out


def _seed_note(name: str | None, one: StagedSeeds, folder: Path) -> str:
    manifest = one.manifest
    counts = manifest["counts"]
    note = (f"{name + ': ' if name else ''}{counts['train']} train + {counts['validation']} "
            f"validation seeds ({manifest['split']})")
    if manifest["skipped"]:
        note += (f"; {len(manifest['skipped'])} items left out as not self-consistent, reasons in "
                 f"{folder / 'manifest.json'}")
    if manifest.get("skipped_files"):
        note += (f"; {len(manifest['skipped_files'])} files without tasks left out: "
                 + ", ".join(f"{Path(f['file']).name} ({f['reason']})" for f in manifest["skipped_files"]))
    return note


def create_run(directory: Path, domains: list[str] | None = None, *, agent_model: str | None = None,
               env_model: str | None = None, preset: str | None = None, sets: list[str] | None = None,
               seeds: list[str] | None = None, validation_share: float = 0.2, force: bool = False) -> CreatedRun:
    """Write `directory`'s genenv.toml (every setting present, defaults visible) and its imported seeds."""
    sets = list(sets or [])
    run_domain, shares = domain_specs(domains or [DEFAULT_DOMAIN])
    names = list(shares) or [run_domain]
    doms = {name: stage_domain(name) for name in names}  # a plugin's import and calls under the guard
    by_domain = seed_specs(list(seeds or []), names, bool(shares))
    target = RunDir(directory).config_path
    _refuse_target(target, force)
    data, header, notes = _settings(run_domain, shares, preset, sets, agent_model, env_model)
    where = "genenv init options" + (f" with preset {preset}" if preset else "")
    cfg = config_from_dict(data, where)
    from genenv_cli.catalogue.trackers import check_installed

    check_installed(cfg, "the run")  # before anything is written: a tracker named but not installed
    for name, dom in doms.items():
        if not by_domain.get(name) and not dom.builtin_seeds:
            how = f"--seeds {name}=FILE" if shares else "--seeds FILE"
            raise ConfigError(f"domain {name} ships no seed tasks: {how} is required ({dom.seed_format}).")
    said = ("domains " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in cfg.run.shares().items())
            if shares else f"domain {run_domain}")
    created = CreatedRun(target, cfg, said, notes)
    _import_and_commit(created, directory, data, where, header, doms, by_domain, mixed=bool(shares),
                       validation_share=validation_share, force=force)
    return created


def _refuse_target(target: Path, force: bool) -> None:
    """The config's path: a folder there is never replaced, a file only with --force."""
    if target.is_dir() and not target.is_symlink():  # named here: the commit's rename would name its temporary file
        raise ConfigError(f"{target} is a folder where the run's config belongs; `genenv init` does not replace a "
                          f"folder, even with --force. Move it aside (it holds nothing genenv wrote) and rerun.")
    if target.exists() and not force:
        raise ConfigError(f"{target} already exists; edit it, or pass --force to overwrite it.")


def _settings(run_domain: str, shares: dict[str, float], preset: str | None, sets: list[str],
              agent_model: str | None, env_model: str | None) -> tuple[dict[str, Any], str, list[str]]:
    """(the config's values: the preset's, the models, the user's --set ones over them; genenv.toml's header
    naming the preset; the preset's notes)."""
    header, preset_sets, notes = "", [], []
    if preset is not None:
        chosen = get_preset(preset)
        preset_sets, notes = preset_overrides(chosen, vllm_installed())
        keys = {p.split("=", 1)[0] for p in preset_sets}
        header = preset_header(chosen, notes, [s for s in sets if s.split("=", 1)[0].strip() in keys])
    run_keys: dict[str, Any] = {"domain": run_domain, **({"domains": shares} if shares else {})}
    data = apply_overrides({"run": run_keys}, preset_sets)
    for section, model in (("agent", agent_model), ("env", env_model)):
        if model is not None or preset is None:
            data.setdefault(section, {})["model"] = model or "embedded"
    return apply_overrides(data, sets), header, notes


def _import_and_commit(created: CreatedRun, directory: Path, data: dict[str, Any], where: str, header: str,
                       doms: dict[str, Any], by_domain: dict[str, list[Path]], *, mixed: bool,
                       validation_share: float, force: bool) -> None:
    """Every domain's seeds staged and checked, then the seed folders and genenv.toml swapped in together;
    `created` gains the config naming the seeds and a note per domain."""
    target = created.config_path
    staged: list[StagedSeeds] = []  # every domain's seed folder is built and checked before any replaces the run's
    try:
        for name, paths in by_domain.items():
            if not paths:
                continue
            folder = f"{SEEDS_DIR}/{name}" if mixed else SEEDS_DIR
            one = stage_seeds(doms[name], paths, directory, seed=created.cfg.run.seed,
                              validation_share=validation_share, force=force, folder=folder)
            staged.append(one)
            if mixed:
                data.setdefault("run", {}).setdefault("domain_seeds", {})[name] = f"{folder}/seeds.jsonl"
            else:
                data.setdefault("run", {})["seeds"] = SEEDS_FILE
            created.cfg = config_from_dict(data, where)
            created.seed_notes.append(_seed_note(name if mixed else None, one, directory / folder))
        directory.mkdir(parents=True, exist_ok=True)
        # the seed folders and genenv.toml in one commit: genenv.toml's rename is the commit point, and a failure
        # before it puts every previous seed folder back (rundir.swap_in)
        refuse_link(target, "the run's config")
        config_tmp = tmp_name(target)
        write_new(config_tmp, (header + render_config(created.cfg)).encode("utf-8"))
        swap_in([(one.tmp, one.final) for one in staged], config_tmp, target)
    finally:
        for one in staged:
            shutil.rmtree(one.tmp, ignore_errors=True)
        if directory.is_dir():
            remove_entry(tmp_name(target))
