"""kvreplay.formats."""
