"""kvreplay.cli."""
