#!/usr/bin/env bash
# Checks `sim trace`'s timeline.html in a real browser: runs `sim trace` on the failover scenario,
# loads the page in headless Chromium, fails on any console message (an uncaught error, a
# console.error) or if the page's script did not finish (it sets <body data-ready="yes"> last),
# and saves a screenshot. Installs nothing.
# Usage: scripts/check-timeline.sh [SIM] [OUT_DIR] [PAGE]   (from the repository root)
#   SIM      the sim binary (default: target/release/sim, built if missing)
#   OUT_DIR  where timeline.html, timeline.png and the browser's logs go (default: a new temp dir)
#   PAGE     check this HTML file instead of generating one (to prove the check fails on a bad page)
set -euo pipefail
cd "$(dirname "$0")/.."
BROWSER=${CHROMIUM:-chromium}
if ! command -v "$BROWSER" >/dev/null 2>&1; then
  echo "check-timeline: $BROWSER not found; install it with: apt-get update && apt-get install -y chromium" >&2
  exit 2
fi
SIM=${1:-target/release/sim}
OUT=${2:-$(mktemp -d)}
PAGE=${3:-}
mkdir -p "$OUT"
if [ -z "$PAGE" ]; then
  if [ ! -x "$SIM" ]; then cargo build --release --locked --bin sim; fi
  "$SIM" trace scenarios/failover.toml --strategy single --out "$OUT" > "$OUT/trace.txt"
  PAGE=$OUT/timeline.html
fi
url="file://$(cd "$(dirname "$PAGE")" && pwd)/$(basename "$PAGE")"
flags=(--headless --disable-gpu --no-sandbox --no-first-run --hide-scrollbars
       --user-data-dir="$OUT/chromium-profile" --enable-logging=stderr --v=0)
# The DOM after the scripts ran, with the console on standard error.
timeout 120 "$BROWSER" "${flags[@]}" --dump-dom "$url" > "$OUT/dom.html" 2> "$OUT/console.log" || {
  echo "check-timeline: $BROWSER failed (see $OUT/console.log)" >&2; exit 1; }
timeout 120 "$BROWSER" "${flags[@]}" --window-size=1600,1000 --screenshot="$OUT/timeline.png" "$url" \
  >/dev/null 2>> "$OUT/console.log" || { echo "check-timeline: the screenshot failed" >&2; exit 1; }
fail=0
if grep -E ':CONSOLE(\(|:|])' "$OUT/console.log" >&2; then
  echo "check-timeline: the page wrote to the console (above)" >&2; fail=1
fi
if ! grep -q 'data-ready="yes"' "$OUT/dom.html"; then
  echo "check-timeline: the page's script did not finish (no data-ready=\"yes\")" >&2; fail=1
fi
[ -s "$OUT/timeline.png" ] || { echo "check-timeline: no screenshot" >&2; fail=1; }
if [ "$fail" -ne 0 ]; then exit 1; fi
echo "check-timeline: ok: $PAGE ran without console messages; screenshot $OUT/timeline.png"
