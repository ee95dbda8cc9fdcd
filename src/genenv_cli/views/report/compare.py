"""The arms `genenv compare` draws (`actions/compare.py` says what its page shows): each run read, runs equal but
for `run.seed` grouped into an arm (named by `--label` or by its settings), each arm's baseline, the flags on arms
that are not like-for-like, and the numbers: per epoch an arm's mean with its 95% t-interval over seeds, and the
arm minus its baseline (paired by seed where it can be) with the interval of that difference."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.rundir import RunDir

# Student's t 0.975 quantiles by degrees of freedom: a 95% interval over a handful of seeds needs t, not 1.96,
# and these 30 numbers are all we need of scipy (which the project does not depend on)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042]

CHARTS: list[tuple[str, str]] = [
    ("in-band", "Environment batches in the band"),
    ("task-band", "Tasks in the band"),
    ("informative", "Informative GRPO groups"),
    ("heldout", "Held-out success"),
    ("shape-mix", "The environment's shape mix"),
]
# the claims: a chart id -> (metrics.json key, or "heldout" for the evaluation), the panel's title
CLAIMS: dict[str, tuple[str, str]] = {
    "in-band": ("env_batch_band_share", "environment batches with p_batch in the band"),
    "task-band": ("band_share", "tasks with p_task in the band"),
    "informative": ("informative_share", "GRPO groups whose rewards are not all equal"),
    "heldout": ("heldout", "held-out success (greedy)"),
}


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
    label: str | None = None                       # the arm's name given by the caller (`--label`), if any


def flat_settings(cfg: Any) -> dict[str, Any]:
    """Every config key as "section.key" -> value: what decides whether two runs belong to one arm."""
    return {f"{sec}.{k}": v for sec, keys in cfg.to_dict().items() for k, v in keys.items()}


ARM_KEYS = ("env.mode", "agent.mode")  # what an arm is (its name), not a difference to flag


def arm_mode(cfg: Any) -> str:
    """What an arm is named by: its `env.mode`, and "agent frozen" when the agent is never trained."""
    return cfg.env.mode + (" (agent frozen)" if cfg.agent.mode == "frozen" else "")


def read_run(path: Path) -> RunData:
    from genenv_cli.views.report import read_evals, read_metrics

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
    from genenv_cli.rundir.evalfiles import model_tag

    sizes: dict[int, int] = {}
    for ev in read_evals(run):  # `genenv evaluate`'s and eval-agent's; of two for one epoch, the one over more items
        if ev["bench"] != "heldout" or ev["value"] is None:
            continue
        epoch = ev["epoch"] if ev["epoch"] is not None else 0 if ev["model_tag"] == model_tag(base) else None
        if epoch is not None and (ev["n"] or 0) >= sizes.get(epoch, 0):
            data.heldout[epoch], sizes[epoch] = ev["value"] / 100.0, ev["n"] or 0
    return data


@dataclass
class ArmData:
    label: str
    runs: list[RunData]
    settings: dict[str, Any]
    named: bool = False  # labelled by the caller, not by its settings


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
    """Arms and the flags: settings other than env.mode in which arms differ, and seeds repeated within an arm.

    Runs equal in every setting but run.seed form an arm. A label (`RunData.label`) given to any run of it names the
    arm; runs given different labels are different arms (two versions of the code run with one config, say), so a
    group of equal settings whose runs carry several labels must label every run. One label naming runs of
    different settings is an error: an arm is never a mixture the caller did not see."""
    groups: list[list[RunData]] = []
    for r in runs:
        for g in groups:
            if g[0].settings == r.settings:
                g.append(r)
                break
        else:
            groups.append([r])
    arms: list[ArmData] = []
    for g in groups:
        labels = list(dict.fromkeys(r.label for r in g if r.label))
        if len(labels) > 1 and any(not r.label for r in g):
            unnamed = ", ".join(shown_path(r.root) for r in g if not r.label)
            raise InputError(f"compare: runs with equal settings carry different labels ({', '.join(labels)}), so "
                             f"which arm {unnamed} belongs to is unclear; give it a --label too.")
        if len(labels) <= 1:
            arms.append(ArmData(labels[0] if labels else g[0].mode, g, g[0].settings, named=bool(labels)))
        else:
            arms += [ArmData(lab, [r for r in g if r.label == lab], g[0].settings, named=True) for lab in labels]
    named: dict[str, ArmData] = {}
    for a in arms:
        if a.named and a.label in named:
            raise InputError(f"compare: the label '{a.label}' names runs whose settings differ "
                             f"({', '.join(shown_path(r.root) for r in named[a.label].runs[:1] + a.runs[:1])} differ "
                             f"in {', '.join(differing(named[a.label].settings, a.settings)[:4])}); an arm holds runs "
                             f"equal but for run.seed. Give them different labels.")
        if a.named:
            named[a.label] = a
    flags: list[str] = []
    first: dict[str, ArmData] = {}
    for a in arms:  # a second arm of a mode is named by what sets it apart from the first: "genenv (curriculum.k_min=0.2)"
        if a.named:
            continue
        if a.label not in first and a.label not in named:
            first[a.label] = a
            continue
        ref = (first.get(a.label) or named[a.label]).settings
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


def differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The settings two runs disagree on."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def baselines_of(arms: list[ArmData], given: list[str] | dict[str, str] | None) -> dict[str, str]:
    """Arm label -> its baseline's label, for every arm that is compared. `given`: `NAME` (the baseline of every
    other arm) or `ARM=NAME` (of one arm) strings, or such a mapping; nothing given: the first arm is the baseline.
    The baseline of every other arm is not compared with anything itself.

    >>> arms = [ArmData(n, [], {}) for n in ("frozen", "genenv", "static")]
    >>> baselines_of(arms, None)
    {'genenv': 'frozen', 'static': 'frozen'}
    >>> baselines_of(arms, ["static", "genenv=frozen"])
    {'frozen': 'static', 'genenv': 'frozen'}
    """
    labels = [a.label for a in arms]
    pairs: dict[str, str] = {}
    default = labels[0] if labels else None
    items = list(given.items()) if isinstance(given, dict) else [
        tuple(g.split("=", 1)) if "=" in g else (None, g) for g in (given or [])]
    for arm, base in items:
        for name in (arm, base):
            if name is not None and name not in labels:
                raise InputError(f"compare: --baseline names '{name}', which is not an arm here. Arms: "
                                 f"{', '.join(labels)} (name arms with --label RUN=NAME).")
        if arm is None:
            default = base
        elif arm == base:
            raise InputError(f"compare: --baseline {arm}={base} compares an arm with itself.")
        else:
            pairs[arm] = base
    for label in labels:
        if label not in pairs and label != default:
            pairs[label] = default
    return {label: pairs[label] for label in labels if label in pairs}


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


def run_value(run: RunData, key: str, epoch: int) -> float | None:
    """A run's number for a claim at an epoch: a metrics.json key, or "heldout" (held-out success, 0: the base)."""
    return run.heldout.get(epoch) if key == "heldout" else run.metrics.get(epoch, {}).get(key)


