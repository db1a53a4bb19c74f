#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with Python's protobuf and checks
them against its metrics.jsonl and validation.jsonl: an independent reader
for tools/tbevents (go test -run TestPythonReader ./trainer/).

It compiles TensorBoard's .proto files (vendored under
tools/tbevents/proto) with protoc --python_out into a temporary folder,
reads every record of every events.out.tfevents.* file with its own TFRecord
framing and its own CRC-32C (both CRCs of every record checked), and checks:
  - every file starts with a file_version event "brain.Event:2";
  - every number and boolean of every metrics.jsonl line is a scalar at the
    line's step, under <group>/<key>[/b<i>|/<i>…] with group one of train,
    gdro, perf, memory, with the same value (as float32), and no scalar is
    there that the JSONL does not hold;
  - every validation.jsonl figure is validation/<key> or
    validation/<benchmark>/<figure>;
  - no (tag, step) pair occurs twice across the files (resume dedup);
  - the config text is present.
Prints a JSON summary on success; exits 1 naming each problem otherwise.

  python3 scripts/read_tbevents.py PROTO_DIR RUN_DIR
"""
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile


def crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


TABLE = crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value


def records(path):
    with open(path, "rb") as f:
        raw = f.read()
    off = 0
    while off < len(raw):
        if off + 12 > len(raw):
            raise ValueError(f"{path}: torn header at byte {off}")
        head = raw[off:off + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", raw[off + 8:off + 12])
        if hcrc != masked(head):
            raise ValueError(f"{path}: bad length CRC at byte {off}")
        data = raw[off + 12:off + 12 + length]
        if len(data) != length or off + 16 + length > len(raw):
            raise ValueError(f"{path}: torn record at byte {off}")
        (dcrc,) = struct.unpack("<I", raw[off + 12 + length:off + 16 + length])
        if dcrc != masked(data):
            raise ValueError(f"{path}: bad data CRC at byte {off}")
        yield data
        off += 16 + length


def leaves(prefix, v, bins):
    """The JSON line's numbers and booleans as (key path, value)."""
    if isinstance(v, bool):
        yield prefix, 1.0 if v else 0.0
    elif isinstance(v, (int, float)):
        yield prefix, float(v)
    elif isinstance(v, list):
        for i, e in enumerate(v):
            yield from leaves(f"{prefix}/b{i}" if bins else f"{prefix}/{i}", e, False)
    elif isinstance(v, dict):
        for k, e in v.items():
            yield from leaves(f"{prefix}/{k}", e, False)


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def main():
    proto_dir, run_dir = sys.argv[1], sys.argv[2]
    out = tempfile.mkdtemp()
    protos = sorted(glob.glob(os.path.join(proto_dir, "tensorboard/compat/proto/*.proto")))
    subprocess.run(["protoc", "-I", proto_dir, "--python_out", out] +
                   [os.path.relpath(p, proto_dir) for p in protos], check=True)
    sys.path.insert(0, out)
    from tensorboard.compat.proto import event_pb2

    problems = []
    scalars = {}  # (tag, step) -> value
    seen = set()
    hist, texts, starts, nevents, nbytes = 0, 0, [], 0, 0
    files = sorted(glob.glob(os.path.join(run_dir, "tb", "events.out.tfevents.*")))
    if not files:
        problems.append("no event files in tb/")
    for path in files:
        nbytes += os.path.getsize(path)
        for i, data in enumerate(records(path)):
            ev = event_pb2.Event()
            ev.ParseFromString(data)
            nevents += 1
            what = ev.WhichOneof("what")
            if i == 0 and (what != "file_version" or ev.file_version != "brain.Event:2"):
                problems.append(f"{path}: first event is {what}, not file_version")
            if what == "session_log":
                starts.append(ev.step)
            if what != "summary":
                continue
            for v in ev.summary.value:
                key = (v.tag, ev.step, v.WhichOneof("value"))
                if key in seen:
                    problems.append(f"{v.tag} written twice at step {ev.step}")
                seen.add(key)
                kind = v.WhichOneof("value")
                if kind == "simple_value":
                    scalars[(v.tag, ev.step)] = v.simple_value
                elif kind == "histo":
                    hist += 1
                    h = v.histo
                    if len(h.bucket) != len(h.bucket_limit):
                        problems.append(f"{v.tag}: {len(h.bucket)} buckets, {len(h.bucket_limit)} limits")
                elif kind == "tensor" and v.metadata.plugin_data.plugin_name == "text":
                    texts += 1
                    if v.tag == "config" and b"train:" not in v.tensor.string_val[0]:
                        problems.append("config text has no train: section")

    def check(want, groups, what):
        got = {k: x for k, x in scalars.items() if k[0].split("/")[0] in groups}
        matched = set()
        for (path, step), x in want.items():
            hits = [(g + "/" + path, step) for g in groups if (g + "/" + path, step) in got]
            if len(hits) != 1:
                problems.append(f"{what} step {step}: {path} found {len(hits)} times")
                continue
            y = got[hits[0]]
            if not math.isclose(y, struct.unpack("<f", struct.pack("<f", x))[0], rel_tol=1e-6, abs_tol=1e-30):
                problems.append(f"{what} step {step}: {path} = {y}, want {x}")
            matched.add(hits[0])
        for k in got:
            if k not in matched:
                problems.append(f"scalar {k[0]} at step {k[1]} is not in {what}")

    met = read_jsonl(os.path.join(run_dir, "metrics.jsonl"))
    want = {}
    for line in met:
        for k, v in line.items():
            if k == "step":
                continue
            for path, x in leaves(k, v, k.startswith("bin_") or k == "arm_prob"):
                want[(path, line["step"])] = x
    check(want, ["train", "gdro", "perf", "memory"], "metrics.jsonl")

    val = read_jsonl(os.path.join(run_dir, "validation.jsonl"))
    want = {}
    for line in val:
        for k, v in line.items():
            if k in ("step", "prompt_correct"):
                continue
            if k == "benchmarks":
                for name, b in v.items():
                    for f, x in b.items():
                        if isinstance(x, dict):
                            for g, y in x.items():
                                want[(f"{name}/{g}", line["step"])] = float(y)
                        else:
                            want[(f"{name}/{f}", line["step"])] = float(x)
                continue
            for path, x in leaves(k, v, False):
                want[(path, line["step"])] = x
    check(want, ["validation"], "validation.jsonl")
    if texts == 0:
        problems.append("no config text")
    if problems:
        for p in problems[:50]:
            print("PROBLEM:", p, file=sys.stderr)
        print(f"{len(problems)} problems", file=sys.stderr)
        sys.exit(1)
    steps = sorted({s for (t, s) in scalars if t.startswith("train/")})
    print(json.dumps({"files": len(files), "events": nevents, "bytes": nbytes, "scalars": len(scalars),
                      "histograms": hist, "texts": texts, "session_starts": starts,
                      "train_steps": steps, "metrics_lines": len(met), "validation_lines": len(val)}))


if __name__ == "__main__":
    main()
