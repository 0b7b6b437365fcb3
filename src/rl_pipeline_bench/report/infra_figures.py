"""Figures of the Infrastructure section: all-reduce bandwidth vs message size, storage and checkpoint vs targets.

Drawn like the other report figures (bare Figure objects, matplotlib's default style,
no software tag), so the same tables give the same PNG bytes.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.style
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..probes import reference_data
from .figures import _RC, _png
from .files import write_output


def allreduce_png(table: pd.DataFrame) -> bytes:
    """busbw (algbw at world size 1, where busbw is 0 by definition) vs message size, both axes log."""
    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 3.6))
        ax = fig.subplots()
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.15, top=0.9)
        for (label, world), rows in table.groupby(["label", "world_size"], sort=True):
            rows = rows.sort_values("bytes")
            y, what = (rows["busbw_gbps"], "busbw") if world >= 2 else (rows["algbw_gbps"], "algbw (world size 1)")
            keep = y > 0
            ax.plot(rows["bytes"][keep], y[keep], marker="o", markersize=3,
                    label=f"{label}: {rows['backend'].iloc[0]}, {world} rank(s), {what}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("GB/s (10^9 bytes/s)")
        ax.set_title("all-reduce bandwidth vs message size")
        ax.grid(True, which="both", linewidth=0.4, alpha=0.6)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper left", fontsize=7)
        return _png(fig)


def _bars(ax, labels, values, target_key: str, unit: str, log: bool) -> None:
    t = reference_data.target(target_key)
    x = np.arange(len(labels))
    colors = ["#1f7a3a" if reference_data.judge(target_key, v) else "#b42318" for v in values]
    ax.bar(x, values, color=colors)
    ax.axhline(float(t["threshold"]), color="0.2", linestyle="--", linewidth=1,
               label=f"target {reference_data.target_text(target_key)}")
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylabel(unit)
    if log:
        ax.set_yscale("log")
    ax.grid(True, axis="y", linewidth=0.4, alpha=0.6)
    ax.legend(loc="best", fontsize=7)


def _target_panels(table: pd.DataFrame, split: str, panels: tuple[str, str], value: str, label, target: str,
                   unit: str, log: bool, title: str) -> bytes:
    """Two bar panels (one per value of `split`), each against its `{target}_{panel}` target line."""
    with matplotlib.style.context("default"), matplotlib.rc_context(_RC):
        fig = Figure(figsize=(7.5, 3.0))
        axes = fig.subplots(1, 2, squeeze=False).ravel()
        fig.subplots_adjust(left=0.1, right=0.98, bottom=0.2, top=0.88, wspace=0.3)
        for ax, panel in zip(axes, panels):
            rows = table[table[split] == panel]
            _bars(ax, [label(r) for r in rows.itertuples()], rows[value].astype(float).tolist(),
                  f"{target}_{panel}", unit, log)
            ax.set_title(title.format(panel))
        return _png(fig)


def storage_png(table: pd.DataFrame) -> bytes:
    return _target_panels(table, "direction", ("write", "read"), "mb_per_s",
                          lambda r: f"{r.label}\n{r.engine}{'' if r.direct else ' (buffered)'}", "storage",
                          "MB/s (10^6 bytes/s)", False, "sequential {}")


def checkpoint_png(table: pd.DataFrame) -> bytes:
    return _target_panels(table, "operation", ("save", "load"), "seconds", lambda r: f"{r.label}\n{r.item} ({r.device})",
                          "checkpoint", "seconds (log)", True, "checkpoint {} (safetensors)")


def write_figures(tables: dict[str, pd.DataFrame], figures_dir: Path) -> dict[str, bytes]:
    """infra_allreduce.png, infra_storage.png, infra_checkpoint.png for whichever probes are present."""
    figures_dir.mkdir(parents=True, exist_ok=True)
    made = {}
    for name, table, draw in (("infra_allreduce", tables["infra_allreduce"], allreduce_png),
                              ("infra_storage", tables["infra_storage"], storage_png),
                              ("infra_checkpoint", tables["infra_checkpoint"], checkpoint_png)):
        if len(table):
            made[name] = draw(table)
            write_output(figures_dir / f"{name}.png", made[name])
    return made
