#!/usr/bin/env bash
# Clone Daizhige v2.0 and prepare it for pretraining, and build WYWEB PUNC from its history books.
#   data/prepare_daizhige.sh /data/daizhige [512]
set -euo pipefail
out=${1:?output folder}
length=${2:-512}
mkdir -p "$out"
if [[ ! -d "$out/daizhigev20" ]]; then
  git clone --depth 1 https://github.com/garychowcmu/daizhigev20 "$out/daizhigev20"
fi
# The repository's top level also holds README.md and 使用须知.md; the corpus is the ten collections.
python -m wyjax.data prepare-corpus --source="daizhige:$out/daizhigev20" \
  --out="$out/prepared-$length" --sequence_length="$length" --max_vocab=22669
python -m wyjax.tasks build-punc --daizhige="$out/daizhigev20" --out="$out/wyweb-punc"
