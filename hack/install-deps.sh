#!/usr/bin/env bash
# Installs the system tools the tests and the sandbox need when they are
# missing: nftables (nft) and iproute2 (ip), from Debian's packages.
set -euo pipefail
need=()
command -v nft >/dev/null || need+=(nftables)
command -v ip >/dev/null || need+=(iproute2)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root" >&2
  exit 1
fi
echo "installing ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
