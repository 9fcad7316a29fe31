"""kvreplay.schema."""
