#!/usr/bin/env python3
"""perf_breakdown.py: where a sink's CPU went, from `perf script` output of a system-wide
`perf record -g` (benchmarks/peers --perf).

Each sample is given to a process role by its call stack and command name (the lakehouse
stream worker, a Postgres backend, Postgres's own helpers, librdkafka's threads, Python, the
JVMs, the kernel's idle loop), and a Postgres sample also to what it was doing: the first
matching entry of CATEGORIES, looked for anywhere in the stack, so that a sample inside
COPY's relation extension counts there and not as "COPY's other work". Seconds are samples
over the sampling frequency (per core), so roles can be compared with each other and with
the sink's wall time.

Reads the `perf script -F comm,tid,ip,sym` text on standard input or from a file.
"""
import argparse
import collections
import sys

# (label, functions): the first whose function is on the stack takes the sample.
CATEGORIES = [
    ("first touch of shared_buffers pages (kernel zeroing them)", {"shmem_fault"}),
    ("heap extension: a page of zeros written per new block (mdextend)", {"mdextend"}),
    ("jsonb input (parse, build, sort keys)", {"jsonb_recv", "jsonb_in"}),
    ("commit (WAL write and flush)", {"XLogFlush", "RecordTransactionCommit"}),
    ("lakehouse's screening and COPY encoding", {"lh_message_problem", "lh_sink_add", "lh_sink_begin"}),
    ("librdkafka calls on the worker's thread", {"rd_kafka_consume_batch_queue", "rd_kafka_consume_queue",
                                                 "rd_kafka_consumer_poll", "rd_kafka_message_destroy",
                                                 "rd_kafka_queue_poll", "rd_kafka_poll"}),
    ("client protocol (reading COPY data from the socket)", {"CopyGetData", "pq_getbytes", "pq_getmessage",
                                                            "pq_recvbuf", "secure_read"}),
    ("COPY's other work (rows, tuples, heap and index inserts, WAL records)", {"CopyFrom"}),
]


def role_of(comm, stack):
    if "lakehouse_stream_main" in stack:
        return "lakehouse stream worker (main thread)"
    if comm.startswith("rdk:"):
        return "librdkafka threads (the worker's or a client's)"
    if "PostgresMain" in stack:
        return "Postgres backend (a client's session)"
    if comm == "postgres":
        return "Postgres helpers (checkpointer, WAL writer, background writer, ...)"
    if comm == "swapper":
        return "idle"
    if comm.startswith("python"):
        return "python"
    return comm


def read_samples(lines):
    """Yields (comm, [functions, leaf first]) per sample of `perf script -F comm,tid,ip,sym`."""
    comm, stack = None, []
    for line in lines:
        if not line.strip():
            continue
        if not line[0].isspace():
            if comm is not None:
                yield comm, stack
            fields = line.split()
            # "comm tid": the command name may hold spaces; the tid is the last field.
            comm, stack = " ".join(fields[:-1]) if len(fields) > 1 else fields[0], []
        else:
            fields = line.split(None, 1)
            if len(fields) == 2:
                stack.append(fields[1].split("+")[0].strip())
    if comm is not None:
        yield comm, stack


def breakdown(samples, freq):
    roles = collections.Counter()
    work = collections.defaultdict(collections.Counter)
    for comm, stack in samples:
        on_stack = set(stack)
        role = role_of(comm, on_stack)
        roles[role] += 1
        if role.startswith(("lakehouse stream worker", "Postgres backend")):
            for label, functions in CATEGORIES:
                if on_stack & functions:
                    work[role][label] += 1
                    break
            else:
                work[role]["other"] += 1
    out = ["| process | CPU s |", "|---|---|"]
    busy = [(role, n) for role, n in roles.most_common() if role != "idle"]
    for role, n in busy[:12]:
        out.append(f"| {role} | {n / freq:.2f} |")
    rest = sum(n for _, n in busy[12:])
    if rest:
        out.append(f"| {len(busy) - 12} other processes | {rest / freq:.2f} |")
    for role in sorted(work):
        total = sum(work[role].values())
        out += ["", f"{role}, {total / freq:.2f} CPU s:", "", "| what | share | CPU s |", "|---|---|---|"]
        for label, _ in CATEGORIES + [("other", None)]:
            n = work[role][label]
            if n:
                out.append(f"| {label} | {100 * n / total:.1f} % | {n / freq:.2f} |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("script", nargs="?", help="perf script output (default: standard input)")
    p.add_argument("--freq", type=float, required=True, help="perf record's sampling frequency, Hz")
    args = p.parse_args()
    if args.freq <= 0:
        p.error("--freq must be positive")
    with (open(args.script) if args.script else sys.stdin) as f:
        print(breakdown(read_samples(f), args.freq))


if __name__ == "__main__":
    main()
