from collections.abc import Callable
from typing import Any

Plan = tuple[tuple[tuple[bytes, int, str, str | None], ...], bytes]

def row(record: Any, /) -> str | None: ...
def configure(rows: tuple[Plan, ...], admission_plain: Plan, admission_split: Plan, route: Plan,
              layout: tuple[bytes, bytes, bytes], nested: Callable[[Any], str],
              names: tuple[str, str, str, str, str], /) -> None: ...
