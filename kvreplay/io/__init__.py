"""The application's atomic outputs and its signal handling (shared by the CLI and the sweeps)."""
