#!/usr/bin/env python3
"""Measures what the Spark peer (spark_sink.py) committed, from its output folder alone.

Spark's file sink commits batch N by writing OUT/_spark_metadata/N, listing the Parquet files
of that batch; files not listed there (a batch cut short by a crash) are not part of the table.
So a batch's commit time is the mtime of its metadata file, and each row's freshness is that
time minus the row's Kafka timestamp. Prints one JSON object on stdout. Safe to run while the
sink runs (metadata files appear by an atomic rename, complete). Needs pyarrow: run it with
the python of the venv that spark-env prints.

Compaction: every 10th batch (N + 1 divisible by 10) is written as N.compact, holding the
entries of all batches up to N, not only batch N's. Batches are read in id order and a
compact file's own batch is its entries minus those of the earlier batches already read.
spark_sink.py keeps the per-batch files (fileSink.log.deletion=false); if a log had its
earlier files deleted, their entries cannot be told apart from batch N's: they are counted
under N and the output says so ("exact": false).
"""
import argparse
import bisect
import json
import os
import re
import sys
from urllib.parse import unquote, urlparse

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError:
    sys.exit("spark_measure: error: pyarrow is missing; run with the python of the venv "
             "that benchmarks/peers-lib/spark/spark-env prints")

LOG_NAME = re.compile(r"^(\d+)(\.compact)?$")


def parse_args():
    p = argparse.ArgumentParser(
        prog="spark_measure.py",
        description="Per committed batch of a spark_sink.py output folder: batch id, commit "
                    "time (mtime of _spark_metadata/N), rows, min/max Kafka timestamp; totals, "
                    "distinct (partition, offset) count, throughput and freshness percentiles. "
                    "JSON on stdout; times in epoch seconds.")
    p.add_argument("out", metavar="DIR", help="the --out folder of spark_sink.py")
    p.add_argument("--from", dest="t_from", type=float, metavar="EPOCH_S",
                   help="freshness only over rows whose Kafka timestamp is >= this")
    p.add_argument("--to", dest="t_to", type=float, metavar="EPOCH_S",
                   help="freshness only over rows whose Kafka timestamp is <= this")
    p.add_argument("--started", type=float, metavar="EPOCH_S",
                   help="when the sink was started: adds startup_s = first commit - this")
    p.add_argument("--no-batches", action="store_true",
                   help="leave the per-batch list out of the output")
    return p.parse_args()


