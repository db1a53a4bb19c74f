#!/usr/bin/env bash
# Prints the variables that point at the CUDA 12.5 tools which
# scripts/install_cuda_tools.sh unpacks into .cache/cuda-tools/, as shell
# assignments:
#
#   eval "$(bash scripts/cuda_tools_env.sh)"   # or: source scripts/cuda_tools_env.sh
#
# GDROTRAIN_NVRTC_DIR    folder of libnvrtc.so.12 (the tests' and kernel report's NVRTC)
# CUDA_TOOLS_BIN         folder of cuobjdump, nvdisasm, ptxas
# GDROTRAIN_CUDA_INCLUDE cuda.h, nvrtc.h, cublas_v2.h, nccl.h (absent after --no-headers)
#
# Prints nothing (and fails) when the tools have not been fetched.
_ct_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.cache/cuda-tools
if [ ! -e "$_ct_root/usr/lib/x86_64-linux-gnu/libnvrtc.so.12" ]; then
	echo "cuda_tools_env: $_ct_root is empty; run: bash scripts/install_cuda_tools.sh" >&2
	unset _ct_root
	return 1 2>/dev/null || exit 1
fi
_ct_vars="GDROTRAIN_NVRTC_DIR=$_ct_root/usr/lib/x86_64-linux-gnu
CUDA_TOOLS_BIN=$_ct_root/usr/bin"
[ -d "$_ct_root/usr/include" ] && _ct_vars="$_ct_vars
GDROTRAIN_CUDA_INCLUDE=$_ct_root/usr/include"
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
	# sourced: set them in the caller's shell
	while IFS= read -r _ct_v; do export "${_ct_v?}"; done <<<"$_ct_vars"
	unset _ct_v
else
	while IFS= read -r _ct_v; do printf 'export %s=%q\n' "${_ct_v%%=*}" "${_ct_v#*=}"; done <<<"$_ct_vars"
fi
unset _ct_root _ct_vars
