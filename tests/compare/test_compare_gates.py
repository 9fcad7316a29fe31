"""The gate grammar: FIGURE OP THRESHOLD, absolute or relative (%), and its errors."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kvreplay.compare import Gate, GateError, compare_reports, evaluate_gates, parse_gate


@pytest.mark.parametrize(("text", "gate"), [
    ("mean_ttft_ms > +5%", Gate("mean_ttft_ms > +5%", "mean_ttft_ms", ">", 5.0, True)),
    ("prefix_cache_reused_ratio<-0.01",
     Gate("prefix_cache_reused_ratio<-0.01", "prefix_cache_reused_ratio", "<", -0.01, False)),
    (" g2_transfers.h2d_blocks >= 1e3 ",
     Gate("g2_transfers.h2d_blocks >= 1e3", "g2_transfers.h2d_blocks", ">=", 1000.0, False)),
    ("p99_ttft_ms <= .5%", Gate("p99_ttft_ms <= .5%", "p99_ttft_ms", "<=", 0.5, True)),
])
def test_gates_parse(text: str, gate: Gate) -> None:
    """Signs, exponents, a leading dot, dotted figures and spacing are read."""
    assert parse_gate(text) == gate


@pytest.mark.parametrize("text", ["mean_ttft_ms", "mean_ttft_ms = 5", "> 5", "x > 5%%",
                                  "x > five", "x >> 5", "x > 1e999"])
def test_bad_gates_are_usage_errors(text: str) -> None:
    """A gate outside the grammar names the grammar."""
    with pytest.raises(GateError, match=r"FIGURE OP THRESHOLD|finite"):
        parse_gate(text)


@pytest.mark.parametrize("text", ["mean_ttft_ms > \uff15", "mean_ttft_ms > \u0665%",
                                  "mean_ttft_ms > 1\u0e50", "mean_ttft_ms\u3000> 5"])
def test_non_ascii_digits_are_refused(text: str) -> None:
    """A full-width 5, U+FF15 (or an Arabic-Indic or Thai digit, an ideographic space) is not read
    as 5: the gate is refused, naming the character."""
    with pytest.raises(GateError, match=r"FIGURE OP THRESHOLD.*U\+[0-9A-F]{4} .* is not ASCII"):
        parse_gate(text)


def _with(report: dict[str, Any], **figures: float) -> dict[str, Any]:
    changed = copy.deepcopy(report)
    changed["summary"].update(figures)
    return changed


@pytest.mark.parametrize(("gate", "new", "tripped"), [
    ("mean_ttft_ms > +5%", 105.0, False),     # exactly +5% is not above it
    ("mean_ttft_ms > +5%", 105.5, True),
    ("mean_ttft_ms >= +5%", 105.0, True),
    ("mean_ttft_ms > 4", 104.5, True),        # absolute: +4.5 ms
    ("mean_ttft_ms < -10%", 89.0, True),
    ("mean_ttft_ms < -10%", 91.0, False),
])
def test_gate_verdicts(base_report: dict[str, Any], gate: str, new: float,
                       tripped: bool) -> None:
    """The change (absolute, or percent of |base|) is compared with the threshold by OP."""
    base = _with(base_report, mean_ttft_ms=100.0)
    comparison = compare_reports(base, _with(base_report, mean_ttft_ms=new))
    assert evaluate_gates(comparison, [parse_gate(gate)])[0].tripped is tripped


def test_relative_gate_from_zero_is_infinite(base_report: dict[str, Any]) -> None:
    """From 0, any increase trips a `> +N%` gate (the change is +infinity percent)."""
    comparison = compare_reports(_with(base_report, max_itl_ms=0.0),
                                 _with(base_report, max_itl_ms=0.5))
    result = evaluate_gates(comparison, [parse_gate("max_itl_ms > +1000%")])[0]
    assert result.tripped and result.change == float("inf")


def test_unknown_figure_suggests_the_nearest(base_report: dict[str, Any]) -> None:
    """A misspelt figure is a usage error with a did-you-mean."""
    comparison = compare_reports(base_report, base_report)
    with pytest.raises(GateError, match="did you mean `mean_ttft_ms`"):
        evaluate_gates(comparison, [parse_gate("mean_tfft_ms > 1%")])


def test_figure_missing_from_one_report(base_report: dict[str, Any]) -> None:
    """A figure only NEW has (goodput needs an SLA) cannot be gated: the side is named."""
    comparison = compare_reports(base_report, _with(base_report, goodput_completed_requests=3))
    with pytest.raises(GateError, match="not in the BASE report"):
        evaluate_gates(comparison, [parse_gate("goodput_completed_requests < 0")])


def test_text_figure_cannot_be_gated(base_report: dict[str, Any]) -> None:
    """`kv_eviction_policy` is a string: gating it is a usage error."""
    comparison = compare_reports(base_report, base_report)
    with pytest.raises(GateError, match="not a number"):
        evaluate_gates(comparison, [parse_gate("kv_eviction_policy > 0")])
