#!/usr/bin/env bash
# The CPU benchmark's dependencies (`make bench` runs this first):
#   libopenblas0-pthread  OpenBLAS, for gdrotrain's CPU matrix products and for
#                         PyTorch's: without it Debian's PyTorch calls the
#                         reference BLAS (≈ 7 GFLOP/s) and the ratios mean nothing;
#   python3-torch         Debian's PyTorch 1.13, the baseline.
# Installs what is missing where apt-get can (root); otherwise says what to
# install and carries on (the benchmark still runs, and warns).
set -euo pipefail
missing=()
for p in libopenblas0-pthread python3-torch; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
	echo "installing ${missing[*]} for the benchmark baseline"
	apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
		{ apt-get update >/dev/null && apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
else
	echo "bench: ${missing[*]} not installed (apt-get install ${missing[*]}); the PyTorch baseline may be missing or slow" >&2
fi
