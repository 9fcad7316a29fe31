"""`python -m kvreplay`."""

from kvreplay.cli.main import entry

entry()
