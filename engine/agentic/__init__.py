"""kvreplay.engine.agentic: executing agentic dependency graphs (plays, lanes, lifecycle)."""
