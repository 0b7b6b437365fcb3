"""DataFrames as LaTeX tables (booktabs), through pandas' Styler: escaping and rules done by pandas.

Every cell is formatted by the caller's per-column formatter or shown as text; missing
values print as an em dash, never as `nan`. Output is plain text with sorted, stable
content: the same frame gives the same bytes.
"""

from __future__ import annotations

from typing import Callable, Mapping

import pandas as pd

MISSING = "---"


def latex_table(df: pd.DataFrame, columns: Mapping[str, str], *, formats: Mapping[str, Callable] | None = None,
                align: str | None = None, caption: str | None = None, label: str | None = None,
                empty: str = "No rows.") -> str:
    """A `table` environment holding `df[columns]` as a booktabs tabular (or `empty` in its place).

    `columns` maps frame columns to header texts (in order); `formats` maps a column to a
    function of the value giving its text (None and NaN print as an em dash first).
    """
    formats = dict(formats or {})
    body = df.loc[:, list(columns)].rename(columns=dict(columns))
    renamed = {columns[k]: f for k, f in formats.items()}
    head = []
    if caption:
        head.append(f"\\caption{{{escape(caption)}}}")
    if label:
        head.append(f"\\label{{{label}}}")
    if body.empty:
        rows = "\n".join(["\\begin{table}[htbp]", "\\centering", *head, f"\\emph{{{escape(empty)}}}", "\\end{table}"])
        return rows + "\n"
    styler = body.style.hide(axis="index").format(na_rep=MISSING, escape="latex").format_index(escape="latex", axis=1)
    for name, fn in renamed.items():
        styler = styler.format(lambda v, fn=fn: MISSING if _missing(v) else fn(v), subset=[name], escape="latex")
    tabular = ascii_tex(styler.to_latex(hrules=True, column_format=align or ("l" * len(columns))))
    return "\n".join(["\\begin{table}[htbp]", "\\centering", *head, tabular.rstrip("\n"), "\\end{table}"]) + "\n"


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


def escape(text: str) -> str:
    """Plain text for LaTeX (captions, titles): the ten special characters escaped, ASCII only."""
    return ascii_tex(str(text).translate(_SPECIAL))
