"""A run's own base tasks: `genenv init --domain NAME --seeds FILE` (repeatable).

Each FILE is read by the domain (`Domain.read_seeds`, the loader `genenv evaluate --data` uses for benchmark
domains), so a bad record is refused with its file and line before anything is written. The run keeps:

    RUN/seeds/files/<k>/...     byte copies of every source file (a BFCL question file with its possible answers;
                                a folder's files)
    RUN/seeds/files/shared/...  files the sources share, once, only those the tasks need (API-Bank's apis/*.py)
    RUN/seeds/seeds.jsonl       the base tasks, one per line: {"id", "split", "shape", "payload"}
    RUN/seeds/manifest.json     the sources (path, sha256, count), and where the train/validation split came from

and `run.seeds = "seeds/seeds.jsonl"` in genenv.toml. The folder is built under a temporary name and renamed into
place, so a failed import leaves the run as it was and a rerun needs none of the original files. The split is the
file's own where the format states one (the `split` field of the tool_call/arith seed files); otherwise
`validation_share` of the tasks is drawn, with `run.seed`, as validation, and the manifest says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import ConfigError, InputError
from genenv_cli.core.safefiles import open_regular, read_regular
from genenv_cli.core.sizecaps import SEEDS, scan_source
from genenv_cli.domains.base import Domain, SeedTask
from genenv_cli.domains.seeded import SeededDomain

SEEDS_DIR = "seeds"
SEEDS_FILE = "seeds/seeds.jsonl"
SPLITS = ("train", "validation")


def _sha256(path: Path) -> str:
    with os.fdopen(open_regular(path), "rb") as fh:  # never a device or a pipe
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _as_seeds_error(exc: InputError) -> InputError:
    """A loader's error, worded for `init --seeds`: the loaders are `evaluate --data`'s, and say "--data"."""
    return InputError(re.sub(r"--data\b", "--seeds", str(exc)))


def _digest(path: Path, parts: list[tuple[Path, str]]) -> str:
    """The file's sha256; a folder's: of its files' names and digests, in order."""
    if path.is_file():
        return _sha256(path)
    h = hashlib.sha256()
    for src, rel in sorted(parts, key=lambda p: p[1]):
        h.update(f"{rel}\0{_sha256(src)}\n".encode())
    return h.hexdigest()


def read_sources(domain: Domain, paths: list[Path], skipped: list[dict[str, str]] | None = None,
                 skipped_files: list[dict[str, str]] | None = None) -> list[tuple[Path, list[SeedTask]]]:
    """Every source's tasks, checked: known split, the domain's payload check, ids unique across files. Items the
    domain left out as not self-consistent are appended to `skipped` ({"file", "id", "reason"}); a file without
    any task (an API-Bank dialogue without API calls) is left out and appended to `skipped_files` ({"file",
    "reason"}); only when no source holds a task is the import refused."""
    skipped = [] if skipped is None else skipped
    skipped_files = [] if skipped_files is None else skipped_files
    out = []
    seen: dict[str, Path] = {}
    for path in paths:
        if not path.exists():
            raise InputError(f"--seeds {path}: no such file or folder (expected "
                             f"{domain.seed_format or 'a seed file'}).")
        if not path.is_file() and not domain.seed_folders:
            raise InputError(f"--seeds {path}: is a folder; {domain.name} takes files "
                             f"({domain.seed_format or 'a seed file'}).")
        scan_source(path, SEEDS)  # sizes first, in one linear pass: no domain's reader meets a file past the caps
        try:
            tasks = domain.read_seeds(path)
        except InputError as exc:
            raise _as_seeds_error(exc) from None
        skipped.extend({"file": str(path), "id": i, "reason": why} for i, why in getattr(domain, "seed_skips", []))
        skipped_files.extend({"file": f, "reason": why} for f, why in getattr(domain, "seed_skipped_files", []))
        if not tasks:
            if not getattr(domain, "seed_skipped_files", []):
                raise InputError(f"--seeds {path}: no tasks found (expected "
                                 f"{domain.seed_format or 'a seed file'}).")
            continue
        for t in tasks:
            if t.split not in ("", *SPLITS):
                raise InputError(f"{path}: task {t.id!r} has split {t.split!r}; expected train or validation.")
            if domain.shapes and t.shape not in domain.shapes:
                raise InputError(f"{path}: task {t.id!r} has shape {t.shape!r}; {domain.name} knows "
                                 f"{', '.join(domain.shapes)}.")
            problem = domain.check_payload(t.payload)
            if problem:
                raise InputError(f"{path}: task {t.id!r} is not a valid {domain.name} task: {problem}.")
            if t.id in seen:
                raise InputError(f"{path}: task id {t.id!r} appears again (first in {seen[t.id]}); ids must be "
                                 f"unique across the seed files.")
            seen[t.id] = path
        out.append((path, tasks))
    return out


