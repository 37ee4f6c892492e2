#!/usr/bin/env bash
# Installs the Debian packages qvet needs, only when one is missing.
# apt-get update runs first, and only then. Needs root (CI and the dev machines
# run as root); otherwise it names the missing packages and fails.
set -euo pipefail
pkgs=(check libsubunit-dev libmpfr-dev libgmp-dev libopenblas-dev gnuplot-nox
      clang libclang-rt-dev make gcc python3
      openmpi-bin libopenmpi-dev)
missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages and not root; run: sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
