"""kvreplay.engine.traces.agentic: agentic traces (Weka plays, Agentic Mooncake v2) and their
dependency graph."""