def assign_splits(tasks: list[SeedTask], seed: int, validation_share: float) -> tuple[list[SeedTask], str]:
    """Tasks with a split each, and how it was decided (recorded in the manifest)."""
    open_ = [i for i, t in enumerate(tasks) if not t.split]
    if not open_:
        return tasks, "stated in the seed files"
    rng = random.Random(f"genenv-seeds-{seed}")
    order = list(open_)
    rng.shuffle(order)
    n_val = round(len(order) * validation_share)
    if validation_share > 0 and len(order) > 1:
        n_val = max(1, min(n_val, len(order) - 1))  # both splits non-empty
    val = set(order[:n_val])
    out = [t if t.split else SeedTask(t.id, "validation" if i in val else "train", t.shape, t.payload)
           for i, t in enumerate(tasks)]
    how = (f"drawn with run.seed={seed}: {n_val} of {len(order)} tasks without a stated split are validation "
           f"(validation_share {validation_share})")
    if len(open_) < len(tasks):
        how += "; the others' split is stated in their file"
    return out, how


def import_seeds(domain: Domain, paths: list[Path], run_root: Path, *, seed: int, validation_share: float = 0.2,
                 force: bool = False, folder: str = SEEDS_DIR) -> dict[str, Any]:
    """Read, check and copy the seed files into RUN/<folder> (RUN/seeds; RUN/seeds/NAME for a domain of a mixed
    run), atomically; returns the manifest. `genenv init` stages every domain's folder first (`stage_seeds`) and
    swaps them in together with genenv.toml, so a failure on any of them changes nothing."""
    from genenv_cli.rundir import replace_into_place

    staged = stage_seeds(domain, paths, run_root, seed=seed, validation_share=validation_share, force=force,
                         folder=folder)
    try:
        replace_into_place(staged.tmp, staged.final)
    finally:
        shutil.rmtree(staged.tmp, ignore_errors=True)
    return staged.manifest


class StagedSeeds:
    """A domain's seed folder built under a temporary name (`tmp`), not yet in place (`final`)."""

    def __init__(self, tmp: Path, final: Path, manifest: dict[str, Any]):
        self.tmp, self.final, self.manifest = tmp, final, manifest


def stage_seeds(domain: Domain, paths: list[Path], run_root: Path, *, seed: int, validation_share: float = 0.2,
                force: bool = False, folder: str = SEEDS_DIR) -> StagedSeeds:
    """Read and check the seed files and build RUN/<folder> under a temporary name beside it; nothing in the run
    changes (the caller renames it in, or removes it)."""
    from genenv_cli.core.safefiles import refuse_links_below
    from genenv_cli.rundir import tmp_name

    if not 0.0 <= validation_share < 1.0:
        raise ConfigError(f"--validation-share {validation_share}: expected a number in [0, 1).")
    skipped: list[dict[str, str]] = []
    skipped_files: list[dict[str, str]] = []
    sources = read_sources(domain, paths, skipped, skipped_files)
    if not sources:
        raise InputError(f"--seeds: none of the {len(skipped_files)} files holds a task ("
                         + "; ".join(f"{f['file']}: {f['reason']}" for f in skipped_files[:3]) + ").")
    tasks, how = assign_splits([t for _, ts in sources for t in ts], seed, validation_share)
    if not any(t.split == "train" for t in tasks):
        raise InputError(f"--seeds: no train tasks among {len(tasks)} (generate-tasks draws base tasks from train).")
    final = run_root / folder
    refuse_links_below(run_root, final, "the run's seed folder")
    if final.exists() and not force:
        raise ConfigError(f"{final} already exists; pass --force to replace the run's seeds.")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(final)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        files = []
        for k, (path, ts) in enumerate(sources):
            parts = domain.seed_files(path)
            for src, rel in parts:
                dest = tmp / "files" / str(k) / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dest)
            files.append({"source": str(path.resolve()), "copy": f"{folder}/files/{k}/"
                          + (path.name if path.is_file() else ""), "sha256": _digest(path, parts),
                          "tasks": len(ts)})
        shared = domain.shared_seed_files([p for p, _ in sources], tasks)
        for src, rel in shared:
            dest = tmp / "files" / "shared" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
        with open(tmp / "seeds.jsonl", "w", encoding="utf-8") as fh:
            for t in tasks:
                fh.write(json.dumps({"id": t.id, "split": t.split, "shape": t.shape, "payload": t.payload},
                                    ensure_ascii=False) + "\n")
        counts = {s: sum(t.split == s for t in tasks) for s in SPLITS}
        manifest = {"domain": domain.name, "files": files, "split": how, "counts": counts,
                    "skipped": skipped, "fingerprint": _sha256(tmp / "seeds.jsonl")[:16]}
        if skipped_files:
            manifest["skipped_files"] = skipped_files
        if shared:
            manifest["shared"] = [f"{folder}/files/shared/{rel}" for _, rel in shared]
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return StagedSeeds(tmp, final, manifest)


