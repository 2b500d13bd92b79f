#!/bin/sh
# Installs ActiveMQ Classic (Debian's package, with Java 17) for `sim live` when it is missing.
# Idempotent: does nothing when /usr/share/activemq/bin/activemq.jar is already there.
set -eu
if [ -f /usr/share/activemq/bin/activemq.jar ] && command -v java >/dev/null 2>&1; then
    echo "activemq already installed: $(dpkg-query -W -f='${Version}' activemq 2>/dev/null || echo unknown)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends activemq
echo "activemq installed: $(dpkg-query -W -f='${Version}' activemq)"
