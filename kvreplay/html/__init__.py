"""The self-contained HTML report of one or more replay reports, and the page of a sweep's
results folder (docs/report-html.md, docs/sweeps.md)."""

from kvreplay.html.columns import ReportShapeError
from kvreplay.html.data import data_json, page_data
from kvreplay.html.page import render_html
from kvreplay.html.sweep_data import pareto_front, sweep_data
from kvreplay.html.sweep_page import render_sweep_html

__all__ = ["ReportShapeError", "data_json", "page_data", "pareto_front", "render_html",
           "render_sweep_html", "sweep_data"]
