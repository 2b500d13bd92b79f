#!/usr/bin/env bash
# Mutation testing (cargo-mutants) of the checkers, the engine's dispatch and redelivery code and
# the strategies: each file with the test set that should catch its mutants, a score per file.
# docs/testing.md says how to read the result.
#
#   scripts/mutants.sh                     every target (hours on 2 cores; see docs/testing.md)
#   scripts/mutants.sh FILE...             these files only (e.g. strategies/src/single.rs)
#   scripts/mutants.sh --shard 0/8 FILE    one eighth of a file's mutants (a sample)
#   scripts/mutants.sh --re 'fn touch' FILE  only mutants whose name matches
#   scripts/mutants.sh --diff main FILE... only mutants in lines changed since `main`
#   scripts/mutants.sh --ci                a fixed third of the checkers' mutants (every third,
#                                          `--shard 0/3` round-robin; `--shard` overrides), --fast
#   scripts/mutants.sh --fast FILE         test builds at opt-level 0 (the same verdicts, builds
#                                          several times faster on a loaded machine)
#
# Every mode exits 1 if a mutant survives that is not in docs/mutants-equivalent.txt.
# Options: --jobs N (cargo-mutants -j, default 1), --timeout S (per test run, default 120),
# --out DIR (default target/mutants; its run*/ are replaced). Needs `cargo install --locked cargo-mutants`.
# --fast builds the tests at opt-level 0 (CARGO_PROFILE_TEST_OPT_LEVEL=0; the workspace's test
# profile is opt-level 2) into target/mutants-build-fast: a strategy mutant's build is the
# strategies crate's, and optimising it is most of a mutant's time.
# It runs on a copy of the working tree (uncommitted changes included), so you can keep editing;
# It builds into target/mutants-build (MUTANTS_TARGET_DIR to change it), never the tree's own;
# MUTANTS_COPY (default target/mutants-tree) names the copy: two runs at once need two copies,
# two target directories and two --out directories.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

ci=false
fast=false
jobs=1
timeout=120
out="$root/target/mutants"
extra=()
files=()
diff_base=
while [ $# -gt 0 ]; do
    case "$1" in
        --ci) ci=true; fast=true ;;
        --jobs) jobs="$2"; shift ;;
        --timeout) timeout="$2"; shift ;;
        --out) out="$2"; shift ;;
        --shard) extra+=(--shard "$2" --sharding round-robin); shift ;;
        --re) extra+=(--re "$2"); shift ;;
        --diff) diff_base="$2"; shift ;;
        --fast) fast=true ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        -*) echo "unknown option $1" >&2; exit 2 ;;
        *) files+=("$1") ;;
    esac
    shift
done

