"""The report's figures as bytes: completion timelines and offered length ECDFs.

Figures are drawn on bare `Figure` objects (no pyplot state) under matplotlib's
default style and saved as PNG (the HTML report) or vector PDF (the paper) without
software tags or creation dates, so the same data gives the same bytes whatever the
user's matplotlibrc says and whenever it is rebuilt.
"""

from __future__ import annotations

import io
import math

import matplotlib
import matplotlib.style
import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from ..contract.settings import ContractSettings
from .collect import OFFERED_QUANTITIES, Run, offered_lengths

DPI = 100
_LINESTYLES = ("-", "--", ":", "-.")
_RC = {"svg.hashsalt": "rl-bench-report", "font.size": 9, "axes.titlesize": 9}

#: The paper's text width (templates/paper.tex.j2: \textwidth 6.3in): a PDF figure is drawn at that width,
#: so the sizes below are the sizes in print (an 11 in figure scaled to the line printed 9 pt as 5 pt).
PAPER_WIDTH_IN = 6.3


def _geometry(fmt: str) -> dict:
    """Figure width (in), a timeline row's height (in) and font sizes (pt) for the HTML (PNG) or the paper (PDF)."""
    if fmt == "pdf":
        return {"width": PAPER_WIDTH_IN, "row": 2.5, "offered_height": 2.1, "font": 8, "small": 7,
                "rc": {**_RC, "font.size": 8, "axes.titlesize": 8.5, "xtick.labelsize": 7, "ytick.labelsize": 7}}
    return {"width": 11, "row": 3.3, "offered_height": 2.5, "font": 8, "small": 7, "rc": _RC}


#: savefig metadata that leaves out everything that varies between builds or versions.
_FIXED_METADATA = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None}}
#: Above this many trials of one backend in one workload, its runs are drawn as one
#: line collection with one legend entry (a legend entry per trial cost a fifth of a
#: 1000-run report's rendering).
TRIALS_DRAWN_ONE_BY_ONE = 8


def save(fig: Figure, fmt: str = "png") -> bytes:
    """The figure as PNG or PDF bytes, reproducibly (no software tag, no date)."""
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=DPI, metadata=_FIXED_METADATA[fmt])
    return buf.getvalue()


def _png(fig: Figure) -> bytes:
    return save(fig, "png")


def _backend_colors(backends: list[str]) -> dict[str, str]:
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    return {b: cycle[i % len(cycle)] for i, b in enumerate(backends)}


def _draw_many(ax, runs: list[Run], backend: str, color: str) -> None:
    """All trials of one backend in one collection: valid ones solid, invalid ones dashed."""
    for valid, style in ((True, "-"), (False, "--")):
        lines = [np.column_stack([r.updates.update.astype(float), r.updates.completed_at])
                 for r in runs if (r.summary.get("valid") is True) is valid and r.updates is not None and len(r.updates)]
        if lines:
            label = f"{backend}: {len(lines)} {'valid' if valid else 'INVALID'} trials"
            ax.add_collection(LineCollection(lines, colors=color, linestyles=style, linewidths=0.7, alpha=0.6,
                                             label=label))
    ax.autoscale_view()


