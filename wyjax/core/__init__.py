"""What train and hf both use, below every other layer: checkpoint layout, run config, metric
writer, storage and cache paths, logs, config files, partitioning, optimizer, guards, AOT
reports, value ranges, the paths a command reads and writes (docs/architecture.md)."""
