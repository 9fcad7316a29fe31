"""kvreplay.engine.traces."""
