#!/usr/bin/env bash
# Installs Debian's NVRTC (libnvrtc11.2 from CUDA 11.8, non-free component):
# 17 MB, no GPU or driver needed, enough to compile every kernel for sm_80 and
# sm_90 in `make test`. Needs root and apt; does nothing if already present.
set -euo pipefail
if ldconfig -p 2>/dev/null | grep -q 'libnvrtc.so.11.2'; then
	echo "install_nvrtc: libnvrtc.so.11.2 already present"
	exit 0
fi
src=/etc/apt/sources.list.d/debian.sources
if [ -f "$src" ] && ! grep -q 'non-free' "$src"; then
	sed -i 's/^Components: main$/Components: main non-free/' "$src"
elif [ ! -f "$src" ]; then
	echo "deb http://deb.debian.org/debian bookworm main non-free" >/etc/apt/sources.list.d/gdrotrain-nonfree.list
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libnvrtc11.2 libnvrtc-builtins11.8 >/dev/null
echo "install_nvrtc: installed $(ldconfig -p | grep -o 'libnvrtc.so.11.2' | head -1)"
