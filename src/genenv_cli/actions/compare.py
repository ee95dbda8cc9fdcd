"""`genenv compare RUN [RUN ...]`: several runs on one offline HTML page that answers "does each arm beat its
baseline?".

    genenv compare runs/genenv-s0 runs/genenv-s1 runs/frozen-s0 runs/frozen-s1 --out compare/compare.html
    genenv compare runs/* --label runs/genenv-s0=genenv --label runs/frozen-s0=frozen --baseline frozen

Runs whose settings are equal but for `run.seed` form one **arm**. An arm is named by `--label RUN=NAME` given for
any of its runs (runs with different labels are different arms, whatever their settings), else by its `env.mode`
(with "agent frozen" under `agent.mode = "frozen"`, and a second arm of the same mode also by the settings that set
it apart). Every arm but the baselines is compared with its **baseline**: `--baseline NAME` for all of them,
`--baseline ARM=NAME` for one; by default the first arm given.

For each claim (environment batches in the band, tasks in the band, informative groups, held-out success) the page
shows first the **difference**: the arm minus its baseline, per epoch, with the 95% interval of that difference
(Student's t over seeds; paired by `run.seed` where both arms have the seed, unpaired otherwise) and a zero line,
one panel per arm when there are more than three; then each arm's own numbers, a mean line with its 95% band, in
one panel for up to three arms and otherwise one panel per arm beside its baseline, so no panel holds more than
three bands. Every figure has a table beside it: epochs down, arms across, the mean and its interval in each cell.
The environment's shape mix is drawn per arm.

Arms are meant to differ in `env.mode` alone: when two arms also differ in another setting (a different rollout
budget, another domain), the page and the returned `flags` say so and name the settings, so a run with other
settings is never silently overlaid as if it were comparable. Reads each run's `epochs/NNNN/metrics.json`,
`genenv.toml` and `evals/heldout/*.json`; writes only the page and its PNGs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from genenv_cli.core.errors import InputError
from genenv_cli.core.safefiles import refuse_overlap
from genenv_cli.rundir import write_text_atomic
from genenv_cli.views.report.compare import CHARTS, RunData, baselines_of, group_arms, read_run, shown_path


def build_compare(paths: list[Path], out: Path, labels: list[str] | None = None,
                  baselines: list[str] | None = None) -> dict[str, Any]:
    """Write the comparison page and its PNGs; returns {"html", "pngs", "arms", "baselines", "flags", "numbers"}.
    `labels`: `RUN=NAME` strings naming the arm of a run; `baselines`: see `baselines_of`."""
    if not paths:
        raise InputError("compare needs at least one run directory.")
    runs = [read_run(Path(p)) for p in paths]
    page = Path(out).expanduser()
    page = page / "compare.html" if page.is_dir() else page
    for p in paths:  # the page and its PNGs never land among a run's own files
        refuse_overlap(page, Path(p), "--out", "the comparison page")
    named = run_labels(runs, labels or [])
    for r in runs:
        r.label = named.get(r.root.resolve())
    return render_compare(runs, out, baselines)


def run_labels(runs: list[RunData], labels: list[str]) -> dict[Path, str]:
    """`RUN=NAME` strings -> {the run's resolved folder: NAME}; a RUN that is not one of the runs is an error."""
    known = {r.root.resolve(): r for r in runs}
    out: dict[Path, str] = {}
    for text in labels:
        path, sep, name = text.rpartition("=")
        if not sep or not path or not name.strip():
            raise InputError(f"compare: --label {text!r}: expected RUN=NAME, a run directory given to compare and the "
                             f"name of its arm.")
        where = Path(path).expanduser().resolve()
        if where not in known:
            raise InputError(f"compare: --label {text!r} names {path}, which is not one of the runs compared.")
        out[where] = name.strip()
    return out


def render_compare(runs: list[RunData], out: Path, baselines: list[str] | dict[str, str] | None = None) -> dict[str, Any]:
    """The page for runs already read: from their folders (`read_run`), or rebuilt from what a caller kept of
    them (the experiments draw finished runs from their records once their folders are gone, naming each run's
    arm in `RunData.label` and passing their own baselines)."""
    from genenv_cli.views.report.compare_charts import compare_figures
    from genenv_cli.views.report.compare_page import page

    arms, flags = group_arms(runs)
    pairs = baselines_of(arms, baselines)
    out = out.expanduser().resolve()
    if out.is_dir():
        out = out / "compare.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    bands = {(a.settings.get("curriculum.band_low"), a.settings.get("curriculum.band_high")) for a in arms}
    band = next(iter(bands)) if len(bands) == 1 else None
    numbers, pngs = compare_figures(arms, pairs)

    png_paths = []
    for cid, png in pngs.items():
        p = out.parent / f"{cid}.png"
        p.write_bytes(png)
        png_paths.append(str(p))
    for cid in (name for c, _ in CHARTS for name in (c, f"{c}-diff")):  # an earlier page's charts this one lacks
        if cid not in pngs and (out.parent / f"{cid}.png").is_file():
            (out.parent / f"{cid}.png").unlink()
    table = [{"label": a.label, "seeds": [r.seed for r in a.runs], "paths": [shown_path(r.root) for r in a.runs]}
             for a in arms]
    write_text_atomic(out, page(table, CHARTS, pairs, flags, numbers, pngs, band))
    return {"html": str(out), "pngs": png_paths, "flags": flags, "baselines": pairs,
            "arms": {a.label: [shown_path(r.root) for r in a.runs] for a in arms}, "numbers": numbers}
