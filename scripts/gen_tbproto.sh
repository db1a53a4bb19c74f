#!/usr/bin/env bash
# Generates tools/tbevents/tbpb/*.pb.go from TensorBoard's .proto files
# vendored unmodified under tools/tbevents/proto/ (see the README there).
# Needs protoc (Debian: protobuf-compiler); protoc-gen-go is built from the
# google.golang.org/protobuf version go.mod requires, so the output depends
# only on that version and protoc's.
#
#   bash scripts/gen_tbproto.sh          # rewrite tools/tbevents/tbpb
#   bash scripts/gen_tbproto.sh OUTDIR   # write to OUTDIR instead (the test
#                                        # compares it with the committed files)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-tools/tbevents/tbpb}
command -v protoc >/dev/null || { echo "gen_tbproto: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
pkg=github.com/gdrotrain/gdrotrain/tools/tbevents/tbpb
protos=(event summary tensor tensor_shape types resource_handle histogram)
opts=()
files=()
for p in "${protos[@]}"; do
	f=tensorboard/compat/proto/$p.proto
	opts+=("--go_opt=M$f=$pkg;tbpb")
	files+=("$f")
done
mkdir -p "$tmp/gen" "$out"
protoc --plugin=protoc-gen-go="$tmp/protoc-gen-go" -I tools/tbevents/proto \
	--go_out="$tmp/gen" --go_opt=paths=source_relative "${opts[@]}" "${files[@]}"
for p in "${protos[@]}"; do
	cp "$tmp/gen/tensorboard/compat/proto/$p.pb.go" "$out/$p.pb.go"
done
