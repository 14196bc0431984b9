"""Fused attention kernels (Pallas): disentangled_attention for TPUs, disentangled_attention_gpu for GPUs."""
