"""Sending the run's points to each tracker it names, under one lock, once per point (`catalogue/trackers.py` says
what each tracker keeps, and has their rows). `publish` is the commit's `trackers` row
(`catalogue/commit_subscribers.py`). Everything genenv writes for the trackers lives in `RUN/trackers/`: the run's
identity (`run.json`), what was sent to an append-only tracker (`<name>.json`), TensorBoard's event files, W&B's
folder."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.trackers import TRACKERS, check_row
from genenv_cli.core.errors import GenenvError, InputError
from genenv_cli.core.registry import check_name
from genenv_cli.core.safefiles import read_regular, refuse_links_below, refuse_links_leaving
from genenv_cli.rundir import RunDir, json_bytes, writable, write_bytes_atomic


def publish(run: Any, cfg: Config, ui: Any = None) -> dict[str, Any]:
    """Send every tracker in `run.report_to` the run's points it does not have yet; returns what each got. Never
    raises for a tracker's own failure (the stage before it has committed): it warns and the next call retries."""
    if not cfg.run.report_to:
        return {}
    return sync(run, cfg, ui)


def sync(run: RunDir, cfg: Config, ui: Any = None) -> dict[str, Any]:
    folder = run.trackers_dir()
    try:
        for name in dict.fromkeys([*TRACKERS.rows, *cfg.run.report_to]):  # each tracker's files, and every link
            for path in tracker_paths(run, folder, name):                  # below them (W&B's)
                refuse_links_below(run.root, path, "the trackers' files")
        refuse_links_leaving(run.root, folder, "the trackers' files")
    except GenenvError as exc:
        return _warn(ui, f"the trackers were not updated: {exc}")
    if not writable(folder):
        return _warn(ui, f"the trackers were not updated: {run.root} is read-only")
    from genenv_cli.trackers.figures import run_points

    got: dict[str, Any] = {}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _locked(folder):
            ident = _identity(folder, run)
            try:
                points = run_points(run, cfg)
            except Exception as exc:  # noqa: BLE001 - a damaged record must not fail a stage that has committed
                return _warn(ui, f"the trackers were not updated: the run's points could not be worked out from its "
                                 f"records ({type(exc).__name__}: {str(exc)[:200]}); a manifest or metrics file was "
                                 f"edited or damaged. Rerun the stage that wrote it with --force.")
            for name in cfg.run.report_to:
                try:
                    got[name] = _send(name, folder, ident, points, cfg)
                except Exception as exc:  # noqa: BLE001 - a tracker's failure must not fail a committed stage
                    _warn(ui, f"{name}: the run's points were not all sent ({type(exc).__name__}: "
                              f"{str(exc)[:300]}); the next stage or evaluation sends what is missing")
                    got[name] = {"error": str(exc)[:300]}
    except (OSError, GenenvError) as exc:
        return _warn(ui, f"the trackers were not updated: {exc}")
    skipped = {n: g["skipped"] for n, g in got.items() if g.get("skipped")}
    for name, n in skipped.items():
        _warn(ui, f"{name} keeps the first value logged at a step: {n} point(s) of a rerun stage, at steps it already "
                  f"holds, were not sent again")
    return got


def tracker_paths(run: RunDir, folder: Path, name: str) -> list[Path]:
    """Where tracker `name` writes under RUN/trackers/ (its folder's files, its ledger), checked: its name an
    identifier and its row's folder a relative path of plain names (as `TRACKERS.register` checks a row; again here
    for an entry point's name and for facts changed since), every path inside the trackers' folder."""
    check_name("tracker", name)
    facts = TRACKERS.facts(name)
    check_row(name, facts)
    paths = [folder / f"{name}.json"]
    if facts.get("takes") == "files" or facts.get("folder"):
        paths.append(folder / facts.get("folder", name) / "x")  # a file inside its folder: the folder is checked
    real = os.path.realpath(folder)
    for p in paths:
        if os.path.commonpath([real, os.path.realpath(p)]) != real:
            raise InputError(f"{p}: tracker `{name}` would write outside {folder}; refused.")
    return paths


def _send(name: str, folder: Path, ident: dict[str, str], points: list[Any], cfg: Config) -> dict[str, Any]:
    # the trackers' clients print to stdout; a stage's stdout is its summary line (`--json` is parsed by scripts)
    with contextlib.redirect_stdout(sys.stderr):
        facts, send = TRACKERS.facts(name), _sender(name, cfg)
        if facts.get("takes") == "files":
            return send(folder / facts.get("folder", name), points)
        ledger_path = folder / f"{name}.json"
        ledger = _read_json(ledger_path)
        sent = ledger.get("sent") if isinstance(ledger.get("sent"), dict) else {}
        fresh = [p for p in points if p.key not in sent]
        changed = sum(1 for p in points if p.key in sent and sent[p.key] != _value_id(p))
        if fresh:
            send(folder, ident, fresh, cfg)
            ledger["sent"] = {**sent, **{p.key: _value_id(p) for p in fresh}}
            write_bytes_atomic(ledger_path, json_bytes(ledger))
        return {"sent": len(fresh), "skipped": changed}


PLUGIN_LIMIT_S = 120.0  # the least time a plugin tracker gets to send (a network round trip or several)


def _sender(name: str, cfg: Config) -> Any:
    """A plugin tracker's sending function, loaded and called under the plugin guard (a time limit; its exit or
    error reported as the plugin's, which the caller turns into a warning); a built-in one as it is."""
    if TRACKERS.origin(name) == "built in":
        return TRACKERS.get(name)
    from genenv_cli.core.plugin_guard import guard

    owner = f"tracker plugin `{name}`"
    limit = max(float(cfg.score.item_timeout_s), PLUGIN_LIMIT_S)
    send = guard(owner, "loading (import)", lambda: TRACKERS.get(name), limit)
    return lambda *args: guard(owner, "send()", lambda: send(*args), limit)


def _value_id(point: Any) -> str:
    """A point's value as the ledger records it (a histogram by its count and sum)."""
    if point.histogram:
        return f"hist:{len(point.value)}:{sum(point.value):.9g}"
    return f"{point.value:.9g}"


def _identity(folder: Path, run: RunDir) -> dict[str, str]:
    """The tracker run of this genenv run: made once, kept in trackers/run.json (W&B's id, trackio's run name)."""
    path = folder / "run.json"
    ident = _read_json(path)
    if not ident.get("id"):
        ident = {"id": secrets.token_hex(6), "name": f"{run.root.name}-{secrets.token_hex(3)}"}
        write_bytes_atomic(path, json_bytes(ident))
    return ident


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_regular(path, follow=False).decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as exc:
        raise InputError(f"{path}: not the JSON genenv writes there ({str(exc)[:120]}); remove it and rerun (the "
                         f"trackers' points are sent again as needed).") from None
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(folder: Path):
    """One sender at a time per run (stages of two epochs, or an evaluation beside a stage)."""
    path = folder / ".send.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _warn(ui: Any, text: str) -> dict[str, Any]:
    if ui is not None:
        ui.warn(text)
    else:
        print(f"warning: {text}", file=sys.stderr)
    return {"warning": text}

