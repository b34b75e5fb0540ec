#!/usr/bin/env bash
# Install the Debian packages named on the command line, only those not installed yet.
# Runs apt-get update once, only when something is missing. Needs root (CI and these
# machines run as root); prints what it installs.
set -euo pipefail
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "apt-ensure: need root to install: ${missing[*]}" >&2
  exit 1
fi
echo "apt-ensure: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
