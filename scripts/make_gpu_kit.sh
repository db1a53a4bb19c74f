#!/usr/bin/env bash
# make_gpu_kit.sh: packs the GPU kit, one archive that a GPU node without Go
# runs with one command (docs/gpu-kit.md):
#
#   tar xzf gdrotrain-gpu-kit.tar.gz && cd gdrotrain-gpu-kit && ./run.sh
#
# `make gpu-kit` builds the two programs and calls this. Usage:
#   bash scripts/make_gpu_kit.sh [--gdrotrain BIN] [--cuda-test BIN] [--cuda-profile-test BIN] [--out ARCHIVE]
# (defaults bin/gdrotrain, bin/cuda.test, bin/cuda-profile.test, bin/gdrotrain-gpu-kit.tar.gz).
#
# The archive holds run.sh (scripts/gpu_kit.sh), the three programs (built
# stripped by make gpu-check-build: -ldflags='-s -w'), what the CUDA tests
# read beside their package folder (cuda/shim.h, the PyTorch goldens in
# model/testdata), the Python scripts of the transformers, peft and
# tensorboard checks and of the PyTorch baseline, this documentation, and
# VERSION: the commit,
# the Go version and the newest glibc symbol version the programs need (cgo
# links them against the build machine's glibc; a node with an older one
# cannot start them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
gdrotrain=$root/bin/gdrotrain
cudatest=$root/bin/cuda.test
profiletest=$root/bin/cuda-profile.test
out=$root/bin/gdrotrain-gpu-kit.tar.gz
while [ $# -gt 0 ]; do
	case $1 in
	--gdrotrain) gdrotrain=${2:?}; shift ;;
	--cuda-test) cudatest=${2:?}; shift ;;
	--cuda-profile-test) profiletest=${2:?}; shift ;;
	--out) out=${2:?}; shift ;;
	*) echo "make_gpu_kit: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
for p in "$gdrotrain" "$cudatest" "$profiletest"; do
	[ -x "$p" ] || { echo "make_gpu_kit: $p is missing (make gpu-check-build builds it)" >&2; exit 1; }
done

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
kit=$stage/gdrotrain-gpu-kit
mkdir -p "$kit/bin" "$kit/cuda" "$kit/tools/profile" "$kit/model" "$kit/scripts" "$kit/docs"
cp "$gdrotrain" "$kit/bin/gdrotrain"
cp "$cudatest" "$kit/bin/cuda.test"
cp "$profiletest" "$kit/bin/cuda-profile.test"
cp "$root/scripts/gpu_kit.sh" "$kit/run.sh"
chmod +x "$kit/run.sh"
cp "$root/cuda/shim.h" "$kit/cuda/"
cp -r "$root/model/testdata" "$kit/model/"
cp "$root/scripts/hf_check.py" "$root/scripts/bench_torch_gpu.py" "$root/scripts/kit_checks.py" "$kit/scripts/"
cp "$root/docs/gpu-kit.md" "$kit/docs/"

# The newest GLIBC_x.y either program needs, when binutils is here to say.
glibc=unknown
if command -v objdump >/dev/null; then
	glibc=$(objdump -T "$gdrotrain" "$cudatest" "$profiletest" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//')
fi
commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
gover=$(go version 2>/dev/null || echo "go version unknown")
cat >"$kit/VERSION" <<EOF
gdrotrain $commit
built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $gover on $(uname -m)
needs glibc >= $glibc on the node (ldd --version shows the node's)
EOF
cat >"$kit/README.txt" <<'EOF'
gdrotrain GPU kit. On a GPU node (no Go needed):

    ./run.sh --out DIR          # every phase in 8 minutes (--deadline-s 480)
    ./run.sh --help             # the options (deadline, phases, sizes)

DIR gets four files: summary.json, report.md, console.log, logs.tar.gz.
With CUDA only from PyTorch's pip wheels, activate that Python environment
first (or pass --python /path/to/venv/bin/python3): the libraries are found
in its site-packages. Under Slurm: srun --gpus=1 ./run.sh (--gpus=2 or more
adds the NCCL tests). Send back the four files. More: docs/gpu-kit.md.
EOF
mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out.partial" gdrotrain-gpu-kit
mv "$out.partial" "$out"
echo "make_gpu_kit: $out ($(awk -v b="$(wc -c <"$out")" 'BEGIN { printf "%.1f MiB", b / 1048576 }'); $commit; needs glibc >= $glibc)"
