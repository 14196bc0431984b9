"""Benchmark tasks: everything about a task lives in its Task (task.py), one module per
benchmark; registry.py maps names to tasks (docs/architecture.md)."""
