"""Parameter sweeps: a grid of replays over a base config and traces (docs/sweeps.md)."""
