"""DeBERTa-v3-base's recipe on Daizhige: pretrain/deberta_base.py's encoder trained by replaced-token detection.

As DeBERTa-v3 (He et al., 2021): a generator of half the depth (6 layers) and the same width learns
MLM and replaces masked characters with its samples; the encoder kept, the discriminator, learns to
tell which of every token were replaced; the two share their word embeddings by gradient-disentangled
embedding sharing (GDES); loss = generator MLM + 50 × discriminator (docs/pretraining.md):

    python -m wyjax.pretrain --config=pretrain/deberta_v3_base.py --workdir=/ckpt/deberta-v3-base \\
        --config.data_dir=/data/daizhige-512
    python -m wyjax.export --workdir=/ckpt/deberta-v3-base --out=/models/deberta-v3-base --verify

The export is a DebertaV2Model folder, as microsoft/deberta-v3-base is: AutoModelForSequenceClassification
and the other task classes load it. The batch, steps and learning rate are deberta_base.py's.

Expected, compiled on a CPU (predictions, not measurements; docs/benchmarks.md, "DeBERTa-base by
replaced-token detection, beside MLM"): for one H200 at 32 × 512, 10.1 GiB of buffers and a calibrated
step of 97.3 ms, 168,418 tokens/s (deberta_base.py's MLM: 6.9 GiB, 64.1 ms); for a v5p-8 at 128 × 512,
7.3 GiB HBM per chip and a roofline of 46.3 ms (MLM: 6.3 GiB, 31.0 ms). The generator's 6 layers make
the step half as long again as MLM's:

    JAX_PLATFORMS=cpu python -m wyjax.pretrain --config=pretrain/deberta_v3_base.py --compile_only=h200 \\
        --config.batch_size=32

Measured on one H200 (docs/benchmarks.md, 2026-12-04): 109.6 ms a step, 149,517 tokens/s, 9.8 GiB
(MLM's step in the same call: 72.3 ms, 226,621 tokens/s), by `python benchmarks/gpu.py --rtd_attentions=auto`.
"""

from wyjax.core import config_files


def get_config():
  config = config_files.load("pretrain/deberta_base.py")
  config.objective = "rtd"  # config.rtd's defaults: DeBERTa-v3's generator, λ and sharing
  return config
