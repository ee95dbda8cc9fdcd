"""The charts of `genenv report`, drawn with matplotlib's object API (`Figure` + the Agg canvas).

No pyplot: no global figure registry and no GUI backend is ever selected, so the charts render without a
display, from any thread, and leave the process's matplotlib settings alone. matplotlib is imported inside
the functions (the CLI must start fast). Each function takes plain Python lists, with None for a missing
number, and returns PNG bytes. Missing numbers become NaN, so a line breaks there instead of dropping to
0; every point carries a marker so a value between two gaps still shows.
"""

from __future__ import annotations

import functools
import io
import math
from dataclasses import dataclass, field
from typing import Any

DPI = 144
WIDTH = 8.0                 # inches; the HTML shows the images at up to 880 px

BLUE, PURPLE, GREEN, RED, ORANGE, GREY, TEAL = ("#1f6feb", "#8250df", "#2da44e", "#cf222e", "#d4760a",
                                                "#8c959f", "#0f8a8a")
PALETTE = [BLUE, ORANGE, PURPLE, TEAL, RED, "#9a6700", "#bf3989", "#4d7c0f"]  # no grey: a baseline is grey
SEED_COLOR, ENV_COLOR = "#b6bec8", BLUE

STYLE = {
    "font.size": 9, "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "axes.spines.top": False, "axes.spines.right": False,
    "axes.grid": True, "grid.color": "#d0d7de", "grid.linewidth": 0.6, "axes.axisbelow": True,
    "axes.edgecolor": "#57606a", "legend.frameon": False, "figure.facecolor": "white",
}


@dataclass
class Series:
    label: str
    values: list[Any]
    color: str = BLUE
    linestyle: str = "-"
    marker: str = "o"
    x: list[Any] | None = None       # default: the chart's epochs
    linewidth: float = 1.8
    zorder: int = 3


@dataclass
class Decor:
    """What a time-series chart draws besides its series."""
    ylabel: str = ""
    percent: bool = False            # values are fractions, shown as %
    ylim: tuple[float | None, float | None] | None = None
    hlines: list[tuple[float, str, str]] = field(default_factory=list)   # (y, label, color)
    band: tuple[float, float] | None = None                               # shaded [low, high]
    markers: list[tuple[float, float, str]] = field(default_factory=list)  # (x, y, label): red rings


