#!/usr/bin/env bash
# CI, issue 37 section 4: the db handlers (db_optimistic, notifier) live against a real
# PostgreSQL, a subset of the calibration set (docs/calibration.md, "The database rows").
# Installs Debian's postgresql when it is missing and the machine lets us (root and apt-get), as
# .ci/run does for ActiveMQ; skipped, saying so, without PostgreSQL or ActiveMQ.
#
# Time budget: under 3 minutes. Measured (docs/calibration.md): 41 s with PostgreSQL installed
# and the `--features live` build a no-op after .ci/run's ActiveMQ step (two files, one live run
# each of about 20 s, the simulator's 20 seeds); the apt-get install comes on top (ActiveMQ's took
# 45 s), and a retry doubles the calibration. Exit 1 (a row outside the simulator's range on
# both tries) fails CI; exit 2 (bad input) fails at once.
set -euo pipefail
cd "$(dirname "$0")/.."

have_pg() {
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1
}

if ! have_pg && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing postgresql (Debian) for the live db handlers"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql) \
      >/tmp/ordsim-ci-postgresql.log 2>&1; then
    echo "   could not install postgresql (see /tmp/ordsim-ci-postgresql.log)"
  fi
  # Debian's package starts a cluster of its own on port 5432; the live runs start private
  # servers and need none: stop it (ignored where there is no service manager).
  (service postgresql stop || true) >/dev/null 2>&1
fi
if ! have_pg; then
  echo "== skipped: live db handlers (postgresql not installed)"
  exit 0
fi
if [ ! -f /usr/share/activemq/bin/activemq.jar ]; then
  echo "== skipped: live db handlers (activemq not installed)"
  exit 0
fi

echo "== live db handlers against PostgreSQL (sim calibrate, one live run per file)"
cargo build --release --locked --features live --bin sim
c=scenarios/calibration
.ci/calibrate-twice.sh target/ci-calibration-pg $c/db-optimistic-outage.toml $c/notifier-outage.toml
