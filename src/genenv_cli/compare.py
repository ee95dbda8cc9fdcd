"""`genenv compare RUN [RUN ...]`: several runs on one offline HTML page, arms overlaid with a band across seeds.

    genenv compare runs/genenv-s0 runs/genenv-s1 runs/frozen-s0 runs/frozen-s1 --out compare/compare.html

Runs whose settings are equal but for `run.seed` form one **arm** (named by its `env.mode`, with "agent frozen"
under `agent.mode = "frozen"`, and a second arm of the same mode also by the settings that set it apart); an arm's line is the
mean over its runs and the shaded band the 95% interval of that mean (Student's t over the seeds; no band for a
single run). Arms are meant to differ in `env.mode` alone: when two arms also differ in another setting (a
different rollout budget, another domain), the page and the returned `flags` say so and name the settings,
so a run with other settings is never silently overlaid as if it were comparable.

Charts, each with its numbers in a table: the share of the environment's batches in the band (and of all
tasks), the environment's shape mix per arm, the share of informative GRPO groups, and held-out success
(`genenv evaluate --bench heldout`, every epoch's agent plus the base model at 0 rollouts) against rollouts
consumed. Reads each run's `epochs/NNNN/metrics.json`, `genenv.toml` and `evals/heldout/*.json`; writes only
the page and its PNGs.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.errors import InputError
from genenv_cli.rundir import RunDir, write_text_atomic

# Student's t 0.975 quantiles by degrees of freedom: a 95% interval over a handful of seeds needs t, not 1.96,
# and these 30 numbers are all we need of scipy (which the project does not depend on)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]

CHARTS: list[tuple[str, str]] = [
    ("in-band", "Environment batches and tasks in the band"),
    ("shape-mix", "The environment's shape mix"),
    ("informative", "Informative GRPO groups"),
    ("heldout", "Held-out success against rollouts consumed"),
]


def t975(df: int) -> float:
    return _T975[df - 1] if df <= len(_T975) else 1.96


def mean_interval(values: list[float | None]) -> dict[str, Any]:
    """{"mean", "low", "high", "n"}: the mean of the non-null values and its 95% t-interval (None where n < 2).

    >>> mean_interval([0.2, 0.4, 0.6])["low"] < 0.4 < mean_interval([0.2, 0.4, 0.6])["high"]
    True
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return {"mean": mean, "low": None, "high": None, "n": 1}
    half = t975(len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": len(xs)}


@dataclass
class RunData:
    root: Path
    seed: int
    settings: dict[str, Any]                       # every config key as "section.key" -> value, run.seed left out
    mode: str
    metrics: dict[int, dict[str, Any]]             # epoch -> metrics.json
    heldout: dict[int, float] = field(default_factory=dict)    # epoch -> held-out success (0: the base model)
    rollouts: dict[int, int] = field(default_factory=dict)     # epoch -> rollouts consumed through that epoch


def flat_settings(cfg: Any) -> dict[str, Any]:
    """Every config key as "section.key" -> value: what decides whether two runs belong to one arm."""
    return {f"{sec}.{k}": v for sec, keys in cfg.to_dict().items() for k, v in keys.items()}


ARM_KEYS = ("env.mode", "agent.mode")  # what an arm is (its name), not a difference to flag


def arm_mode(cfg: Any) -> str:
    """What an arm is named by: its `env.mode`, and "agent frozen" when the agent is never trained."""
    return cfg.env.mode + (" (agent frozen)" if cfg.agent.mode == "frozen" else "")


def read_run(path: Path) -> RunData:
    from genenv_cli.report import read_evals, read_metrics

    run = RunDir(path)
    if not run.config_path.is_file():
        raise InputError(f"{path}: not a genenv run (no genenv.toml). Pass run directories made by `genenv init`.")
    cfg = run.load_config()
    settings = flat_settings(cfg)
    seed = settings.pop("run.seed")
    metrics = {e: m for e in run.epochs() if (m := read_metrics(run, e, cfg)) is not None}
    data = RunData(path, seed, settings, arm_mode(cfg), metrics)
    total = 0
    for e in sorted(metrics):
        total += metrics[e].get("rollouts") or 0
        data.rollouts[e] = total
    base = cfg.agent.model
    from genenv_cli.stages.evaluate import model_tag

    for ev in read_evals(run):
        if ev["bench"] != "heldout" or ev["value"] is None:
            continue
        if ev["epoch"] is not None:
            data.heldout[ev["epoch"]] = ev["value"] / 100.0
        elif ev["model_tag"] == model_tag(base):
            data.heldout[0] = ev["value"] / 100.0
    return data


@dataclass
class ArmData:
    label: str
    runs: list[RunData]
    settings: dict[str, Any]


def shown_path(path: Path) -> str:
    """A run's path as the page shows it: relative to the current folder when below it (a run read from a record
    committed in the repository shows the same path on every machine), else as given.

    >>> shown_path(Path.cwd() / "results" / "genenv-s1.json")
    'results/genenv-s1.json'
    >>> shown_path(Path("/elsewhere/run"))
    '/elsewhere/run'
    """
    try:
        return Path(path).resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def group_arms(runs: list[RunData]) -> tuple[list[ArmData], list[str]]:
    """Arms (runs equal in every setting but run.seed) and the flags: settings other than env.mode in which
    arms differ, and seeds repeated within an arm."""
    arms: list[ArmData] = []
    for r in runs:
        for a in arms:
            if a.settings == r.settings:
                a.runs.append(r)
                break
        else:
            arms.append(ArmData(r.mode, [r], r.settings))
    flags: list[str] = []
    first: dict[str, ArmData] = {}
    for a in arms:  # a second arm of a mode is named by what sets it apart from the first: "genenv (curriculum.k_min=0.2)"
        if a.label not in first:
            first[a.label] = a
            continue
        ref = first[a.label].settings
        diff = [f"{k}={json.dumps(v)}" for k, v in a.settings.items() if ref.get(k) != v]
        label = f"{a.label} ({', '.join(diff[:3]) + (', …' if len(diff) > 3 else '')})"
        n = 2
        while any(b.label == label for b in arms):  # labels key the arms: never two alike
            label, n = f"{a.label} ({', '.join(diff[:3])}, …#{n})", n + 1
        a.label = label
    flags += departure_flags(arms)
    for a in arms:
        seeds = [r.seed for r in a.runs]
        if len(set(seeds)) < len(seeds):
            flags.append(f"arm '{a.label}' has runs with the same run.seed ({sorted(seeds)}): they are not independent "
                         f"seeds, so its interval is too narrow.")
    return arms, flags


def departure_flags(arms: list[ArmData]) -> list[str]:
    """One flag per arm that departs from the others in a setting besides what names an arm (ARM_KEYS), naming only
    the settings it departs in. The reference value of a setting is the one most arms share (the first arm's on a
    tie), so a page of headline arms and a few departures flags each departure once, not every pair of arms.

    >>> base = {"env.mode": "genenv", "curriculum.k_min": 0.1, "generate.variations": 4}
    >>> arms = [ArmData("genenv", [], base), ArmData("frozen", [], {**base, "env.mode": "frozen"}),
    ...         ArmData("genenv (curriculum.k_min=0.2)", [], {**base, "curriculum.k_min": 0.2})]
    >>> departure_flags(arms)  # doctest: +ELLIPSIS
    ["arm 'genenv (curriculum.k_min=0.2)' differs ... curriculum.k_min 0.2 where most arms have 0.1. ..."]
    """
    keys = sorted({k for a in arms for k in a.settings if k not in ARM_KEYS})
    shown = {k: [json.dumps(a.settings.get(k)) for a in arms] for k in keys}
    common: dict[str, str] = {}
    for k, values in shown.items():
        if len(set(values)) > 1:
            most = max(values.count(v) for v in values)
            common[k] = next(v for v in values if values.count(v) == most)
    others = "the other arm has" if len(arms) == 2 else "most arms have"
    flags = []
    for i, a in enumerate(arms):
        own = [k for k in common if shown[k][i] != common[k]]
        if not own:
            continue
        said = ", ".join(f"{k} {shown[k][i]} where {others} {common[k]}" for k in own[:6])
        more = f" and {len(own) - 6} more" if len(own) > 6 else ""
        flags.append(f"arm '{a.label}' differs from the others in a setting besides {' and '.join(ARM_KEYS)}: "
                     f"{said}{more}. It is drawn as its own arm, not a like-for-like comparison with them.")
    return flags


def arm_series(arm: ArmData, key: str) -> dict[str, Any]:
    """Per epoch, the mean and interval of a metrics.json number over the arm's runs."""
    epochs = sorted({e for r in arm.runs for e in r.metrics})
    rows = [mean_interval([r.metrics.get(e, {}).get(key) for r in arm.runs]) for e in epochs]
    return {"epoch": epochs, **{k: [row[k] for row in rows] for k in ("mean", "low", "high", "n")}}


def arm_heldout(arm: ArmData) -> dict[str, Any]:
    """Held-out success against rollouts consumed: epoch 0 is the base model at 0 rollouts."""
    epochs = sorted({e for r in arm.runs for e in r.heldout})
    rows = [mean_interval([r.heldout.get(e) for r in arm.runs]) for e in epochs]
    x = [mean_interval([0 if e == 0 else r.rollouts.get(e) for r in arm.runs])["mean"] for e in epochs]
    return {"epoch": epochs, "rollouts": x, **{k: [row[k] for row in rows] for k in ("mean", "low", "high", "n")}}


def arm_shape_mix(arm: ArmData) -> dict[str, Any]:
    """Per epoch and shape, the environment's share of tasks of that shape, averaged over the arm's runs that
    have environment tasks that epoch."""
    epochs = sorted({e for r in arm.runs for e in r.metrics})
    shapes = sorted({s for r in arm.runs for m in r.metrics.values() for s in (m.get("env_shape_mix") or {})})
    mix: dict[str, list[float | None]] = {s: [] for s in shapes}
    for e in epochs:
        present = [r.metrics[e]["env_shape_mix"] for r in arm.runs if r.metrics.get(e, {}).get("env_shape_mix")]
        for s in shapes:
            mix[s].append(sum(m.get(s, 0.0) for m in present) / len(present) if present else None)
    return {"epoch": epochs, "mix": mix}


def build_compare(paths: list[Path], out: Path) -> dict[str, Any]:
    """Write the comparison page and its PNGs; returns {"html", "pngs", "arms", "flags", "numbers"}."""
    if not paths:
        raise InputError("compare needs at least one run directory.")
    return render_compare([read_run(Path(p)) for p in paths], out)


def render_compare(runs: list[RunData], out: Path) -> dict[str, Any]:
    """The page for runs already read: from their folders (`read_run`), or rebuilt from what a caller kept of
    them (experiments/curriculum.py draws finished runs from its records once their folders are gone)."""
    from genenv_cli.report import charts as ch

    arms, flags = group_arms(runs)
    out = out.expanduser().resolve()
    if out.is_dir():
        out = out / "compare.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    colors = {a.label: ch.PALETTE[i % len(ch.PALETTE)] for i, a in enumerate(arms)}
    band = None
    bands = {(a.settings.get("curriculum.band_low"), a.settings.get("curriculum.band_high")) for a in arms}
    if len(bands) == 1:
        band = next(iter(bands))

    numbers: dict[str, Any] = {}
    pngs: dict[str, bytes] = {}

    def lines(key: str) -> tuple[list[ch.Arm], dict[str, Any]]:
        arms_out, nums = [], {}
        for a in arms:
            s = arm_series(a, key)
            nums[a.label] = s
            arms_out.append(ch.Arm(a.label, s["epoch"], s["mean"], s["low"], s["high"], colors[a.label]))
        return arms_out, nums

    env_band, n1 = lines("env_batch_band_share")
    task_band, n2 = lines("band_share")
    numbers["in-band"] = {"env_batch_band_share": n1, "band_share": n2}
    pngs["in-band"] = ch.arm_panels([
        ("environment batches with p_batch in the band", env_band, ch.Decor(ylabel="share", percent=True, ylim=(0, 1.02))),
        ("tasks with p_task in the band", task_band, ch.Decor(ylabel="share", percent=True, ylim=(0, 1.02)))])

    mixes = {a.label: arm_shape_mix(a) for a in arms}
    numbers["shape-mix"] = mixes
    pngs["shape-mix"] = ch.shape_mix([(label, m["epoch"], m["mix"]) for label, m in mixes.items()])

    inf, n3 = lines("informative_share")
    numbers["informative"] = n3
    pngs["informative"] = ch.arm_panels([("GRPO groups whose rewards are not all equal", inf,
                                          ch.Decor(ylabel="share", percent=True, ylim=(0, 1.02)))])

    held = {a.label: arm_heldout(a) for a in arms}
    numbers["heldout"] = held
    pngs["heldout"] = ch.arm_panels([("held-out success (greedy)", [
        ch.Arm(label, h["rollouts"], h["mean"], h["low"], h["high"], colors[label]) for label, h in held.items()],
        ch.Decor(ylabel="success", percent=True, ylim=(0, None)))], xlabel="rollouts consumed")

    png_paths = []
    for cid, png in pngs.items():
        p = out.parent / f"{cid}.png"
        p.write_bytes(png)
        png_paths.append(str(p))
    write_text_atomic(out, _page(arms, flags, numbers, pngs, band))
    return {"html": str(out), "pngs": png_paths, "flags": flags,
            "arms": {a.label: [shown_path(r.root) for r in a.runs] for a in arms}, "numbers": numbers}


def _series_table(nums: dict[str, dict[str, Any]], x: str = "epoch", kind: str = "pct") -> str:
    from genenv_cli.report.html import esc, fmt

    rows = []
    for label, s in nums.items():
        for i, e in enumerate(s[x] if x in s else s["epoch"]):
            lo, hi = s["low"][i], s["high"][i]
            interval = f"[{fmt(lo, kind)}, {fmt(hi, kind)}]" if lo is not None else "-"
            xv = fmt(e, "int") if x == "epoch" else f"{fmt(e, 'int') if e is not None else '-'} (epoch {s['epoch'][i]})"
            rows.append(f"<tr><td class=\"row\">{esc(label)}</td><td>{esc(xv)}</td><td>{esc(fmt(s['mean'][i], kind))}"
                        f"</td><td>{esc(interval)}</td><td>{s['n'][i]}</td></tr>")
    head = (f'<tr><th class="row">arm</th><th>{esc(x)}</th><th>mean</th><th>95% interval</th>'
            "<th>runs</th></tr>")
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def _mix_table(mixes: dict[str, dict[str, Any]]) -> str:
    from genenv_cli.report.html import esc, fmt

    rows = []
    for label, m in mixes.items():
        for shape, vals in m["mix"].items():
            rows.append(f'<tr><td class="row">{esc(label)}</td><td class="row">{esc(shape)}</td>'
                        + "".join(f"<td>{esc(fmt(v, 'pct'))}</td>" for v in vals) + "</tr>")
    epochs = sorted({e for m in mixes.values() for e in m["epoch"]})
    if not rows:
        return '<p class="empty">No arm has environment tasks.</p>'
    if any(m["epoch"] != epochs for m in mixes.values()):
        return _mix_table_uneven(mixes)
    head = '<tr><th class="row">arm</th><th class="row">shape</th>' + "".join(f"<th>{e}</th>" for e in epochs) + "</tr>"
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def _mix_table_uneven(mixes: dict[str, dict[str, Any]]) -> str:
    from genenv_cli.report.html import esc, fmt

    rows = [f'<tr><td class="row">{esc(label)}</td><td class="row">{esc(shape)}</td><td>{e}</td>'
            f"<td>{esc(fmt(v, 'pct'))}</td></tr>"
            for label, m in mixes.items() for shape, vals in m["mix"].items() for e, v in zip(m["epoch"], vals, strict=True)]
    head = '<tr><th class="row">arm</th><th class="row">shape</th><th>epoch</th><th>share</th></tr>'
    return f'<div class="scroll"><table>{head}{"".join(rows)}</table></div>'


def _page(arms: list[ArmData], flags: list[str], numbers: dict[str, Any], pngs: dict[str, bytes],
          band: tuple[float, float] | None) -> str:
    from genenv_cli.report.html import CSS, esc, img

    heading = dict(CHARTS)
    band_text = f"[{band[0]:g}, {band[1]:g}]" if band else "the runs' band"
    what = {
        "in-band": f"Left: the share of the environment's task batches whose success rate p_batch lies in {band_text} "
                   "— what the α-curriculum rewards the environment for. Right: the share of all tasks (seeds "
                   "included) whose p_task lies there. Lines are means over an arm's seeds, bands 95% intervals.",
        "shape-mix": "Per arm, the share of each task shape among the environment's tasks, epoch by epoch (mean "
                     "over seeds). An environment that learns to aim moves its mix toward the shapes the agent "
                     "solves about half the time.",
        "informative": "The share of GRPO groups (a task's K rollouts) whose rewards are not all equal: only these "
                       "give the agent a gradient.",
        "heldout": "The agent's greedy success on the domain's held-out validation tasks after each epoch, against "
                   "the agent rollouts consumed so far; 0 rollouts is the base model.",
    }
    tables = {
        "in-band": _series_table(numbers["in-band"]["env_batch_band_share"])
        + _series_table(numbers["in-band"]["band_share"]),
        "shape-mix": _mix_table(numbers["shape-mix"]),
        "informative": _series_table(numbers["informative"]),
        "heldout": _series_table(numbers["heldout"], x="rollouts"),
    }
    arm_rows = "".join(
        f'<tr><td class="row">{esc(a.label)}</td><td>{len(a.runs)}</td>'
        f'<td>{esc(", ".join(str(r.seed) for r in a.runs))}</td>'
        f'<td class="row">{esc(", ".join(shown_path(r.root) for r in a.runs))}</td></tr>' for a in arms)
    parts = ["<header><h1>genenv compare</h1>"
             f"<p>{len(arms)} arm(s) from {sum(len(a.runs) for a in arms)} run(s). Runs equal in every setting but "
             "run.seed form an arm.</p></header>",
             '<section id="arms"><h2>Arms</h2><div class="scroll"><table><tr><th class="row">arm</th><th>runs</th>'
             f'<th>run.seed of each run</th><th class="row">run directories</th></tr>{arm_rows}</table></div></section>']
    parts += [f'<p class="note flag">⚠ {esc(f)}</p>' for f in flags]
    for cid, title in CHARTS:
        parts.append(f'<section id="{cid}"><h2>{esc(heading[cid])}</h2><p class="what">{what[cid]}</p>'
                     f"{img(pngs.get(cid), title)}{tables[cid]}</section>")
    parts.append("<footer>Written by <code>genenv compare</code>. Self-contained: the charts are embedded, and each "
                 "is also saved beside this file as a PNG.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>genenv compare</title><style>{CSS}</style></head>"
            f"<body><main>{''.join(parts)}</main></body></html>\n")