def read_log_file(path):
    """The entries of one metadata file: {data file path: action}, in file order."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{path}: not a file sink log (no version line)")
    entries = {}
    for line in lines[1:]:
        if line.strip():
            e = json.loads(line)
            entries[e["path"]] = e.get("action", "add")
    return entries


def local_path(uri):
    u = urlparse(uri)
    return unquote(u.path) if u.scheme in ("", "file") else uri


def to_epoch_seconds(column):
    """A Parquet timestamp column as epoch seconds (floats), whatever its unit."""
    t = column.type
    if not pa.types.is_timestamp(t):
        raise ValueError(f"kafka_timestamp has type {t}, not a timestamp")
    scale = {"s": 1, "ms": 1e3, "us": 1e6, "ns": 1e9}[t.unit]
    return [None if v is None else v / scale
            for v in column.cast(pa.int64()).to_pylist()]


def percentile(sorted_values, q):
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return None
    k = max(0, min(len(sorted_values) - 1, int(-(-q * len(sorted_values) // 100)) - 1))
    return sorted_values[k]


def main():
    args = parse_args()
    meta = os.path.join(args.out, "_spark_metadata")
    if not os.path.isdir(meta):
        sys.exit(f"spark_measure: error: {meta} not found: no batch committed yet, or "
                 f"{args.out} is not a spark_sink.py output folder")

    logs = {}  # batch id -> (file name, is compact)
    for name in os.listdir(meta):
        m = LOG_NAME.match(name)
        if m:
            logs[int(m.group(1))] = (name, m.group(2) is not None)
    ids = sorted(logs)

    exact = True
    notes = []
    seen = set()         # data files added by the batches read so far
    batches = []
    for i, bid in enumerate(ids):
        name, compact = logs[bid]
        path = os.path.join(meta, name)
        commit = os.stat(path).st_mtime
        entries = read_log_file(path)
        added = [p for p, act in entries.items() if act == "add" and p not in seen]
        if compact:
            # Every batch before this one must have been read, or some of the new entries
            # belong to a deleted batch file.
            missing = [b for b in range(bid) if b not in logs]
            if missing and exact:
                exact = False
                notes.append(f"batches {missing[0]}..{missing[-1]} have no metadata file "
                             f"(deleted after compaction): their rows are counted under "
                             f"batch {bid}")
        seen.update(added)
        batches.append({"batch": bid, "commit_time": commit, "files": added,
                        "compact": compact})

    # Files in the folder that no committed batch lists: output of batches cut short.
    listed = {os.path.realpath(local_path(p)) for p in seen}
    stray = 0
    for dirpath, dirnames, filenames in os.walk(args.out):
        dirnames[:] = [d for d in dirnames if d != "_spark_metadata"]
        for f in filenames:
            if f.endswith(".parquet") and os.path.realpath(os.path.join(dirpath, f)) not in listed:
                stray += 1

    keys = set()
    parts = {}
    fresh = []
    total = 0
    duplicates = 0
    for b in batches:
        rows = 0
        tmin = tmax = None
        for p in b["files"]:
            t = pq.read_table(local_path(p),
                              columns=["kafka_partition", "kafka_offset", "kafka_timestamp"])
            ts = to_epoch_seconds(t.column("kafka_timestamp"))
            pcol = t.column("kafka_partition").to_pylist()
            ocol = t.column("kafka_offset").to_pylist()
            rows += t.num_rows
            for part, off, when in zip(pcol, ocol, ts):
                k = (part, off)
                if k in keys:
                    duplicates += 1
                else:
                    keys.add(k)
                    st = parts.setdefault(part, [0, off, off])
                    st[0] += 1
                    st[1] = min(st[1], off)
                    st[2] = max(st[2], off)
                if when is None:
                    continue
                tmin = when if tmin is None else min(tmin, when)
                tmax = when if tmax is None else max(tmax, when)
                if (args.t_from is None or when >= args.t_from) and \
                        (args.t_to is None or when <= args.t_to):
                    fresh.append(b["commit_time"] - when)
        b["rows"] = rows
        b["min_kafka_ts"] = tmin
        b["max_kafka_ts"] = tmax
        b["files"] = len(b["files"])
        total += rows

    result = {"out": os.path.abspath(args.out), "exact": exact, "notes": notes,
              "committed_batches": len(batches), "total_rows": total,
              "distinct_partition_offsets": len(keys), "duplicate_rows": duplicates,
              "unreferenced_parquet_files": stray,
              # Per partition: rows, lowest and highest offset. Every offset present once
              # when rows == max - min + 1 (and the topic has no gaps: no transactions).
              "partitions": {str(p): {"rows": v[0], "min_offset": v[1], "max_offset": v[2]}
                             for p, v in sorted(parts.items())}}
    if batches:
        first, last = batches[0], batches[-1]
        result["first_commit"] = first["commit_time"]
        result["last_commit"] = last["commit_time"]
        span = last["commit_time"] - first["commit_time"]
        # Batch 0 carries the start-up; the rate counts the rows committed after it.
        result["throughput_rows_per_s"] = (total - first["rows"]) / span if span > 0 else None
        if args.started is not None:
            result["startup_s"] = first["commit_time"] - args.started
    fresh.sort()
    result["freshness_s"] = {"window": {"from": args.t_from, "to": args.t_to},
                             "rows": len(fresh),
                             "p50": percentile(fresh, 50), "p95": percentile(fresh, 95),
                             "p99": percentile(fresh, 99),
                             "max": fresh[-1] if fresh else None}
    if not args.no_batches:
        result["batches"] = batches
    json.dump(result, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
