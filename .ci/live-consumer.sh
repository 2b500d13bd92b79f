#!/usr/bin/env bash
# CI, issue 40 section 1: `sim live --consumer` with the two example consumers against ActiveMQ
# (what tests/live_consumer.rs checks, through the release binary .ci/run built with `live`, so no
# second test build). Installs python3 when it is missing and the machine lets us (root and
# apt-get); skipped, saying so, without ActiveMQ or python3. About 25 s (two runs of ~11 s).
# Fails when the naive consumer shows no violation or stale write, or the guarded one any.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v python3 >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing python3 (Debian) for the example consumers"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3) \
      >/tmp/ordsim-ci-python3.log 2>&1; then
    echo "   could not install python3 (see /tmp/ordsim-ci-python3.log)"
  fi
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "== skipped: sim live --consumer (python3 not installed)"
  exit 0
fi
if [ ! -f /usr/share/activemq/bin/activemq.jar ]; then
  echo "== skipped: sim live --consumer (activemq not installed)"
  exit 0
fi

echo "== sim live --consumer: the example consumers against ActiveMQ"
cargo build --release --locked --features live --bin sim
run() {
  target/release/sim live examples/own-consumer.toml --consumer "python3 examples/$1.py" \
    | tee "/tmp/ordsim-ci-$1.txt"
}
run naive_consumer
run guarded_consumer
# The table's row: competing produced applied violations stale_wr ...
row() { awk '$1 == "competing" && $2 ~ /^[0-9]+$/ { print $4 + $5 }' "/tmp/ordsim-ci-$1.txt"; }
naive=$(row naive_consumer)
guarded=$(row guarded_consumer)
if [ "${naive:-0}" -eq 0 ] || [ "${guarded:-1}" -ne 0 ]; then
  echo "   expected violations + stale writes > 0 for the naive consumer (got ${naive:-none}) and 0 for the guarded one (got ${guarded:-none})"
  exit 1
fi
