#!/usr/bin/env bash
# Issue 41's wall-clock and CPU comparisons in one go, for a quiet host (docs/performance.md, "Many
# cores"): this tree against 55def41 (before issue 41) and 55b55f4 (the release one worker is held
# to), each a worktree with its own venv, all runs interleaved (bench/paired.py). About 25 minutes
# on 2 cores. Usage, from the repository root:
#     bash bench/issue41.sh [RUNS] [OUT_DIR]
set -euo pipefail
RUNS=${1:-5}
OUT=${2:-/tmp/slm4ie-issue41}
HERE=$(pwd)
mkdir -p "$OUT"

tree() {  # a worktree of COMMIT under $OUT, with its venv
    local commit=$1 dir=$OUT/tree-$1
    if [ ! -d "$dir" ]; then
        git worktree add --detach "$dir" "$commit" >/dev/null
        (cd "$dir" && make venv >/dev/null)
    fi
    echo "$dir"
}
BEFORE=$(tree 55def41)
RELEASE=$(tree 55b55f4)
PY=$HERE/.venv/bin/python

# 1. What a range costs: 150 MB of text in 1, 4 and 8 MiB ranges, one worker and two, against one
#    unsplit worker (per range: the CPU over the unsplit run's, divided by the ranges added).
$PY -m bench.paired --trees "new=$HERE,before=$BEFORE" --runs "$RUNS" --data "$OUT/data" --out "$OUT/per-range.md" \
    --configs text:150:1:0:1,text:150:1:1:1,text:150:1:4:1,text:150:1:8:1,text:150:1:1:2,text:150:1:4:2,text:150:1:8:2

# 2. Two workers never slower than one, one worker as fast as before: 300 MB of text, one worker
#    unsplit, one and two workers in the default ranges (8 MiB now; 32 MiB at 55def41; at 55b55f4
#    a size from the worker count).
$PY -m bench.paired --trees "new=$HERE,before=$BEFORE,release=$RELEASE" --runs "$RUNS" --data "$OUT/data" \
    --out "$OUT/text-300.md" --configs text:300:1:0:1,text:300:1:default:1,text:300:1:default:2

# 3. The same bytes: bench.output_hashes' variants in this tree and at 55def41.
for variant in "--workers 1" "--workers 2" "--workers 1 --split-bytes 200000" "--workers 2 --split-bytes 200000" \
               "--fan-out 3"; do
    name=$(echo "$variant" | tr -d ' -')
    for pair in "new:$HERE" "before:$BEFORE"; do
        (cd "${pair#*:}" && .venv/bin/python -m bench.output_hashes $variant --data "$OUT/hash-inputs" \
            --out "$OUT/hashes-${pair%%:*}-$name.txt" >/dev/null)
    done
    if cmp -s "$OUT/hashes-new-$name.txt" "$OUT/hashes-before-$name.txt"; then
        echo "output_hashes $variant: identical"
    else
        echo "output_hashes $variant: DIFFERENT (diff $OUT/hashes-new-$name.txt $OUT/hashes-before-$name.txt)"
    fi
done
echo "tables: $OUT/per-range.md $OUT/text-300.md"
echo "the worktrees made here: git worktree remove --force $BEFORE; git worktree remove --force $RELEASE"
