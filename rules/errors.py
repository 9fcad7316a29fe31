"""Problems in rule files: where (file:line:col), what, and for syntax errors what was expected."""

from __future__ import annotations

import attrs


@attrs.frozen
class Problem:
    file: str
    line: int
    column: int
    message: str
    expected: tuple[str, ...] = ()  # the exact tokens the parser would have accepted
    context: str | None = None  # the offending line with a caret under the column

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}:{self.column}: {self.message}"
        if self.expected:
            text += "\n  expected one of: " + ", ".join(self.expected)
        if self.context:
            text += "\n" + self.context
        return text


class RuleFileError(Exception):
    """One or more rule files are malformed: a syntax error, or names/types that do not resolve."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems, key=lambda p: (p.file, p.line, p.column, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))
