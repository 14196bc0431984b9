"""Benchmark tasks: one module per task with its original file format (and, as the
fine-tuning issue lands, its features, head and metric)."""
