#!/usr/bin/env bash
# CI, issue 40 section 1: `sim live --consumer` with the two example consumers against ActiveMQ
# (what tests/live_consumer.rs checks, through the release binary .ci/run built with `live`, so no
# second test build). Installs python3 when it is missing and the machine lets us (root and
# apt-get); skipped, saying so, without ActiveMQ or python3. With PostgreSQL (.ci/live-postgres.sh,
# run before, installs it) the PostgreSQL example consumer too, its applies read from the table it
# writes (--writes) through a database outage. About 50 s (four runs of ~11 s).
# Fails when a naive consumer shows no violation or stale write, or a guarded one any.
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
expect() {
  local naive guarded
  naive=$(row "$1")
  guarded=$(row "$2")
  if [ "${naive:-0}" -eq 0 ] || [ "${guarded:-1}" -ne 0 ]; then
    echo "   expected violations + stale writes > 0 for $1 (got ${naive:-none}) and 0 for $2 (got ${guarded:-none})"
    exit 1
  fi
}
expect naive_consumer guarded_consumer

if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== skipped: sim live --consumer --writes (PostgreSQL not installed)"
  exit 0
fi
echo "== sim live --consumer --writes: the PostgreSQL example consumer through a database outage"
pg() {
  target/release/sim live examples/own-consumer-db.toml --consumer "python3 examples/pg_consumer.py $2" \
    --writes 'rows(k,state)' | tee "/tmp/ordsim-ci-$1.txt"
}
pg pg_naive ""
pg pg_guarded --guarded
expect pg_naive pg_guarded