def styled(fn: Any) -> Any:
    """Run a chart function under the report's rcParams (restored afterwards)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        import matplotlib

        with matplotlib.rc_context(STYLE):
            return fn(*args, **kw)
    return wrapper


def _nan(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _figure(nrows: int = 1, ncols: int = 1, height: float = 3.3, width: float = WIDTH, **kw: Any) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return buf.getvalue()


def _int_xaxis(ax: Any, xs: list[float]) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(max(len(set(xs)), 2), 12)))
    if xs:
        ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    ax.set_xlabel("epoch")


def _no_data(ax: Any, text: str = "no data yet") -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color=GREY, fontsize=10)


def _draw_series(ax: Any, epochs: list[int], series: list[Series], decor: Decor) -> bool:
    """Draw onto one axes; returns whether any value was finite. An epoch where every series is missing
    is labelled "n/a" at the foot of the plot."""
    from matplotlib.ticker import PercentFormatter

    if decor.band is not None:
        lo, hi = decor.band
        ax.axhspan(lo, hi, color=GREEN, alpha=0.10, lw=0, label=f"band [{lo:g}, {hi:g}]", zorder=0)
    for y, label, color in decor.hlines:
        ax.axhline(y, color=color, linestyle="--", linewidth=1.1, label=label, zorder=2)
    any_value = False
    xs_all: list[float] = list(epochs)
    own = [s for s in series if s.x is None]
    for s in series:
        xs = s.x if s.x is not None else epochs
        ys = [_nan(v) for v in s.values]
        any_value |= any(math.isfinite(y) for y in ys)
        xs_all += list(xs)
        ax.plot(xs, ys, color=s.color, linestyle=s.linestyle, marker=s.marker, markersize=4.5,
                linewidth=s.linewidth, label=s.label, zorder=s.zorder)
    for k, (x, y, label) in enumerate(decor.markers):
        ax.plot([x], [y], linestyle="none", marker="o", markersize=12, markerfacecolor="none",
                markeredgewidth=1.8, color=RED, label=label if k == 0 else "_nolegend_", zorder=5)
    if decor.percent:
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    if decor.ylim is not None:
        lo, hi = decor.ylim
        if lo is not None and hi is not None:   # a little room so a point on the edge is not cut in half
            lo, hi = lo - 0.03 * (hi - lo), hi + 0.03 * (hi - lo)
        ax.set_ylim(bottom=lo, top=hi)
    if decor.ylabel:
        ax.set_ylabel(decor.ylabel)
    _int_xaxis(ax, xs_all)
    if not any_value:
        _no_data(ax)
    elif own:
        for i, e in enumerate(epochs):
            if all(s.values[i] is None for s in own):
                ax.text(e, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", va="bottom",
                        color=GREY, fontsize=7.5)
    return any_value


def _legend_if_several(ax: Any, **kw: Any) -> None:
    labels = [lab for lab in ax.get_legend_handles_labels()[1] if not lab.startswith("_")]
    if len(labels) > 1:
        ax.legend(**kw)


@styled
def timeseries(epochs: list[int], series: list[Series], decor: Decor, title: str = "", height: float = 2.9) -> bytes:
    """One panel of per-epoch lines (legend, when there is more than one entry, outside on the right)."""
    fig, axes = _figure(height=height)
    ax = axes[0][0]
    _draw_series(ax, epochs, series, decor)
    if title:
        ax.set_title(title, loc="left")
    _legend_if_several(ax, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return _png(fig)


@styled
def panels(epochs: list[int], items: list[tuple[str, list[Series], Decor]], height: float = 3.0) -> bytes:
    """Side-by-side panels, each with its own title and y scale."""
    fig, axes = _figure(1, len(items), height=height)
    for ax, (title, series, decor) in zip(axes[0], items, strict=True):
        _draw_series(ax, epochs, series, decor)
        ax.set_title(title, loc="left")
        _legend_if_several(ax, loc="best")
    return _png(fig)




@styled
def histograms(items: list[dict[str, Any]], title: str = "") -> bytes:
    """Small multiples: one histogram of task p-hat per epoch, stacked seed/env, band shaded, alpha dashed.

    items: [{"epoch", "p_task": [...], "source": [...], "band": (lo, hi), "edges": [...], "in_band": int}]"""
    n = len(items)
    ncols = min(n, 4)
    nrows = math.ceil(n / ncols)
    fig, axes = _figure(nrows, ncols, height=1.15 + 1.75 * nrows, sharex=True, sharey=True)
    for i, it in enumerate(items):
        ax = axes[i // ncols][i % ncols]
        lo, hi = it["band"]
        ax.axvspan(lo, hi, color=GREEN, alpha=0.13, lw=0, zorder=0, label=f"band [{lo:g}, {hi:g}]")
        seed = [p for p, s in zip(it["p_task"], it["source"], strict=True) if s == "seed"]
        env = [p for p, s in zip(it["p_task"], it["source"], strict=True) if s != "seed"]
        ax.hist([seed, env], bins=it["edges"], stacked=True, rwidth=0.85, color=[SEED_COLOR, ENV_COLOR],
                label=["seed tasks", "environment tasks"], edgecolor="white", linewidth=0.5, zorder=2)
        ax.axvline(it["alpha"], color=RED, linestyle="--", linewidth=1.1, label=f"α = {it['alpha']:g}", zorder=3)
        total = len(it["p_task"])
        head = (f"epoch {it['epoch']}: {it['in_band']}/{total} in band ({100 * it['in_band'] / total:.0f}%)" if total
                else f"epoch {it['epoch']}: no tasks")
        ax.set_title(head, loc="left", fontsize=9, color=RED if it["in_band"] == 0 else "#24292f")
        ax.set_xlim(-0.05, 1.05)
        if i % ncols == 0:
            ax.set_ylabel("tasks")
        if i // ncols == nrows - 1 or i + ncols >= n:
            ax.set_xlabel("task p̂ (successes / K)")
            ax.xaxis.set_tick_params(labelbottom=True)
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels))
    if title:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return _png(fig)


@styled
def evals(groups: list[dict[str, Any]], epochs: list[int], title: str = "") -> bytes:
    """One panel per benchmark: headline score per epoch for each (protocol, metric); references (evals
    of a model outside the run, epoch null) as dashed horizontal lines.

    groups: [{"bench", "series": [{"label", "x": [...], "y": [...]}], "refs": [{"label", "value"}]}]"""
    n = len(groups)
    ncols = min(n, 3)
    nrows = math.ceil(n / ncols)
    legend_rows = max(len(g["series"]) + len(g["refs"]) for g in groups)
    fig, axes = _figure(nrows, ncols, height=nrows * (2.9 + 0.17 * legend_rows) + 0.3)
    for i, g in enumerate(groups):
        ax = axes[i // ncols][i % ncols]
        xs_all: list[float] = [x for s in g["series"] for x in s["x"]] + list(epochs) or [0]
        finite: list[float] = []
        for k, s in enumerate(g["series"]):
            ys = [_nan(v) for v in s["y"]]
            finite += [y for y in ys if math.isfinite(y)]
            ax.plot(s["x"], ys, marker="o", markersize=4.5, linewidth=1.8, color=PALETTE[k % len(PALETTE)],
                    label=s["label"], zorder=3)
        for k, r in enumerate(g["refs"]):
            if r["value"] is None:
                continue
            finite.append(float(r["value"]))
            ax.axhline(r["value"], color=["#57606a", "#a371f7", "#bc4c00", "#1a7f37"][k % 4], linestyle="--",
                       linewidth=1.1, label=r["label"], zorder=2)
        _int_xaxis(ax, xs_all)
        top = max(finite, default=0.0)
        ax.set_ylim(0, min(top * 1.08, 102) if top > 0 else 1)   # from 0, with room above the highest point
        ax.set_title(g["bench"], loc="left")
        ax.set_ylabel("score (%)")
        if not finite:
            _no_data(ax)
        if ax.get_legend_handles_labels()[0]:   # under the panel, where it hides no line
            ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.2), fontsize=7.5)
    for j in range(n, nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    if title and n > 1:
        fig.suptitle(title, x=0.01, ha="left", fontsize=10)
    return _png(fig)


@dataclass
class Arm:
    """One arm of a comparison: a mean line with a shaded interval (across seeds) at each x."""
    label: str
    x: list[float]
    mean: list[Any]
    low: list[Any]
    high: list[Any]
    color: str = BLUE


MAX_BANDS = 3  # arms one panel overlays; with more, one panel per arm (small multiples)


@dataclass
class Panel:
    """One panel of small multiples: a title and the arms it overlays (at most MAX_BANDS)."""
    title: str
    arms: list[Arm]


@styled
def arm_grid(panels: list[Panel], decor: Decor, xlabel: str = "epoch", zero_line: bool = False,
             ncols: int = 3) -> bytes:
    """Small multiples in rows of up to `ncols`, one y scale for all (so panels compare at a glance): each panel
    overlays its arms, a mean line and its interval shaded, and never more than MAX_BANDS of them. `zero_line`
    draws y = 0 in every panel (for differences: an interval that crosses it is no difference)."""
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    if any(len(p.arms) > MAX_BANDS for p in panels):
        raise ValueError(f"a panel overlays at most {MAX_BANDS} arms")
    import textwrap

    n = max(len(panels), 1)
    ncols = min(n, ncols)
    nrows = math.ceil(n / ncols)
    single = n == 1
    fig, axes = _figure(nrows, ncols, height=(3.1 if single else 0.5 + 2.5 * nrows), sharey=True)
    flat = [ax for row in axes for ax in row]
    finite: list[float] = []
    for ax, panel in zip(flat, panels, strict=False):
        if zero_line:
            ax.axhline(0.0, color="#24292f", linewidth=1.0, zorder=2, label="_zero")
        any_value = False
        for arm in panel.arms:
            ys = [_nan(v) for v in arm.mean]
            lo, hi = [_nan(v) for v in arm.low], [_nan(v) for v in arm.high]
            finite += [v for v in ys + lo + hi if math.isfinite(v)]
            any_value |= any(math.isfinite(y) for y in ys)
            ax.fill_between(arm.x, lo, hi, color=arm.color, alpha=0.2, lw=0, zorder=1)
            ax.plot(arm.x, ys, color=arm.color, marker="o", markersize=3.5, linewidth=1.7, label=arm.label, zorder=3)
        xs = [x for arm in panel.arms for x in arm.x]
        if xlabel == "epoch":
            _int_xaxis(ax, xs)
        else:
            ax.set_xlabel(xlabel)
        if not any_value:
            _no_data(ax, "none of these runs records it")
        ax.set_title(textwrap.fill(panel.title, 46 if single else 34), loc="left", fontsize=9)
        if decor.percent and zero_line:  # a difference of shares, in percentage points
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{100 * v:+.0f}" if v else "0"))
        elif decor.percent:
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        if len(panel.arms) > 1:
            ax.legend(loc="best", fontsize=7)
    for ax in flat[len(panels):]:
        ax.set_visible(False)
    for i, ax in enumerate(flat[:len(panels)]):
        if i % ncols == 0:
            ax.set_ylabel(decor.ylabel)
    if decor.ylim is not None:
        flat[0].set_ylim(*decor.ylim)
    elif zero_line and finite:  # differences: symmetric about zero, so the sign reads at a glance
        top = max(abs(v) for v in finite) * 1.08 or 1.0
        flat[0].set_ylim(-top, top)
    return _png(fig)


def _legend_entries(axes: Any) -> dict[str, Any]:
    """label -> handle over several panels, first seen first, hidden labels ("_...") left out."""
    entries: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            if not label.startswith("_"):
                entries.setdefault(label, handle)
    return entries


@styled
def shape_mix(items: list[tuple[str, list[int], dict[str, list[float]]]], title: str = "") -> bytes:
    """One panel per arm: the share of each shape among the environment's tasks per epoch (mean over seeds),
    stacked, so a panel reads as the mix moving across epochs."""
    import textwrap

    from matplotlib import colormaps
    from matplotlib.ticker import PercentFormatter

    shapes = sorted({s for _, _, mix in items for s in mix})
    many = colormaps["tab20"]  # past the palette's 8 colours, two shapes must not share one
    colors = {s: PALETTE[i] if len(shapes) <= len(PALETTE) else many(i % 20) for i, s in enumerate(shapes)}
    n = max(len(items), 1)
    ncols = min(n, 3)  # at most three panels a row: more made each too narrow to read
    nrows = math.ceil(n / ncols)
    fig, axes = _figure(nrows, ncols, height=0.6 + 2.6 * nrows)
    panels = [ax for row in axes for ax in row]
    for ax, (label, epochs, mix) in zip(panels, items, strict=False):
        if not mix or not epochs:
            _no_data(ax, "no environment tasks")
        else:
            bottom = [0.0] * len(epochs)
            for s in shapes:
                vals = [v or 0.0 for v in mix.get(s, [0.0] * len(epochs))]
                ax.bar(epochs, vals, bottom=bottom, color=colors[s], label=s, width=0.7)
                bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
            _int_xaxis(ax, epochs)
            ax.set_ylim(0, 1.02)
            ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
        ax.set_title(textwrap.fill(label, 40), loc="left", fontsize=9)  # arm names with their settings are long
    for ax in panels[len(items):]:
        ax.set_visible(False)
    if shapes:
        handles = _legend_entries(panels)
        fig.legend([handles[s] for s in shapes if s in handles], [s for s in shapes if s in handles],
                   loc="outside right upper")
    if title:
        fig.suptitle(title, x=0.01, ha="left")
    return _png(fig)
