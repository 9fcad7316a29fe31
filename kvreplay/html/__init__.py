"""The self-contained HTML report of one or more replay reports (docs/report-html.md)."""

from kvreplay.html.columns import ReportShapeError
from kvreplay.html.data import data_json, page_data
from kvreplay.html.page import render_html

__all__ = ["ReportShapeError", "data_json", "page_data", "render_html"]
