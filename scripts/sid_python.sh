#!/usr/bin/env bash
# sid_python.sh: python3 of the Debian sid chroot (scripts/sid_chroot.sh: PyTorch 2.14 CPU,
# transformers 5, OpenBLAS), usable wherever an interpreter path is expected, e.g. the CPU
# baseline of the benchmark:
#
#   bash scripts/sid_chroot.sh                                   # once: make the chroot
#   bin/gdrotrain bench --torch-python scripts/sid_python.sh
#
# Arguments, standard input and output, the current folder (inside the repository or /tmp) and
# the thread-count variables pass through; see sid_chroot.sh `run`.
exec bash "$(dirname "$0")/sid_chroot.sh" run python3 "$@"
