#!/usr/bin/env bash
# The batch-throughput goal, on the CPU it runs on (it was set on a 2-core AMX Xeon): 20x the fp32 teacher's
# throughput in batches of 32 at a test mean retention of at least 97% over three seeds. Three steps, each reusing
# what an earlier run of this script finished (run it again after an interruption):
#
#   1. compress search --minimize throughput --batch-shape bucketed --min-retention 0.97 --budget $BUDGET: the chain
#      the search finds, each candidate on the runtime fastest in bucketed batches;
#   2. compress compare of the teacher, distilbert+prune, distilbert+prune+int8 and that chain, each quantization
#      choosing its runtime by throughput in bucketed batches, over $SEEDS seeds: test retention with intervals over
#      seeds and sentences, and throughput in bucketed batches;
#   3. benchmarks/batch_shapes.py: the teacher on every runtime and those runs' models (seed 13) in one process, at
#      real-length, padded and bucketed batches of 32, each against the fp32 teacher in PyTorch at the same shape.
#
#   benchmarks/throughput_goal.sh [OUT]      # default OUT: runs/throughput-goal; BUDGET (90m), SEEDS (3), THREADS (2)
#
# OUT holds search/, compare/, batch_shapes.txt and batch_shapes.json; the teacher and data come from compress's
# cache (COMPRESS_CACHE), as any compress command's do.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/throughput-goal}
BUDGET=${BUDGET:-90m}
SEEDS=${SEEDS:-3}
THREADS=${THREADS:-2}
PY=${PYTHON:-.venv/bin/python}
COMPRESS=${COMPRESS:-.venv/bin/compress}
mkdir -p "$OUT"

"$COMPRESS" search --minimize throughput --batch-shape bucketed --min-retention 0.97 --budget "$BUDGET" \
    --threads "$THREADS" --out "$OUT/search"
chosen=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["chosen"] or "")' "$OUT/search/search.json")
methods="distilbert+prune,distilbert+prune+int8"
if [ -n "$chosen" ]; then
    methods="$methods,$chosen"
else
    echo "the search chose nothing (see $OUT/search/search.md): comparing the two references only" >&2
fi
# Trained on the training sentences the search trained on (it held twice the dev split out for selecting), so the
# runs its finals made are found in the run store, not made again.
held=$("$PY" -c 'from compress.data.load import load_task; print(2 * len(load_task("mr").splits["dev"]))')
"$COMPRESS" compare --methods "$methods" --choose-by throughput --batch-shape bucketed --seeds "$SEEDS" \
    --hold-out "$held" --threads "$THREADS" --out "$OUT/compare"
runs=()
while IFS= read -r run; do runs+=(--run "$run"); done < <("$PY" - "$OUT/compare" <<'EOF'
import json
import sys
from pathlib import Path

from compress.runs.compare import run_dir_of

out = Path(sys.argv[1])
for row in json.loads((out / "comparison.json").read_text())["methods"]:
    run = run_dir_of(out, row["method"], 13)
    if (run / "metrics.json").is_file():
        print(run)
EOF
)
"$PY" benchmarks/batch_shapes.py --threads "$THREADS" "${runs[@]}" --json "$OUT/batch_shapes.json" \
    | tee "$OUT/batch_shapes.txt"
