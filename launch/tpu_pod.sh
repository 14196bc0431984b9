#!/usr/bin/env bash
# Run one wyjax command on every worker of a TPU VM pod slice (v4-32, v5p-128, …).
#
#   launch/tpu_pod.sh TPU_NAME ZONE "python -m wyjax.pretrain --config=pretrain/deberta_base.py \
#       --workdir=gs://bucket/deberta-base --config.data_dir=gs://bucket/corpora/daizhige-512"
#
# Every worker runs the same command; jax.distributed.initialize() finds the pod from the TPU
# environment (no flags). Checkpoints, metrics and TensorBoard go to the gs:// workdir; each
# worker copies the prepared corpus's shards from the bucket once (or pass a gcsfuse mount
# point as data_dir). This script syncs the repository first and installs wyjax[tpu] at the
# versions CI tests (constraints.txt: the jax that libtpu is pinned to).
set -euo pipefail
if [[ $# -lt 3 ]]; then
  echo "usage: $0 TPU_NAME ZONE COMMAND" >&2
  exit 2
fi
tpu=$1 zone=$2 command=$3
repo=$(cd "$(dirname "$0")/.." && pwd)

gcloud compute tpus tpu-vm scp --recurse --zone="$zone" --worker=all "$repo" "$tpu":~/ --quiet
gcloud compute tpus tpu-vm ssh "$tpu" --zone="$zone" --worker=all --command="
  set -e
  cd ~/$(basename "$repo")
  python3 -m venv .venv && source .venv/bin/activate
  pip install -q -c constraints.txt -e '.[tpu]'
  $command"
