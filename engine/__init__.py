"""kvreplay.engine."""
