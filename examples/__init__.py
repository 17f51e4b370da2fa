"""Runnable examples: a worker app whose tasks live in included modules, and a producer."""
