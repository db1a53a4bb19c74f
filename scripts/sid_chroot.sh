#!/usr/bin/env bash
# sid_chroot.sh: a Debian sid chroot with the reference implementations the
# checks of scripts/check_references.sh and `make golden` run against:
# Hugging Face transformers, PyTorch (CPU), safetensors, and llama.cpp with its
# Python gguf package and its Hugging Face → GGUF converter. They need sid's
# glibc, newer than this machine's, hence a chroot rather than apt on the host.
#
#   bash scripts/sid_chroot.sh                 make it (or reuse it) and print the versions
#   bash scripts/sid_chroot.sh run CMD [ARG]…  run CMD inside it
#   bash scripts/sid_chroot.sh --force         build it again from scratch
#
# Where: .cache/sid (SID_CHROOT overrides), 2.1 GB, about 2 minutes to make.
# The mirror is the one this machine's own apt sources use
# (scripts/debian_mirror.sh; SID_MIRROR overrides). Needs root, debootstrap
# (apt-get install debootstrap), unshare and chroot.
#
# Idempotent and safe to interrupt: the tree is built in DIR.partial and
# renamed to DIR only once every package is installed (a later run starts a
# half-built tree over), and a second run with the chroot complete only checks
# that its packages import. Every mount (/proc, /dev, /sys, the repository,
# /tmp) lives in a private mount namespace (unshare --mount) that the kernel
# tears down when the command ends, however it ends: nothing is left mounted,
# and the tree can be deleted with rm -rf.
#
# `run` mounts the repository and /tmp at the same paths inside and keeps the
# current folder, so paths given on the command line mean the same thing on
# both sides. The environment is cleared except for the thread settings
# (OMP_*, GOMP_*, OPENBLAS_*, MKL_*), GDROTRAIN_* and SID_*; Hugging Face
# libraries run offline (HF_HUB_OFFLINE=1). The command runs as root, like
# this script.
set -euo pipefail
CALLER=$PWD # `run` starts CMD here
cd "$(dirname "$0")/.."
ROOT=$PWD
DEST=${SID_CHROOT:-$ROOT/.cache/sid}
DEST=${DEST%/}
PART=$DEST.partial
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# What the reference checks need. --no-install-recommends keeps out what they
# do not (the package's Recommends pull in hundreds of MB of extras).
# gcc, libc6-dev and libllama-dev build scripts/llama_logits.c against the
# llama.h that matches the installed libllama; the converter imports
# sentencepiece before it looks for a BPE tokenizer.
PKGS=(python3-torch python3-transformers python3-safetensors python3-gguf python3-numpy python3-sentencepiece
	llama.cpp-tools libllama0 libllama-dev gcc libc6-dev libopenblas0-pthread ca-certificates)
STAMP=.gdrotrain-complete # inside the tree: the package list it was built with

log() { echo "sid_chroot: $*" >&2; }
die() { echo "sid_chroot: error: $*" >&2; exit 1; }

# in_tree TREE CMD [ARG]…: CMD inside TREE, in a private mount namespace.
in_tree() {
	local tree=$1
	shift
	local envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
		HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_TELEMETRY=1 PYTHONDONTWRITEBYTECODE=1
		DEBIAN_FRONTEND=noninteractive TERM=dumb)
	local v
	for v in $(compgen -e); do
		case $v in
		OMP_* | GOMP_* | OPENBLAS_* | MKL_* | GDROTRAIN_* | SID_*) envs+=("$v=${!v}") ;;
		esac
	done
	# The inner shell mounts, then execs chroot, which execs CMD: the process
	# that started is the one that ends, so a signal sent to it reaches CMD.
	exec_in() {
		# `run` replaces this shell (bench and the checks then talk to CMD itself).
		local ex=
		[ "$replace" = 1 ] && ex=exec
		$ex unshare --mount --propagation private -- bash -c '
			set -e
			t=$1 root=$2; shift 2
			mount -t proc proc "$t/proc"
			mount --rbind /dev "$t/dev"
			mount --rbind /sys "$t/sys"
			mkdir -p "$t$root" "$t/tmp"
			mount --bind "$root" "$t$root"
			mount --bind /tmp "$t/tmp"
			exec chroot "$t" /usr/bin/env -i "$@"
		' _ "$tree" "$ROOT" "$@"
	}
	exec_in "${envs[@]}" /bin/sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$CALLER" "$@"
}

# mounted_under DIR: whether anything is mounted at or below DIR (this
# namespace); never rm -rf such a tree.
mounted_under() {
	awk -v d="$1" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo
}

remove_tree() {
	[ -e "$1" ] || return 0
	mounted_under "$1" && die "something is mounted under $1 (see findmnt -R $1): unmount it first"
	rm -rf --one-file-system "$1"
}

complete() { [ -f "$DEST/$STAMP" ] && [ "$(cat "$DEST/$STAMP")" = "${PKGS[*]}" ]; }

