#!/usr/bin/env bash
# Creates the two TRL environments that tools/make_sft_goldens.py runs under (CPU is enough):
#   $DIR/trl-1.16    TRL 1.16.0 (current: common-prefix completion mask), transformers 5.x, torch
#   $DIR/trl-0.25.1  TRL 0.25.1 (the users' version: positional mask), transformers 4.57,
#                    sharing the torch of trl-1.16 through a .pth file (no second 3 GB download)
# Usage: tools/make_trl_venvs.sh [DIR]   (default /work/venv-trl)
set -euo pipefail
DIR=${1:-/work/venv-trl}
PY=${PYTHON:-python3}
mkdir -p "$DIR"
if [ ! -x "$DIR/trl-1.16/bin/python" ]; then
  "$PY" -m venv "$DIR/trl-1.16"
  "$DIR/trl-1.16/bin/pip" install -q "trl==1.16.0" torch datasets xxhash pyarrow
fi
if [ ! -x "$DIR/trl-0.25.1/bin/python" ]; then
  "$PY" -m venv "$DIR/trl-0.25.1"
  site=$("$DIR/trl-1.16/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  own=$("$DIR/trl-0.25.1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$own/zz_torch_from_trl116.pth"  # after the venv's own packages on sys.path
  "$DIR/trl-0.25.1/bin/pip" install -q "trl==0.25.1" "transformers==4.57.*" "datasets<5" \
    "accelerate<1.12" xxhash pyarrow
fi
# DeepSpeed 0.18.2 (the users'), CPU-only, for tools/make_deepspeed_source_goldens.py: transformers'
# HfDeepSpeedConfig and accelerate's DeepSpeedPlugin need the package, not its kernels.
if ! "$DIR/trl-0.25.1/bin/python" -c 'import deepspeed' 2>/dev/null; then
  DS_BUILD_OPS=0 "$DIR/trl-0.25.1/bin/pip" install -q --no-build-isolation "deepspeed==0.18.2"
fi
for v in trl-1.16 trl-0.25.1; do
  "$DIR/$v/bin/python" -c 'import trl, transformers, torch; print(trl.__version__, transformers.__version__, torch.__version__)'
done
