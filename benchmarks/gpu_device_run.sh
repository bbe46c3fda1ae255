#!/usr/bin/env bash
# The two device calls of benchmarks/bench_gpu.py on a lent GPU machine (an H200 with
# 16 cores; see benchmarks/README.md, "bench_gpu.py", and /work/.library/device/README.md).
#
#   bash benchmarks/gpu_device_run.sh bonsai  [bench_gpu.py options, e.g. --quick]
#   bash benchmarks/gpu_device_run.sh xgboost [bench_gpu.py options]
#
# Local preparation, once, in the repository root that the device calls send (the
# session's own checkout: it must hold this script and bonsai/backends/cuda).  The
# wheels are never committed: /.whl/ is in .gitignore (the device README's exclude line
# is then a no-op; in a git worktree the file is $(git rev-parse --git-common-dir)/info/exclude):
#   echo /.whl/ >> "$(git rev-parse --git-common-dir)/info/exclude"
#   P='--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64'
#   python3 -m pip download $P -d .whl/numpy numpy==2.4.6          # 16.6 MB, cp312
#   python3 -m pip download $P -d .whl/xgb xgboost-cu13==3.3.0     # 59.3 MB, py3-none
# (xgboost-cu13 3.3.0 says Requires-Python >=3.12, which the device's python3, 3.12, meets;
# its other needs, scipy and nvidia-nccl-cu13, are in the device image.)
# Each call carries only its own wheel folder: both together (76 MB) are over the 64 MiB
# a call carries, and the xgboost call fits only while the rest of the tree is under ~7 MiB
# (it was 2.5 MB when this was written).  Should the tool refuse a carry path inside
# .whl/, use two top-level folders instead (.whl and .whl-xgb, the second added to the
# exclude file as above) and change the wheel paths below to match.
#
# The run tool's arguments (each command is far under the tool's 2,000 characters):
#   call 1: command "bash benchmarks/gpu_device_run.sh bonsai",  carry [".whl/numpy"], timeout_s 480
#   call 2, at once after call 1 while the machine is warm (30 s; else it starts afresh):
#           command "bash benchmarks/gpu_device_run.sh xgboost", carry [".whl/xgb"],   timeout_s 240
#   then give_back.  Keep call 1's files (bonsai.json, bonsai.log) from its files_at:
#   only the latest call's files can be fetched.  On a cold machine call 2 does not see
#   call 1's JSON: copy it to .whl/xgb/bonsai.json before call 2 (it travels with that
#   carry), or print the table here afterwards:
#     python benchmarks/bench_gpu.py report --bonsai FILES1/bonsai.json --xgboost FILES2/xgboost.json
# bench_gpu.py bonsai stops starting sections after --budget seconds (default 390), so
# call 1 ends inside 8 minutes; with less device time left, pass --quick.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/bench_gpu_out}              # the device tool sets OUT; what it holds comes back
TMP=${BENCH_GPU_TMP:-/tmp}                  # (another folder for a trial run elsewhere)
SITE=$TMP/site                              # the carried numpy
SITE_XGB=$TMP/site-xgb                      # the carried xgboost
KEEP=$TMP/bonsai_gpu                        # outlives a call while the machine stays warm
PIP="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade"
export PYTHONUNBUFFERED=1
mkdir -p "$OUT" "$KEEP"
what=${1:-}
shift || true

case "$what" in
bonsai)
    # numba 0.68 fails on the image's numpy 2.5: the carried numpy 2.4 goes first
    $PIP --target "$SITE" .whl/numpy/*.whl || exit 1
    export PYTHONPATH=$SITE:$PWD
    nvidia-smi || echo "nvidia-smi failed"
    python3 - <<'PY'
import numpy, numba, numba.cuda
from importlib import metadata
try:
    nc = metadata.version("numba-cuda")
except metadata.PackageNotFoundError:
    nc = "not installed (numba's own numba.cuda)"
print("numpy", numpy.__version__, "numba", numba.__version__, "numba-cuda", nc)
numba.cuda.detect()
PY
    timeout 450 python3 benchmarks/bench_gpu.py bonsai --out "$OUT/bonsai.json" "$@" 2>&1 \
        | tee "$OUT/bonsai.log"
    rc=${PIPESTATUS[0]}
    cp -f "$OUT/bonsai.json" "$KEEP/" 2>/dev/null
    exit "$rc"
    ;;
xgboost)
    # XGBoost runs on the image's numpy; on a warm machine call 1's numpy 2.4 is still
    # in $SITE and is used instead, so both calls generate the data with one numpy
    # (both JSONs hold a digest of the data; the report says if they differ)
    $PIP --target "$SITE_XGB" .whl/xgb/*.whl || exit 1
    if [ -d "$SITE/numpy" ]; then export PYTHONPATH=$SITE_XGB:$SITE; else export PYTHONPATH=$SITE_XGB; fi
    nvidia-smi -L || echo "nvidia-smi failed"
    python3 -c 'import numpy, xgboost; print("numpy", numpy.__version__, "xgboost", xgboost.__version__, "CUDA build", xgboost.build_info().get("USE_CUDA"))'
    bj=""
    for f in "${BONSAI_JSON:-}" "$KEEP/bonsai.json" .whl/xgb/bonsai.json; do
        if [ -n "$f" ] && [ -f "$f" ]; then bj=$f; break; fi
    done
    if [ -z "$bj" ]; then echo "no bonsai.json of call 1 found: no ratio in this call"; fi
    timeout 220 python3 benchmarks/bench_gpu.py xgboost --out "$OUT/xgboost.json" \
        --bonsai-json "${bj:-none}" "$@" 2>&1 | tee "$OUT/xgboost.log"
    rc=${PIPESTATUS[0]}
    if [ -n "$bj" ]; then
        cp -f "$bj" "$OUT/bonsai.json"      # this call's files then hold both runs
        python3 benchmarks/bench_gpu.py report --bonsai "$bj" --xgboost "$OUT/xgboost.json" \
            2>&1 | tee "$OUT/report.txt"
    fi
    exit "$rc"
    ;;
*)
    echo "usage: bash benchmarks/gpu_device_run.sh bonsai|xgboost [bench_gpu.py options]" >&2
    exit 2
    ;;
esac
