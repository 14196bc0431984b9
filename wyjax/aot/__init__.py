"""Compiling a step for hardware this machine does not have, and predicting what it costs.

accelerators (the table of TPU chips and GPU cards), targets (the devices to compile for), report
(the compile-only report), gpu_program and optimized_hlo (what XLA built for a GPU), gpu_step_time
(the step predictor and its calibration), triton_ir (a Pallas kernel's cost), gemm_table (XLA's
measured GEMM rates).
"""
