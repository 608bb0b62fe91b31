# The GPU machine's environment for the carried bundle (sourced by gpu_check.sh and gpu_ab.sh, with
# ROOT set to the repository root): BUNDLE (default gpu_bundle/) unpacked, its libraries and
# pyarrow's on LD_LIBRARY_PATH, NCCL's multicast off, and the build machine's compiled-in data paths
# linked to the carried files. Sets ZT, SHARED and link_path.
BUNDLE=${BUNDLE:-$ROOT/gpu_bundle}
ZT=$BUNDLE/bin/zerotune
export NCCL_NVLS_ENABLE=0  # never NVLink multicast (shared GPUs)
PA_DIR=$(python3 -c 'import pyarrow, os; print(os.path.dirname(pyarrow.__file__))' 2>/dev/null || true)
export LD_LIBRARY_PATH="$BUNDLE/lib:${PA_DIR}:${LD_LIBRARY_PATH:-}"
# The test binaries were compiled with absolute paths of the build machine (ZT_TEST_DATA,
# ZT_SHARED_DATA): make those paths resolve here (a carried shared_data/ holds the shared files the
# GPU tests and benchmarks read; scripts/gpu_bundle.sh copies them).
link_path() {  # link_path COMPILED_PATH LOCAL_PATH
  [ -e "$1" ] && return 0
  [ -e "$2" ] || return 0  # nothing to link to (a link to it would dangle, or point at itself)
  # A dangling link left by an earlier call on the same machine (one that had no LOCAL_PATH, or a
  # link to itself: "Too many levels of symbolic links") is replaced.
  [ -L "$1" ] && rm -f "$1"
  mkdir -p "$(dirname "$1")" && ln -s "$2" "$1"
}
# gpu_bundle.sh gzips the binaries and the big tokenizers: unpack them once, in place.
find "$BUNDLE" -name '*.gz' -print0 2>/dev/null | while IFS= read -r -d '' z; do
  gzip -df "$z" || { echo "gpu_env.sh: cannot unpack $z" >&2; exit 1; }
done || return 1 2>/dev/null || exit 1
chmod +x "$BUNDLE"/bin/* 2>/dev/null
SHARED=$ROOT/gpu_bundle/shared_data
[ -d "$SHARED" ] || SHARED=$ROOT/../shared/data
if [ -f "$BUNDLE/paths" ]; then
  . "$BUNDLE/paths"  # BUILD_TEST_DATA=… BUILD_SHARED_DATA=…
  link_path "$BUILD_TEST_DATA" "$ROOT/tests/data"
  link_path "$BUILD_SHARED_DATA" "$SHARED"
fi
link_path "$ROOT/../shared/data" "$SHARED"  # the configs' relative ../shared/data paths
true  # the links above are best effort, as before