def load_run_seeds(domain: Domain, path: Path) -> list[SeedTask]:
    """The tasks of a run's seeds.jsonl (written by import_seeds; checked again, since users may edit it)."""
    from genenv_cli.core.jsonio import json_lines

    if not path.is_file():
        raise InputError(f"{path}: the run's seed file is missing (run.seeds in genenv.toml names it); rerun "
                         f"`genenv init --seeds FILE --force` or clear run.seeds to use the built-in seeds.")
    out = []
    for where, rec in json_lines(path, '{"id", "split", "shape", "payload"}', SEEDS):
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or rec.get("split") not in SPLITS \
                or not isinstance(rec.get("shape"), str):
            raise InputError(f"{where}: expected {{\"id\": str, \"split\": train|validation, \"shape\": str, "
                             f"\"payload\": {{...}}}}.")
        problem = domain.check_payload(rec.get("payload"))
        if problem:
            raise InputError(f"{where}: not a valid {domain.name} task: {problem}.")
        out.append(SeedTask(rec["id"], rec["split"], rec["shape"], rec["payload"]))
    return out


def domain_for_run(cfg: Any, run_root: Path | None) -> Domain:
    """The run's domain: the registered one, with the run's imported seeds when `run.seeds` names a file. A mixed
    run has several: `domains_for_run`."""
    if getattr(cfg.run, "mixed", False):
        raise ConfigError(f"this is a mixed run (run.domains: {', '.join(cfg.run.domains)}); this command works on "
                          f"one domain's tasks and does not take a mixed run yet.")
    return _with_seeds(cfg.run.domain, getattr(cfg.run, "seeds", ""), run_root)


def domains_for_run(cfg: Any, run_root: Path | None) -> dict[str, Domain]:
    """Every domain of the run by name, each with its imported seeds where the config names them (run.seeds for
    a single-domain run, run.domain_seeds for a mixed one): one entry unless the run is mixed."""
    limit = float(cfg.score.item_timeout_s)
    if not cfg.run.mixed:
        return {cfg.run.domain: _with_seeds(cfg.run.domain, getattr(cfg.run, "seeds", ""), run_root, limit)}
    return {name: _with_seeds(name, cfg.run.domain_seeds.get(name, ""), run_root, limit) for name in cfg.run.shares()}


def _with_seeds(name: str, rel: str, run_root: Path | None, limit: float | None = None) -> Domain:
    from genenv_cli.catalogue.domains import stage_domain

    domain = stage_domain(name) if limit is None else stage_domain(name, limit)  # a plugin's under the guard
    if not rel:
        return domain
    if run_root is None:
        raise ConfigError(f"run.seeds = {rel!r} is relative to the run directory; pass --run DIR.")
    path = Path(run_root) / rel
    return _cached(domain, path, path.stat().st_mtime_ns if path.exists() else 0)


_CACHE: dict[tuple[int, str, int], Domain] = {}


def _cached(domain: Domain, path: Path, mtime: int) -> Domain:
    key = (id(domain), str(path.resolve()), mtime)
    if key not in _CACHE:
        seeds = load_run_seeds(domain, path)
        fingerprint = hashlib.sha256(read_regular(path)).hexdigest()[:16]
        _CACHE[key] = SeededDomain(domain, seeds, fingerprint)
    return _CACHE[key]


def read_seed_jsonl(path: Path, fields: tuple[str, ...], shape_of: Any = None, check: Any = None) -> list[SeedTask]:
    """The built-in domains' own seed format, one JSON object per line: `{"id", "split", "shape", <fields>}`
    (the shipped `data/*_seeds.jsonl`); `split` may be left out (then drawn), `shape_of(payload)` fills a
    missing shape; `check(payload)` (the domain's check_payload) refuses a bad task with its line."""
    from genenv_cli.core.jsonio import json_lines

    out = []
    for where, rec in json_lines(path, '{"id", "split", "shape", ' + ", ".join(f'"{f}"' for f in fields) + "}", SEEDS):
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str):
            raise InputError(f"{where}: expected a JSON object with a string \"id\".")
        missing = [f for f in fields if f not in rec]
        if missing:
            raise InputError(f"{where}: missing {', '.join(missing)} (a task needs {', '.join(fields)}).")
        split = rec.get("split", "")
        if split not in ("", *SPLITS):
            raise InputError(f"{where}: split {split!r}; expected train or validation (or none: drawn at init).")
        payload = {f: rec[f] for f in fields}
        problem = check(payload) if check else None
        if problem:
            raise InputError(f"{where}: not a valid task: {problem}.")
        shape = rec.get("shape")
        if not isinstance(shape, str) or not shape:
            if shape_of is None:
                raise InputError(f"{where}: missing the task's \"shape\".")
            try:
                shape = shape_of(payload)
            except ValueError as exc:
                raise InputError(f"{where}: {exc}") from None
        out.append(SeedTask(rec["id"], split, shape, payload))
    return out
