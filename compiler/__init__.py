"""kvreplay.compiler."""
