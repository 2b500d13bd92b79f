#!/usr/bin/env bash
# Compares the full history (`sim run --trace`) of every bundled scenario x strategy between two
# `sim` binaries: the check that a restructuring or an optimisation changed nothing a user sees.
# Usage: scripts/compare-histories.sh OLD_SIM NEW_SIM   (from the repository root)
# Optional: SEEDS="2 3 4" (each run at those seeds, not the file's), ONLY="a b" (those strategies).
set -u
seeds=${SEEDS:-default}; only=" ${ONLY:-} "
A=$1; B=$2; same=0; differ=0; headers=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for f in scenarios/*.toml; do
  for s in $(python3 -c "import tomllib,sys;print(' '.join(tomllib.load(open(sys.argv[1],'rb'))['strategies']))" "$f"); do
   [ "$only" = "  " ] || [[ "$only" == *" $s "* ]] || continue
   for seed in $seeds; do
    arg=(); [ "$seed" = default ] || arg=(--seed "$seed")
    "$A" run "$f" --strategy "$s" "${arg[@]}" --trace "$tmp/a.jsonl" >/dev/null 2>&1
    "$B" run "$f" --strategy "$s" "${arg[@]}" --trace "$tmp/b.jsonl" >/dev/null 2>&1
    # Line 1 is the header (the run's metadata, which a release may extend); the events follow.
    if cmp -s <(tail -n +2 "$tmp/a.jsonl") <(tail -n +2 "$tmp/b.jsonl"); then same=$((same+1)); else differ=$((differ+1)); echo "DIFF $f $s $seed"; fi
    cmp -s <(head -n 1 "$tmp/a.jsonl") <(head -n 1 "$tmp/b.jsonl") || headers=$((headers+1))
   done
  done
done
echo "identical events: $same, different: $differ (headers that differ: $headers)"
[ "$differ" -eq 0 ]
