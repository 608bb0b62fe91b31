#!/usr/bin/env bash
# Installs everything zerotune needs on a fresh Debian 12 machine (run as root, or with sudo on PATH):
# the Debian -dev packages of DESIGN.md §10 (and gnuplot-nox, which draws `zerotune compare`'s
# PNG) and a Python virtual environment (.venv) holding the pyarrow wheel, whose bundled Arrow
# C++ headers and libraries are used for parquet.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS="build-essential cmake pkg-config git python3 python3-venv \
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libyaml-cpp-dev libpcre2-dev \
  libutf8proc-dev libfmt-dev libcli11-dev libopenblas-dev libopenmpi-dev openmpi-bin zlib1g-dev libxxhash-dev gnuplot-nox"
missing=""
for p in $PKGS; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
PYARROW_VERSION="${PYARROW_VERSION:-25.0.1}"  # the GPU image's version: its Arrow libraries serve GPU bundles
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import pyarrow, sys; sys.exit(pyarrow.__version__ != '$PYARROW_VERSION')" >/dev/null 2>&1; then
  echo "setup: installing pyarrow==$PYARROW_VERSION into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "pyarrow==$PYARROW_VERSION"
fi
echo "setup: ok (pyarrow $(.venv/bin/python -c 'import pyarrow; print(pyarrow.__version__)'))"
