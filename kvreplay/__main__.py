"""`python -m kvreplay`."""

from kvreplay.cli import exits
from kvreplay.io import signals

signals.install()  # before the CLI's own imports, so that an early Ctrl-C exits quietly too
try:
    from kvreplay.cli.main import entry

    entry()
except signals.STOPS as exc:
    signals.uninstall()
    raise SystemExit(exits.stopped(exc)) from None
