"""The kvreplay release (pyproject's version): written into every report and part of the rules
cache key. kvreplay.__version__ re-exports it; the layers below the application read it here."""

VERSION = "0.1.0"
