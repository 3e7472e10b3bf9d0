"""The Python side of `cargo xtask bench --only metrics`.

usage: bench_metrics.py write-wandb OUT_DIR STEPS
       bench_metrics.py read-wandb RUN_FILE
       bench_metrics.py read-jsonl METRICS_FILE

write-wandb logs one offline run with the real wandb SDK: the trainer's keys of
fixtures/wandb/log_offline_runs.py at steps 1..STEPS; it prints {"run_file": PATH}.

read-wandb reads a `run-<id>.wandb` file as WandB's Python SDK did before its reader moved to Go
(wandb <= 0.17's `DataStore.open_for_scan` + `scan_data`, which wandb 0.31 no longer ships):
LevelDB log chunks with their CRC-32 checked, split records joined, each record parsed with the
SDK's own `wandb_internal_pb2.Record`, and every history item's `value_json` read with
`json.loads` into one dict per step. read-jsonl reads a trainer's metrics file with `json.loads`
per line. Both print {"rows": N, "seconds": S, …}: the rows read and the seconds the read took,
measured inside the process, after the imports (read-wandb adds the wandb version and the
protobuf backend).
"""

import json
import os
import struct
import sys
import time
import zlib

HEADER_LEN = 7
BLOCK_LEN = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def write_wandb(out_dir, steps):
    os.environ["WANDB_MODE"] = "offline"
    os.environ.setdefault("WANDB_SILENT", "true")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, os.path.join(root, "fixtures", "wandb"))
    # The fixture's run, its keys and values, only longer.
    from log_offline_runs import log_trainer_run  # noqa: E402

    run_file, _ = log_trainer_run(out_dir, steps, group="bench-group", name="bench-run-trainer")
    print(json.dumps({"run_file": run_file}))


def records(f):
    """The record payloads of a WandB run file, as the SDK's DataStore scanned them."""
    header = f.read(HEADER_LEN)
    ident, magic, version = struct.unpack("<4sHB", header)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError("not a WandB run file")
    seeds = [zlib.crc32(bytes([kind])) for kind in range(LAST + 1)]
    index = HEADER_LEN
    pending = None
    while True:
        left = BLOCK_LEN - index % BLOCK_LEN
        if left < HEADER_LEN:
            if f.read(left) != b"\x00" * left:
                raise ValueError("invalid padding")
            index += left
        chunk_header = f.read(HEADER_LEN)
        if len(chunk_header) < HEADER_LEN:
            return
        checksum, length, kind = struct.unpack("<IHB", chunk_header)
        data = f.read(length)
        if zlib.crc32(data, seeds[kind]) != checksum:
            raise ValueError("record checksum is invalid")
        index += HEADER_LEN + length
        if kind == FULL:
            yield data
        elif kind == FIRST:
            pending = data
        elif kind == MIDDLE:
            pending += data
        elif kind == LAST:
            yield pending + data
            pending = None
        else:
            raise ValueError(f"unknown chunk type {kind}")


def read_wandb(path):
    import wandb
    from google.protobuf.internal import api_implementation
    from wandb.proto import wandb_internal_pb2

    about = {"wandb": wandb.__version__, "protobuf": api_implementation.Type()}

    started = time.perf_counter()
    history = {}
    with open(path, "rb") as f:
        for data in records(f):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(data)
            if record.WhichOneof("record_type") != "history":
                continue
            row = {}
            for item in record.history.item:
                name = ".".join(item.nested_key) if item.nested_key else item.key
                row[name] = json.loads(item.value_json)
            step = record.history.step.num if record.history.HasField("step") else row["_step"]
            history.setdefault(step, {}).update(row)
    return len(history), time.perf_counter() - started, about


def read_jsonl(path):
    started = time.perf_counter()
    rows, events = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            value = json.loads(line)
            (events if "event" in value else rows).append(value)
    rows.sort(key=lambda row: row["step"])
    return len(rows), time.perf_counter() - started, {}


def main(argv):
    if len(argv) == 4 and argv[1] == "write-wandb":
        write_wandb(argv[2], int(argv[3]))
        return
    if len(argv) == 3 and argv[1] in ("read-wandb", "read-jsonl"):
        reader = read_wandb if argv[1] == "read-wandb" else read_jsonl
        rows, seconds, about = reader(argv[2])
        print(json.dumps({"rows": rows, "seconds": seconds, **about}))
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
