"""DataFrames as LaTeX tables (booktabs) that stay inside the text block and where the paper put them.

Every cell is formatted by the caller's per-column formatter (which returns TeX) or shown
as escaped text; missing values print as an em dash, never as `nan`. A cell that begins
with `[` is guarded with `{}`: after `\\\\` or booktabs' `\\midrule` a bracket would be
read as an optional argument (a fatal "Illegal unit" for `[baseline] smoke`, a silently
eaten `[3pt]`). The table is placed here (`[H]`, package float) so a section's tables stay
under its heading, and its tabular is set in the `fittable` environment of paper.tex,
which scales it down only when it is still wider than the line. Output is plain text
with stable content: the same frame gives the same bytes.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

MISSING = "---"


def latex_table(df: pd.DataFrame, columns: Mapping[str, str], *, formats: Mapping[str, Callable] | None = None,
                align: str | None = None, caption: str | None = None, label: str | None = None,
                empty: str = "No rows.", note: str | None = None, small: bool = False) -> str:
    """A `table` environment holding `df[columns]` as a booktabs tabular (or `empty` in its place).

    `columns` maps frame columns to header texts (in order); `formats` maps a column to a
    function of the value giving its TeX (None and NaN print as an em dash first); `note`
    is plain text set under the tabular (said once, not in every row); `small` sets it in
    `\\small` type.
    """
    formats = dict(formats or {})
    head = []
    if caption:
        head.append(f"\\caption{{{escape(caption)}}}")
    if label:
        head.append(f"\\label{{{label}}}")
    tail = [f"\\par\\smallskip{{\\footnotesize\\raggedright {escape(note)}\\par}}"] if note else []
    if df.empty:
        rows = ["\\begin{table}[H]", "\\centering", *head, f"\\emph{{{escape(empty)}}}", *tail, "\\end{table}"]
        return "\n".join(rows) + "\n"
    body = pd.DataFrame({header: [cell_tex(v, formats.get(col)) for v in df[col]]
                         for col, header in columns.items()})
    body.columns = [guard(escape(h)) for h in columns.values()]
    tabular = body.style.hide(axis="index").to_latex(hrules=True, column_format=align or ("l" * len(columns)))
    size = ["\\small"] if small else []
    return "\n".join(["\\begin{table}[H]", "\\centering", *size, *head, "\\begin{fittable}", tabular.rstrip("\n"),
                      "\\end{fittable}", *tail, "\\end{table}"]) + "\n"


def cell_tex(value, fmt: Callable | None = None) -> str:
    """One cell as TeX: the formatter's TeX, or the value as escaped text; missing as an em dash."""
    if _missing(value):
        return MISSING
    return guard(ascii_tex(fmt(value)) if fmt is not None else escape(value))


def guard(tex: str) -> str:
    """`{}` before a leading `[`, which `\\\\` and `\\midrule` would take for their optional argument."""
    return "{}" + tex if tex.startswith("[") else tex


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or v is pd.NA


_SPECIAL = str.maketrans({"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
                          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"})


#: Characters beyond ASCII that pdfLaTeX's default fonts lack, as TeX; any other becomes "?".
_UNICODE = {"≤": r"$\leq$", "≥": r"$\geq$", "×": r"$\times$", "→": r"$\rightarrow$", "–": "--", "—": "---",
            "…": r"\dots{}", "µ": r"$\mu$", "±": r"$\pm$", "·": r"$\cdot$", "’": "'", "‘": "`"}


def ascii_tex(text: str) -> str:
    """TeX that compiles with the minimal TeX Live (no unicode fonts): known symbols mapped, others '?'."""
    if text.isascii():
        return text
    return "".join(c if c.isascii() else _UNICODE.get(c, "?") for c in text)


def escape(text) -> str:
    """Plain text for LaTeX (cells, captions, titles): the ten special characters escaped, ASCII only.

    `<`, `>` and `|` print as themselves because paper.tex uses the T1 font encoding.
    """
    return ascii_tex(str(text).translate(_SPECIAL))
