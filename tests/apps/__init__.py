"""Application modules that tests load by import path (include(), the CLI, worker processes)."""