checkers=(sim/src/checkers/mod.rs sim/src/checkers/latency.rs sim/src/checkers/anomaly.rs)
engine=(sim/src/engine/broker.rs sim/src/engine/redelivery.rs)
strategies=()
for f in strategies/src/*.rs; do
    [ "$f" = strategies/src/lib.rs ] || strategies+=("$f")
done
if $ci; then
    files=("${checkers[@]}")
    case " ${extra[*]} " in
        *" --shard "*) ;;
        *) extra+=(--shard 0/3 --sharding round-robin) ;;
    esac
elif [ ${#files[@]} -eq 0 ]; then
    files=("${checkers[@]}" "${engine[@]}" "${strategies[@]}")
fi

# The test set that should catch a file's mutants, as "packages|test target|test name filters":
# the checkers' hand-built histories; a strategy's own unit tests (its module's `tests`); for the
# engine's dispatch and redelivery code (the engine crate has no engine-level unit tests), every
# strategy's tests, which run the engine. The producer's sends and resends are pinned by the
# integration tests of tests/producer.rs and tests/resend.rs: one build of the cli's slow
# integration binary per mutant (1-2 minutes each with --fast), so it is named only explicitly.
tests_for() {
    case "$1" in
        sim/src/engine/producer.rs) echo "--test-package ordsim|--test=integration|producer:: resend::" ;;
        sim/src/engine/*) echo "--test-package ordsim-strategies --test-package ordsim-sim|--lib|" ;;
        sim/src/checkers/*) echo "--test-package ordsim-sim|--lib|checkers::" ;;
        strategies/src/*) echo "--test-package ordsim-strategies|--lib|$(basename "$1" .rs)::" ;;
        *) echo "no test set for $1" >&2; exit 2 ;;
    esac
}

command -v cargo-mutants >/dev/null || {
    echo "cargo-mutants is not installed: cargo install --locked cargo-mutants" >&2
    exit 2
}

# A copy of the working tree, mutated in place there (the original is never touched).
# (a fixed path, so that its builds stay fresh from one run to the next)
copy="${MUTANTS_COPY:-$root/target/mutants-tree}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
rm -rf "$out"/run*
# Only files whose content differs are written (with a new mtime): cargo then rebuilds what
# changed, and never trusts a build of a mutated file older than the original's mtime.
python3 - "$root" "$copy" <<'EOF'
import os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
skip = {"target", ".git", "out"}
seen = set()
for d, dirs, names in os.walk(src):
    rel = os.path.relpath(d, src)
    dirs[:] = [x for x in dirs if not (rel == "." and x in skip) and x != "target"]
    for n in names:
        r = os.path.normpath(os.path.join(rel, n))
        seen.add(r)
        a, b = os.path.join(src, r), os.path.join(dst, r)
        data = open(a, "rb").read()
        if not os.path.exists(b) or open(b, "rb").read() != data:
            os.makedirs(os.path.dirname(b), exist_ok=True)
            with open(b, "wb") as f:
                f.write(data)
            shutil.copymode(a, b)
for d, dirs, names in os.walk(dst):
    rel = os.path.relpath(d, dst)
    dirs[:] = [x for x in dirs if not (rel == "." and x in skip) and x != "target"]
    for n in names:
        if os.path.normpath(os.path.join(rel, n)) not in seen:
            os.remove(os.path.join(d, n))
EOF
if [ -n "$diff_base" ]; then
    git -C "$root" diff "$diff_base" > "$out/changes.diff"
    extra+=(--in-diff "$out/changes.diff")
fi
# The copy builds into its own target directory: sharing the tree's would let a later `cargo
# test` in the tree take the last mutant's build for up to date.
if $fast; then
    export CARGO_PROFILE_TEST_OPT_LEVEL=0
    export CARGO_TARGET_DIR="${MUTANTS_TARGET_DIR:-$root/target/mutants-build-fast}"
else
    export CARGO_TARGET_DIR="${MUTANTS_TARGET_DIR:-$root/target/mutants-build}"
fi

# One cargo-mutants run per test set (files sharing one run share its build).
declare -A groups=()
for f in "${files[@]}"; do
    [ -f "$f" ] || { echo "no such file: $f" >&2; exit 2; }
    t="$(tests_for "$f")"
    groups["$t"]+=" --file $f"
done

# One job mutates the copy in place (its builds reuse CARGO_TARGET_DIR); more jobs need one copy
# of the tree per job, which cargo-mutants makes (each with its own first, full build).
if [ "$jobs" = 1 ]; then parallel="--in-place"; else parallel="--jobs $jobs"; fi

start=$(date +%s)
status=0
i=0
for t in $(printf "%s\n" "${!groups[@]}" | tr " " "@" | sort); do
    t="${t//@/ }"
    i=$((i + 1))
    dir="$out/run$i"
    rm -rf "$dir"
    packages="${t%%|*}"
    rest="${t#*|}"
    target="${rest%%|*}"
    filter="${rest#*|}"
    # shellcheck disable=SC2086 # word splitting of the option lists is intended
    (cd "$copy" && cargo mutants $parallel --no-shuffle --timeout "$timeout" \
        --output "$dir" $packages ${groups[$t]} "${extra[@]}" \
        --cargo-arg="$target" -- $filter) || status=$?
    # cargo-mutants: 0 all caught, 2 some missed, 3 some timed out; anything else is a failure.
    case $status in 0|2|3) status=0 ;; *) echo "cargo mutants failed ($status)" >&2; exit $status ;; esac
done
elapsed=$(( $(date +%s) - start ))

# Scores per file: caught (a test failed) + timeouts (a test hung) over all viable mutants.
python3 - "$out" "$elapsed" <<'EOF'
import collections, glob, os, sys
out, elapsed = sys.argv[1], int(sys.argv[2])
score = collections.defaultdict(collections.Counter)
for kind in ("caught", "missed", "timeout", "unviable"):
    for p in glob.glob(os.path.join(out, "run*", "mutants.out", kind + ".txt")):
        for line in open(p):
            if line.strip():
                score[line.split(":", 1)[0]][kind] += 1
print(f"{'file':45} {'caught':>7} {'viable':>7} {'missed':>7} {'timeout':>7} {'unviable':>8}")
for f in sorted(score):
    c = score[f]
    viable = c["caught"] + c["missed"] + c["timeout"]
    print(f"{f:45} {c['caught'] + c['timeout']:>7} {viable:>7} {c['missed']:>7} {c['timeout']:>7} {c['unviable']:>8}")
print(f"elapsed {elapsed // 60}m{elapsed % 60:02}s; missed mutants: {out}/run*/mutants.out/missed.txt")
EOF

# Survivors not judged equivalent (docs/mutants-equivalent.txt, compared without line:column,
# as a multiset: two equivalent mutants with one description allow two survivors).
python3 - "$out" "$root/docs/mutants-equivalent.txt" <<'EOF' || status=1
import collections, glob, os, re, sys
out, listed = sys.argv[1], sys.argv[2]
norm = lambda s: re.sub(r"^([^:]+):\d+:\d+: ", r"\1: ", s.strip())
allowed = collections.Counter()
for line in open(listed):
    line = line.split(" # ", 1)[0].strip()
    if line:
        allowed[norm(line)] += 1
bad = []
for p in sorted(glob.glob(os.path.join(out, "run*", "mutants.out", "missed.txt"))):
    for line in open(p):
        if line.strip():
            k = norm(line)
            if allowed[k] > 0:
                allowed[k] -= 1
            else:
                bad.append(line.strip())
for b in bad:
    print("SURVIVED (not listed as equivalent):", b)
sys.exit(1 if bad else 0)
EOF
if $ci && [ $status -ne 0 ]; then
    echo "mutants: a mutant of the checkers survived; add a test that kills it, or list it in docs/mutants-equivalent.txt with why" >&2
fi
exit $status
