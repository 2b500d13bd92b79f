#!/usr/bin/env bash
# CI, the live twin against RabbitMQ (issue 37): Debian's rabbitmq-server installed when it is
# missing and the machine lets us (root and apt-get), then a subset of the RabbitMQ calibration
# (docs/calibration.md, "RabbitMQ"). Called by .ci/run after the release build; without
# rabbitmq-server it says why and is skipped.
#
# Time budget: under 3.5 minutes (the --consumer runs at the end add about 25 s). The install
# takes about 40 s; the live feature's release build
# (shared with the ActiveMQ step when it ran) about 60 s; the subset is one file, two strategies,
# one live run each: about 30 s of traffic, plus 2 x 10-20 s for the node to boot, and the
# simulator's seeds in well under a second.
#
# Exit 1 (a row outside the simulator's range) fails CI; as for ActiveMQ a failing set runs
# once more and CI fails only when the second run has a row outside too. Bad input (exit 2)
# fails at once.
set -euo pipefail
cd "$(dirname "$0")/.."

server=/usr/lib/rabbitmq/bin/rabbitmq-server
if [ ! -x "$server" ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing rabbitmq-server (Debian) for the live calibration"
  # Debian's package starts (or enables) a system node: ours run as children on private ports,
  # so the system one is stopped and disabled, and the epmd its scripts left (on 0.0.0.0) goes.
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends rabbitmq-server) >/tmp/ordsim-ci-rabbitmq.log 2>&1; then
    (systemctl disable --now rabbitmq-server || service rabbitmq-server stop || true) \
      >>/tmp/ordsim-ci-rabbitmq.log 2>&1
    epmd -kill >/dev/null 2>&1 || true  # asks the default epmd (port 4369) to stop
  else
    echo "   could not install rabbitmq-server (see /tmp/ordsim-ci-rabbitmq.log)"
  fi
fi
if [ ! -x "$server" ]; then
  echo "== skipped: live calibration against RabbitMQ (rabbitmq-server not installed)"
  exit 0
fi

echo "== live calibration against RabbitMQ (sim calibrate, one live run per strategy)"
cargo build --release --locked --features live --bin sim
c=scenarios/calibration
.ci/calibrate-twice.sh target/ci-calibration-rabbitmq $c/rabbit-quorum-crash.toml

# `sim live --consumer` on RabbitMQ (issue 40): the naive example consumer among competing
# consumers breaks order; on a single-active-consumer queue it does not. About 25 s.
if ! command -v python3 >/dev/null 2>&1; then
  echo "== skipped: sim live --consumer on RabbitMQ (python3 not installed)"
  exit 0
fi
echo "== sim live --consumer: the naive example consumer against RabbitMQ"
own=target/ci-own-rabbitmq.toml
{ echo 'flavour = "rabbitmq"'; cat examples/own-consumer.toml; } > "$own"
for s in competing rabbitmq_sac; do
  target/release/sim live "$own" --strategy "$s" --consumer "python3 examples/naive_consumer.py" \
    | tee "/tmp/ordsim-ci-rabbit-$s.txt"
done
# violations + stale writes in the strategy's row
bad() { awk -v s="$1" '$1 == s && $2 ~ /^[0-9]+$/ { print $4 + $5 }' "/tmp/ordsim-ci-rabbit-$1.txt"; }
competing=$(bad competing)
sac=$(bad rabbitmq_sac)
if [ "${competing:-0}" -eq 0 ] || [ "${sac:-1}" -ne 0 ]; then
  echo "   expected violations + stale writes > 0 for competing (got ${competing:-none}) and 0 for rabbitmq_sac (got ${sac:-none})"
  exit 1
fi