versions() {
	in_tree "$DEST" python3 -c '
import sys, importlib.metadata as md, torch, transformers, safetensors, gguf, numpy
print("python %s, torch %s, transformers %s, safetensors %s, gguf %s, numpy %s" % (
    sys.version.split()[0], torch.__version__, transformers.__version__,
    safetensors.__version__, md.version("gguf"), numpy.__version__))' &&
		in_tree "$DEST" dpkg-query -W -f '${Package} ${Version}\n' llama.cpp-tools libllama0 libc6 | paste -sd, | sed 's/,/, /g'
}

replace=0
if [ "${1:-}" = run ]; then
	shift
	replace=1
	[ $# -gt 0 ] || die "usage: $0 run CMD [ARG]…"
	complete || die "no complete chroot at $DEST: make it first with 'bash scripts/sid_chroot.sh' (about 2 minutes and 2.1 GB)"
	in_tree "$DEST" "$@"
	exit $?
fi

force=0
for a in "$@"; do
	case $a in
	--force) force=1 ;;
	*) echo "usage: $0 [--force] | run CMD [ARG]…" >&2; exit 2 ;;
	esac
done

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot and mounts)"
for c in unshare chroot; do command -v $c >/dev/null || die "$c not found"; done

# A complete tree built with another package list: install what is missing
# in place (apt-get install is idempotent) rather than start over.
if [ $force = 0 ] && [ -f "$DEST/$STAMP" ] && ! complete; then
	log "$DEST was built with other packages ($(cat "$DEST/$STAMP")); installing ${PKGS[*]}"
	if (in_tree "$DEST" apt-get -q update && in_tree "$DEST" apt-get -q install -y "${PKGS[@]}" &&
		in_tree "$DEST" apt-get clean) >>"$DEST.log" 2>&1; then
		echo "${PKGS[*]}" >"$DEST/$STAMP"
	else
		tail -20 "$DEST.log" >&2
		log "installing into $DEST failed (log: $DEST.log); building it again"
	fi
fi
if [ $force = 0 ] && complete; then
	if v=$(versions 2>&1); then
		log "reusing $DEST"
		echo "$v"
		exit 0
	fi
	log "$DEST is there but its packages do not import ($v); building it again"
fi

command -v debootstrap >/dev/null || die "debootstrap not found: apt-get install -y debootstrap"
[ -r "$KEYRING" ] || die "$KEYRING missing: apt-get install debian-archive-keyring"
mirror=$(bash scripts/debian_mirror.sh "${SID_MIRROR:-}") || die "no mirror: set SID_MIRROR to a Debian mirror"
[ -n "${SID_MIRROR:-}" ] && from=SID_MIRROR || from="this machine's apt sources"

# Fail early and clearly when the archive is out of reach, rather than deep in
# debootstrap's log.
probe=$mirror/dists/sid/InRelease
if command -v curl >/dev/null; then
	err=$(curl -fsS --max-time 30 -o /dev/null "$probe" 2>&1) || reach=no
elif command -v wget >/dev/null; then
	err=$(wget -q -T 30 -O /dev/null "$probe" 2>&1) || reach=no
fi
[ "${reach:-yes}" = yes ] || die "cannot reach the Debian archive: $probe (${err:-no answer}). The chroot is built from sid on $mirror (from $from); set SID_MIRROR to a reachable Debian mirror"

t0=$(date +%s)
log "building $PART from sid on $mirror (from $from)"
remove_tree "$PART"
mkdir -p "$(dirname "$PART")"
# debootstrap mounts /proc and /sys inside the tree: a private namespace makes
# sure they go away even if it is interrupted.
if ! unshare --mount --propagation private -- debootstrap --variant=minbase --keyring="$KEYRING" sid "$PART" "$mirror" >"$PART.log" 2>&1; then
	tail -20 "$PART.log" >&2
	die "debootstrap sid from $mirror failed (log: $PART.log); a later run starts over"
fi
t1=$(date +%s)
log "debootstrap: $((t1 - t0)) s"

# apt inside: the archive may be a snapshot whose Release has expired, as the
# host's apt already allows.
cat >"$PART/etc/apt/apt.conf.d/99gdrotrain" <<EOF
Acquire::Check-Valid-Until "false";
Acquire::Check-Date "false";
Acquire::Retries "3";
Acquire::Languages "none";
APT::Install-Recommends "false";
APT::Install-Suggests "false";
EOF
echo "deb $mirror sid main" >"$PART/etc/apt/sources.list"
[ -r /etc/resolv.conf ] && cat /etc/resolv.conf >"$PART/etc/resolv.conf"
if ! (in_tree "$PART" apt-get -q update && in_tree "$PART" apt-get -q install -y "${PKGS[@]}") >>"$PART.log" 2>&1; then
	tail -20 "$PART.log" >&2
	die "apt-get install ${PKGS[*]} inside the chroot failed (log: $PART.log)"
fi
in_tree "$PART" apt-get clean >>"$PART.log" 2>&1
echo "${PKGS[*]}" >"$PART/$STAMP"
t2=$(date +%s)
log "packages: $((t2 - t1)) s"

remove_tree "$DEST"
mv "$PART" "$DEST"
mv "$PART.log" "$DEST.log"
log "built $DEST in $((t2 - t0)) s ($(du -sh --one-file-system "$DEST" | cut -f1)); log: $DEST.log"
versions
