#!/usr/bin/env bash
# Fetches NVIDIA's CUDA 12.5 tools from Debian into .cache/cuda-tools/ without
# installing anything into the system and without touching its apt sources:
#
#   usr/lib/x86_64-linux-gnu/  libnvrtc.so.12 (12.5.40), libnvrtc-builtins.so.12.5
#                              (libnvrtc12, libnvrtc-builtins12.5; experimental non-free)
#   usr/bin/                   cuobjdump, nvdisasm, ptxas (nvidia-cuda-toolkit 12.5)
#   usr/include/               cuda.h, nvrtc.h, cublas_v2.h, cublasLt.h... (nvidia-cuda-dev 12.5),
#                              nv/target and cuda/std (libcu++-dev, sid main: cuda_fp16.h,
#                              which cublas_api.h includes, needs it), nccl.h (libnccl-dev,
#                              sid contrib)
#
# amd64 only. No GPU, driver or root is needed. apt runs on a private configuration under
# .cache/apt/ (its own sources list, lists, archives and an empty dpkg status);
# the mirror is the one this machine's own apt sources use for its Debian
# release (scripts/debian_mirror.sh; no mirror is written in the repository;
# CUDA_TOOLS_MIRROR overrides it), with suites experimental
# and sid, verified with the system's Debian archive keyring.
#
# Sizes: about 1.1 GB is downloaded. nvidia-cuda-dev alone is 917 MB (2.5 GB
# unpacked: every CUDA library's static archive); only its usr/include (16 MB)
# is extracted, and only the three binaries above from nvidia-cuda-toolkit
# (88 MB). The .deb files are deleted once unpacked. --no-headers skips the
# headers (and the 1 GB download of nvidia-cuda-dev and libnccl-dev).
#
# Usage: bash scripts/install_cuda_tools.sh [--force] [--no-headers]
# A second run with everything present does nothing. Where things are:
# scripts/cuda_tools_env.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=$ROOT/.cache/cuda-tools
APTDIR=$ROOT/.cache/apt
CUDA_RELEASE=12.5 # Debian's version strings carry it as "~12.5.0-"
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
LIBDIR=$DEST/usr/lib/x86_64-linux-gnu

force=0 headers=1
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	--no-headers) headers=0 ;;
	*) echo "usage: $0 [--force] [--no-headers]" >&2; exit 2 ;;
	esac
done

log() { echo "install_cuda_tools: $*"; }
die() { echo "install_cuda_tools: error: $*" >&2; exit 1; }

report() {
	log "NVRTC:   $LIBDIR/libnvrtc.so.12 (builtins: $(cd "$LIBDIR" && ls libnvrtc-builtins.so.*.* 2>/dev/null | head -1))"
	log "tools:   $DEST/usr/bin/{cuobjdump,nvdisasm,ptxas}: $("$DEST/usr/bin/cuobjdump" --version | tail -1)"
	if [ -f "$DEST/usr/include/cuda.h" ]; then
		log "headers: $DEST/usr/include (cuda.h, nvrtc.h, cublas_v2.h, nccl.h)"
	fi
	log "variables: eval \"\$(bash scripts/cuda_tools_env.sh)\""
}

wanted=("$LIBDIR/libnvrtc.so.12" "$DEST/usr/bin/cuobjdump" "$DEST/usr/bin/nvdisasm" "$DEST/usr/bin/ptxas")
if [ $headers = 1 ]; then
	wanted+=("$DEST/usr/include/cuda.h" "$DEST/usr/include/nvrtc.h" "$DEST/usr/include/cublas_v2.h"
		"$DEST/usr/include/nv/target" "$DEST/usr/include/nccl.h")
fi
have=1
for f in "${wanted[@]}"; do [ -e "$f" ] || have=0; done
if [ $force = 0 ] && [ $have = 1 ] && [ -f "$DEST/.complete" ]; then
	log "already present in $DEST, nothing to do (--force fetches again)"
	report
	exit 0
fi

