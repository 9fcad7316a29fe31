"""The HTML report needs no network: no URL it would fetch, a policy that forbids fetching,
and its script library shipped inside the package."""

from __future__ import annotations

from importlib import resources

import pytest
from html_support import NO_G2, example_report, fetched_urls

from kvreplay.html import render_html
from kvreplay.html.page import CSP, asset


def test_the_scanner_finds_what_it_looks_for() -> None:
    """Each pattern catches its case (so the tests below can fail)."""
    samples = ['<script src="https://cdn.example/x.js">', "<link href='//fonts.example/a.css'>",
               "body{background:url(https://x/y.png)}", '@import "https://x/y.css";',
               'fetch("https://x/api")', 'import("https://x/m.js")',
               'import x from "https://x/m.js"', "xhr.open('GET', 'https://x/')"]
    for sample in samples:
        assert fetched_urls(sample), sample
    assert not fetched_urls('<a title="see https://example.org">')


@pytest.mark.parametrize("name", ["kv-router-mooncake", "shared-g2-aggregated"])
def test_no_url_is_fetched(name: str) -> None:
    """The page of an example run names nothing to load from the network."""
    html = render_html([(name, example_report(name))])
    assert fetched_urls(html) == []
    assert "<script src" not in html and "<link" not in html


def test_overlay_page_is_offline_too() -> None:
    """Two runs overlaid: still nothing to fetch."""
    html = render_html([("g2", example_report("shared-g2-aggregated")),
                        ("plain", example_report("shared-g2-aggregated", NO_G2))])
    assert fetched_urls(html) == []


def test_the_page_forbids_fetching() -> None:
    """A Content-Security-Policy refuses any load but the inline scripts and styles."""
    html = render_html([("x", {"summary": {}})])
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in html
    assert "default-src 'none'" in CSP and "connect-src 'none'" in CSP


def test_the_library_ships_inline_with_its_license() -> None:
    """uPlot and its license are package data, and the page inlines the library whole."""
    folder = resources.files("kvreplay.html") / "assets"
    assert "MIT License" in (folder / "uPlot.LICENSE").read_text(encoding="utf-8")
    library = asset("uPlot.iife.min.js")
    assert library.startswith("/*! https://github.com/leeoniya/uPlot (v1.6.32) */")
    assert library in render_html([("x", {"summary": {}})])
