"""Benchmark tasks: one module per benchmark, everything about a task in its Task (task.py).

registry.py maps names to tasks (docs/architecture.md).
"""