def timelines_figure(runs: list[Run], workloads: list[str], backends: list[str], fmt: str = "png") -> bytes:
    """completed_at vs update per workload, one line per backend/trial, windows shaded."""
    g = _geometry(fmt)
    with matplotlib.style.context("default"), matplotlib.rc_context(g["rc"]):
        colors = _backend_colors(backends)
        ncols = 2 if len(workloads) > 1 else 1
        nrows = max(1, math.ceil(len(workloads) / ncols))
        width, height = g["width"], g["row"] * nrows
        fig = Figure(figsize=(width, height))
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
        # fixed margins in inches: constrained layout costs seconds per render
        fig.subplots_adjust(left=0.7 / width, right=1 - 0.2 / width, bottom=0.55 / height, top=1 - 0.3 / height,
                            wspace=0.18 if fmt != "pdf" else 0.3, hspace=0.42 if fmt != "pdf" else 0.6)
        for ax, w in zip(axes, workloads):
            cell = [r for r in runs if r.key[0] == w]
            shaded = False
            for r in cell:
                settings = None if shaded else ContractSettings.recorded(r.summary.get("contract") or {})
                if settings is not None:
                    # each window opens at the completion of the update before its first
                    first, last = settings.measured_window
                    ax.axvspan(first - 1, last, color="0.92", zorder=0, label="measured window")
                    first, last = settings.headline_window
                    ax.axvspan(first - 1, last, color="#cfe3f7", zorder=0, label="headline window")
                    shaded = True
            by_backend: dict[str, list[Run]] = {}
            for r in cell:
                by_backend.setdefault(r.key[1], []).append(r)
            for b, trials in by_backend.items():
                if len(trials) > TRIALS_DRAWN_ONE_BY_ONE:
                    _draw_many(ax, trials, b, colors.get(b, "k"))
            for r in cell:
                if r.updates is None or not len(r.updates) or len(by_backend[r.key[1]]) > TRIALS_DRAWN_ONE_BY_ONE:
                    continue
                _, b, t = r.key
                valid = r.summary.get("valid") is True
                ax.plot(r.updates.update, r.updates.completed_at, color=colors.get(b, "k"),
                        linestyle=_LINESTYLES[(t - 1) % len(_LINESTYLES)], marker="o" if valid else "x",
                        markersize=3, label=f"{b} trial {t}" + ("" if valid else " (INVALID)"))
            if not any(r.updates is not None and len(r.updates) for r in cell):
                ax.text(0.5, 0.5, "no update evidence", transform=ax.transAxes, ha="center", va="center")
            ax.set_title(w)
            ax.set_xlabel("update")
            ax.set_ylabel("completed_at (s since run start)" if fmt != "pdf" else "completed_at (s)")
            ax.xaxis.get_major_locator().set_params(integer=True)
            ax.grid(True, linewidth=0.4, alpha=0.6)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="upper left", fontsize=g["small"], framealpha=0.9)
        for ax in axes[len(workloads):]:
            ax.set_visible(False)
        return save(fig, fmt)


def offered_figure(plan, workload: str, fmt: str = "png") -> bytes:
    """ECDFs of one workload's offered prompt, completion, tool observation and schema lengths."""
    lengths = offered_lengths(plan)
    g = _geometry(fmt)
    with matplotlib.style.context("default"), matplotlib.rc_context(g["rc"]):
        width, height = g["width"], g["offered_height"]
        fig = Figure(figsize=(width, height))
        axes = fig.subplots(1, len(OFFERED_QUANTITIES), squeeze=False).ravel()
        fig.subplots_adjust(left=0.6 / width, right=1 - 0.2 / width, bottom=0.5 / height, top=1 - 0.45 / height,
                            wspace=0.22 if fmt != "pdf" else 0.35)
        for ax, (q, label) in zip(axes, OFFERED_QUANTITIES):
            x = lengths[q]
            # four panels share the paper's line: each title on two lines, in the small size
            title = label if fmt != "pdf" else label.replace(" (", "\n(")
            ax.set_title(title, fontsize=g["font"] if fmt != "pdf" else g["small"])
            ax.set_xlabel("tokens")
            ax.grid(True, linewidth=0.4, alpha=0.6)
            if not len(x) or not np.any(x):
                ax.text(0.5, 0.5, "none offered" if not len(x) else "all zero (none offered)",
                        transform=ax.transAxes, ha="center", va="center")
                ax.set_xticks([])
                ax.set_yticks([])
                continue
            ax.ecdf(x, color="C0")
            med = float(np.median(x))
            ax.axvline(med, color="C3", linestyle="--", linewidth=0.8)
            ax.text(0.97, 0.05, f"n={len(x)}\nmedian={med:g}", transform=ax.transAxes, ha="right",
                    va="bottom", fontsize=g["small"])
            ax.set_ylim(0, 1.02)
        axes[0].set_ylabel("fraction ≤ x")
        return save(fig, fmt)


def write_offered_figure(plan, workload: str, path) -> None:
    """The plan rule's figure output: drawn once per plan, embedded by every report rebuild."""
    from pathlib import Path

    from .files import write_output

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_output(path, offered_figure(plan, workload, "png"))