command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "needs apt-get and dpkg-deb (a Debian or Ubuntu machine)"
[ -r "$KEYRING" ] || die "$KEYRING missing: install debian-archive-keyring"
[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 (x86_64) is supported, this is $(dpkg --print-architecture)"

# The mirror: the one this machine's apt uses for a Debian release's main
# component (scripts/debian_mirror.sh); CUDA_TOOLS_MIRROR overrides it.
from="this machine's apt sources"
[ -n "${CUDA_TOOLS_MIRROR:-}" ] && from=CUDA_TOOLS_MIRROR
mirror=$(bash scripts/debian_mirror.sh "${CUDA_TOOLS_MIRROR:-}") ||
	die "no Debian mirror found in this machine's apt sources; set CUDA_TOOLS_MIRROR to one"
log "mirror $mirror (from $from), suites experimental and sid"

# A private apt: its own sources, lists, cache, archives and an empty dpkg
# status; no apt.conf.d parts (so none of the system's update hooks run), but
# the system's proxy and Check-Valid-Until settings.
mkdir -p "$APTDIR"/{lists/partial,archives/partial,cache,etc/apt.conf.d,etc/preferences.d,etc/trusted.gpg.d}
: >"$APTDIR/status"
cat >"$APTDIR/sources.list" <<EOF
deb [signed-by=$KEYRING] $mirror experimental non-free
deb [signed-by=$KEYRING] $mirror sid main contrib non-free
EOF
{
	echo "Dir::Etc::SourceList \"$APTDIR/sources.list\";"
	echo "Dir::Etc::SourceParts \"-\";"
	echo "Dir::Etc::Parts \"$APTDIR/etc/apt.conf.d\";"
	echo "Dir::Etc::main \"$APTDIR/etc/apt.conf\";"
	echo "Dir::Etc::Preferences \"$APTDIR/etc/preferences\";"
	echo "Dir::Etc::PreferencesParts \"$APTDIR/etc/preferences.d\";"
	echo "Dir::State \"$APTDIR\";"
	echo "Dir::State::Lists \"$APTDIR/lists\";"
	echo "Dir::State::status \"$APTDIR/status\";"
	echo "Dir::Cache \"$APTDIR/cache\";"
	echo "Dir::Cache::Archives \"$APTDIR/archives\";"
	echo "Dir::Cache::pkgcache \"\"; Dir::Cache::srcpkgcache \"\";" # 100 MB, rebuilt in 1 s
	echo "Acquire::GzipIndexes \"true\";"                              # lists stay compressed
	echo "APT::Architectures { \"amd64\"; };"
	echo "Acquire::Languages \"none\";"
	echo "Acquire::Retries \"3\";"
	# Downloading into a folder the _apt user cannot enter is fine: no sandbox.
	echo "APT::Sandbox::User \"root\";"
	apt-config dump | grep -E '^Acquire::(Check-Valid-Until|https?::Proxy|ftp::Proxy)' || true
} >"$APTDIR/apt.conf"
export APT_CONFIG=$APTDIR/apt.conf

t0=$(date +%s)
if ! apt-get -q update >"$APTDIR/update.log" 2>&1 || grep -qE '^(W|E): ' "$APTDIR/update.log"; then
	cat "$APTDIR/update.log" >&2
	hint="is the archive reachable? Is it a Debian mirror (set CUDA_TOOLS_MIRROR to one)?"
	if grep -qE 'NO_PUBKEY|EXPKEYSIG|not signed' "$APTDIR/update.log"; then
		hint="$KEYRING does not verify experimental/sid: a newer debian-archive-keyring (from the next release) has the new key"
	fi
	die "apt-get update on $mirror (experimental, sid) failed: $hint"
fi

# version PKG: the newest version of PKG built from CUDA $CUDA_RELEASE.
version() {
	local v
	v=$(apt-cache madison "$1" | awk -F' [|] ' -v r="~$CUDA_RELEASE." '{ gsub(/ /, "", $2) } index($2, r) { print $2; exit }')
	[ -n "$v" ] || die "no $1 from CUDA $CUDA_RELEASE in $mirror experimental/sid (apt-cache madison $1: $(apt-cache madison "$1" | awk -F'|' '{print $2}' | xargs))"
	echo "$v"
}
pkgs=()
for p in libnvrtc12 "libnvrtc-builtins$CUDA_RELEASE" nvidia-cuda-toolkit; do
	v=$(version "$p")
	pkgs+=("$p=$v")
done
if [ $headers = 1 ]; then
	v=$(version nvidia-cuda-dev)
	pkgs+=("nvidia-cuda-dev=$v" "libcu++-dev/sid" "libnccl-dev/sid")
fi
log "downloading ${pkgs[*]}"
rm -f "$APTDIR"/archives/*.deb
(cd "$APTDIR/archives" && apt-get -q download "${pkgs[@]}") >"$APTDIR/download.log" 2>&1 || {
	cat "$APTDIR/download.log" >&2
	die "apt-get download failed"
}
bytes=$(cat "$APTDIR"/archives/*.deb | wc -c)
t1=$(date +%s)
log "downloaded $((bytes / 1000000)) MB in $((t1 - t0)) s"

# unpack DEB [MEMBER...]: all of DEB, or only the named members (./usr/...).
unpack() {
	local deb
	deb=$(ls "$APTDIR"/archives/"$1"_*.deb)
	shift
	if [ $# = 0 ]; then
		dpkg -x "$deb" "$DEST"
	else
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$DEST" --wildcards "$@"
	fi
}
rm -rf "$DEST"
mkdir -p "$DEST"
unpack libnvrtc12
unpack "libnvrtc-builtins$CUDA_RELEASE"
unpack nvidia-cuda-toolkit ./usr/bin/cuobjdump ./usr/bin/nvdisasm ./usr/bin/ptxas './usr/share/doc/nvidia-cuda-toolkit/copyright'
if [ $headers = 1 ]; then
	unpack nvidia-cuda-dev './usr/include/*'
	unpack 'libcu++-dev' './usr/include/*'
	unpack libnccl-dev './usr/include/*'
fi
rm -f "$APTDIR"/archives/*.deb
printf '%s\n' "${pkgs[@]}" >"$DEST/.complete"
for f in "${wanted[@]}"; do [ -e "$f" ] || die "$f missing after unpacking"; done
log "unpacked into $DEST in $(($(date +%s) - t1)) s"
report