def arm_epochs(arm: ArmData, key: str) -> list[int]:
    return sorted({e for r in arm.runs for e in (r.heldout if key == "heldout" else r.metrics)})


def arm_series(arm: ArmData, key: str) -> dict[str, Any]:
    """Per epoch, the mean and interval of a metrics.json number (or "heldout") over the arm's runs."""
    epochs = arm_epochs(arm, key)
    rows = [mean_interval([run_value(r, key, e) for r in arm.runs]) for e in epochs]
    return {"epoch": epochs, **{k: [row[k] for row in rows] for k in ("mean", "low", "high", "n")}}


def arm_heldout(arm: ArmData) -> dict[str, Any]:
    """Held-out success per epoch with the rollouts consumed by then: epoch 0 is the base model at 0 rollouts."""
    series = arm_series(arm, "heldout")
    x = [mean_interval([0 if e == 0 else r.rollouts.get(e) for r in arm.runs])["mean"] for e in series["epoch"]]
    return {**series, "rollouts": x}


def difference(arm: ArmData, base: ArmData, key: str) -> dict[str, Any]:
    """Per epoch, the arm minus its baseline and the 95% interval of that difference: paired by run.seed (the mean
    and t-interval of the per-seed differences) where both arms have the seed once, else unpaired (the difference of
    the means, with the t-interval of the two standard errors combined at the smaller arm's degrees of freedom, a
    conservative Welch). `paired` says which, per epoch; `n` is the number of pairs (or of the smaller arm's runs).

    >>> a = ArmData("a", [RunData(Path("a1"), 1, {}, "", {1: {"x": 0.5}}), RunData(Path("a2"), 2, {}, "", {1: {"x": 0.7}})], {})
    >>> b = ArmData("b", [RunData(Path("b1"), 1, {}, "", {1: {"x": 0.4}}), RunData(Path("b2"), 2, {}, "", {1: {"x": 0.4}})], {})
    >>> d = difference(a, b, "x")
    >>> [round(d["mean"][0], 3), d["paired"][0], d["n"][0]]
    [0.2, True, 2]
    """
    epochs = sorted(set(arm_epochs(arm, key)) & set(arm_epochs(base, key)))
    out: dict[str, list[Any]] = {k: [] for k in ("epoch", "mean", "low", "high", "n", "paired")}
    mine, theirs = _by_seed(arm), _by_seed(base)
    for e in epochs:
        pairs = [(run_value(mine[s], key, e), run_value(theirs[s], key, e)) for s in sorted(set(mine) & set(theirs))]
        pairs = [(x, y) for x, y in pairs if x is not None and y is not None]
        if pairs:
            row, paired = mean_interval([x - y for x, y in pairs]), True
        else:
            row, paired = _unpaired([run_value(r, key, e) for r in arm.runs], [run_value(r, key, e) for r in base.runs]), False
        if row["mean"] is None:
            continue
        out["epoch"].append(e)
        out["paired"].append(paired)
        for k in ("mean", "low", "high", "n"):
            out[k].append(row[k])
    return out


def _by_seed(arm: ArmData) -> dict[int, RunData]:
    """The arm's runs by run.seed; empty when a seed repeats (then nothing is paired: the flags say why)."""
    seeds = {r.seed: r for r in arm.runs}
    return seeds if len(seeds) == len(arm.runs) else {}


def _unpaired(xs: list[float | None], ys: list[float | None]) -> dict[str, Any]:
    a, b = mean_interval(xs), mean_interval(ys)
    if a["mean"] is None or b["mean"] is None:
        return {"mean": None, "low": None, "high": None, "n": 0}
    mean = a["mean"] - b["mean"]
    if a["low"] is None or b["low"] is None:
        return {"mean": mean, "low": None, "high": None, "n": min(a["n"], b["n"])}
    se = math.hypot((a["high"] - a["mean"]) / t975(a["n"] - 1), (b["high"] - b["mean"]) / t975(b["n"] - 1))
    half = t975(min(a["n"], b["n"]) - 1) * se
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": min(a["n"], b["n"])}


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
