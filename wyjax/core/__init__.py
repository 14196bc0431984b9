"""What train and hf both use, below every other layer.

Checkpoint layout, run config, metric writer, storage and cache paths, the compilation cache, the
machine's memory, logs, config files, partitioning, optimizer, guards, value ranges, the paths a
command reads and writes (docs/architecture.md).
"""
