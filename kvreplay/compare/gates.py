"""CI gates: `FIGURE OP THRESHOLD`, e.g. `mean_ttft_ms > +5%` or `prefix_cache_reused_ratio <
-0.01`.

FIGURE is a summary key (or a dotted path into a summary object, `g2_transfers.h2d_blocks`); OP
is one of `>`, `>=`, `<`, `<=`; THRESHOLD is a number with an optional sign and an optional `%`.
The gate trips when the change from BASE to NEW, `new - base` (or, with `%`, `(new - base) /
|base|` in percent), compares with THRESHOLD as OP says. From a base of 0 any increase is
+infinity percent and any decrease -infinity.
"""

from __future__ import annotations

import math
import re

import attrs

from kvreplay.compare.model import Comparison, FigureDelta
from kvreplay.io.display import escape_inline

# ASCII only: `\d` would also read a full-width (U+FF15) or an Arabic-Indic digit as a number.
_GATE = re.compile(r"\s*(?P<figure>[A-Za-z_][A-Za-z0-9_.]*)\s*(?P<op>>=|<=|>|<)\s*"
                   r"(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<pct>%?)\s*",
                   re.ASCII)
_OPS = {">": float.__gt__, ">=": float.__ge__, "<": float.__lt__, "<=": float.__le__}
GRAMMAR = "FIGURE OP THRESHOLD, e.g. `mean_ttft_ms > +5%` or `prefix_cache_reused_ratio < -0.01`"


class GateError(ValueError):
    """A gate that cannot be read or evaluated (a usage error, exit 2)."""


@attrs.frozen
class Gate:
    text: str
    figure: str
    op: str
    threshold: float
    relative: bool

    def threshold_text(self) -> str:
        number = f"{self.threshold:+g}"
        return number + "%" if self.relative else number


@attrs.frozen
class GateResult:
    gate: Gate
    base: float
    new: float
    change: float  # new - base, or percent with a relative gate (may be +-inf)
    tripped: bool


def parse_gate(text: str) -> Gate:
    match = _GATE.fullmatch(text)
    if match is None:
        raise GateError(f"cannot read the gate `{escape_inline(text)}`: expected {GRAMMAR}"
                        + _not_ascii(text))
    threshold = float(match["number"])
    if not math.isfinite(threshold):
        raise GateError(f"the gate `{escape_inline(text)}` has no finite threshold")
    return Gate(text=text.strip(), figure=match["figure"], op=match["op"], threshold=threshold,
                relative=bool(match["pct"]))


def _not_ascii(text: str) -> str:
    """Why a gate that looks right is refused: the first character outside ASCII, named."""
    odd = next((ch for ch in text if not ch.isascii()), None)
    if odd is None:
        return ""
    import unicodedata

    name = unicodedata.name(odd, "")
    return (f" (`{escape_inline(odd)}` U+{ord(odd):04X}{' ' + name if name else ''} is not "
            "ASCII: write figures, operators and numbers in ASCII)")


def evaluate_gates(comparison: Comparison, gates: list[Gate]) -> list[GateResult]:
    """Each gate's verdict; GateError for a figure that is unknown (with a did-you-mean), not a
    number, or missing from one report."""
    return [_evaluate(gate, comparison) for gate in gates]


def _evaluate(gate: Gate, comparison: Comparison) -> GateResult:
    figure = comparison.figure(gate.figure)
    text = escape_inline(gate.text)
    if figure is None:
        raise GateError(f"unknown figure `{gate.figure}` in the gate `{text}`; "
                        + _hint(gate.figure, comparison))
    if not (figure.in_base and figure.in_new):
        side = "BASE" if not figure.in_base else "NEW"
        raise GateError(f"the gate `{text}`: `{gate.figure}` is not in the {side} report")
    if not figure.numeric:
        raise GateError(f"the gate `{text}`: `{gate.figure}` is not a number in both "
                        f"reports ({figure.base!r}, {figure.new!r})")
    base, new = float(figure.base), float(figure.new)  # type: ignore[arg-type]
    change = _change(figure, base, new) if gate.relative else new - base
    return GateResult(gate=gate, base=base, new=new, change=change,
                      tripped=_OPS[gate.op](change, gate.threshold))


def _change(figure: FigureDelta, base: float, new: float) -> float:
    relative = figure.relative
    if relative is not None:
        return relative * 100.0
    return math.copysign(math.inf, new - base)


def _hint(name: str, comparison: Comparison) -> str:
    from kvreplay.schema.suggest import nearest

    close = nearest(name, [f.name for f in comparison.figures if f.numeric])
    if close:
        return "did you mean " + " or ".join(f"`{c}`" for c in close) + "?"
    return "the figures are the summary keys `kvreplay compare BASE NEW` lists"
