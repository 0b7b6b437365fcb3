"""The comparison report: tables, figures and one self-contained HTML file, all
derived from run summaries, offered plans and the retained evidence directories."""

from .build import render_report
from .collect import ReportInputError

__all__ = ["render_report", "ReportInputError"]
