"""kvreplay.rules."""
