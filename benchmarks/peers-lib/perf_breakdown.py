#!/usr/bin/env python3
"""perf_breakdown.py: where a sink's CPU went, from `perf script -F comm,pid,tid,ip,sym`
output of a system-wide `perf record -g` (benchmarks/peers --perf).

Samples are grouped by process (pid). A Postgres process is the lakehouse stream worker when
any of its samples has lakehouse_stream_main on the stack, a backend when any has
PostgresMain, and one of Postgres's own helpers otherwise; judging the whole process, not
each sample, keeps the worker's samples whose stack could not be unwound (librdkafka has no
frame pointers) with the worker. librdkafka's threads (named rdk:*) are listed apart. Any
other process (a JVM, Python, the load generator) is one row named by its pid and its
busiest thread names, so the Kafka broker and a Spark or Connect JVM are told apart, and
each such process that took a tenth of the samples or more is broken down by thread group
(the thread name without its number: a JVM's executor tasks, garbage collector, JIT
compilers, Kafka client threads) with the share of each taken in the kernel (the sampled
address is a kernel one: system calls, page faults, and interrupt work charged to the
thread it interrupted), which is how a JVM peer's CPU is explained without Java symbols.
For the stream worker and the backends, each sample is also given to what it was doing:
the first entry of CATEGORIES whose functions are on its stack, so that a sample inside
COPY's heap extension counts there and not as "COPY's other work". Seconds are samples over the
sampling frequency (per core). The kernel's idle loop is left out.

Exits 1 when the input holds no sample (perf recorded nothing, or its output was lost).
"""
import argparse
import collections
import re
import sys

CLEAR_PAGE = {"clear_page_erms", "clear_page_rep", "clear_page_orig"}

# (label, test of the set of functions on a sample's stack): the first that holds takes it.
CATEGORIES = [
    ("first touch of shared_buffers pages (kernel zeroing them)",
     lambda f: "shmem_fault" in f and bool(f & CLEAR_PAGE)),
    ("heap extension: a page of zeros written per new block (mdextend)", lambda f: "mdextend" in f),
    ("jsonb input (parse, build, sort keys)", lambda f: bool(f & {"jsonb_recv", "jsonb_in"})),
    ("commit (WAL write and flush)", lambda f: bool(f & {"XLogFlush", "RecordTransactionCommit"})),
    ("lakehouse's screening and COPY encoding",
     lambda f: bool(f & {"lh_message_problem", "lh_sink_add", "lh_sink_begin"})),
    ("librdkafka calls on the worker's thread", lambda f: any(x.startswith("rd_kafka_") for x in f)),
    ("client protocol (reading COPY data from the socket)",
     lambda f: bool(f & {"CopyGetData", "pq_getbytes", "pq_getmessage", "pq_recvbuf", "secure_read"})),
    ("COPY's other work (rows, tuples, heap and index inserts, WAL records)", lambda f: "CopyFrom" in f),
]
WORKER = "lakehouse stream worker"
BACKEND = "Postgres backend (a client's session)"
HELPERS = "Postgres helpers (checkpointer, WAL writer, background writer, ...)"
RDKAFKA = "librdkafka threads (the worker's or a client's)"


def read_samples(lines):
    """Yields (comm, pid, set of functions on the stack, whether the sample was taken in the
    kernel) per sample. The first stack line is where the CPU was: a kernel address
    (0xffff...) means the kernel."""
    comm = pid = None
    stack = set()
    in_kernel = first = False
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        if not line[0].isspace():
            if comm is not None:
                yield comm, pid, stack, in_kernel
            # "comm pid/tid": the command name may hold spaces; pid/tid is the last field.
            fields = line.split()
            comm, pid, stack, in_kernel = " ".join(fields[:-1]), fields[-1].split("/")[0], set(), False
            first = True
        elif comm is not None:
            fields = line.split(None, 1)
            if first:
                in_kernel, first = fields[0].lower().startswith("ffff"), False
            if len(fields) == 2:
                stack.add(fields[1].split("+")[0].strip())
    if comm is not None:
        yield comm, pid, stack, in_kernel


def thread_group(comm):
    """A thread name without its number: "GC Thread#0" and "GC Thread#1" are "GC Thread"."""
    return re.sub(r"[#\-]?\d+$", "", comm).rstrip() or comm


def breakdown(samples, freq):
    samples = list(samples)
    if not samples:
        return None
    # What each Postgres process is, from all of its samples.
    pg_kind = {}
    for comm, pid, funcs, _ in samples:
        if comm == "postgres":
            if "lakehouse_stream_main" in funcs:
                pg_kind[pid] = WORKER
            elif "PostgresMain" in funcs and pg_kind.get(pid) != WORKER:
                pg_kind[pid] = BACKEND
    rows = collections.Counter()
    threads = collections.defaultdict(collections.Counter)
    work = collections.defaultdict(collections.Counter)
    groups = collections.defaultdict(collections.Counter)
    group_kernel = collections.defaultdict(collections.Counter)
    for comm, pid, funcs, in_kernel in samples:
        if comm == "swapper":
            continue
        if comm == "postgres":
            role = pg_kind.get(pid, HELPERS)
        elif comm.startswith("rdk:"):
            role = RDKAFKA
        else:
            role = "pid " + pid
            threads[role][comm] += 1
            groups[role][thread_group(comm)] += 1
            group_kernel[role][thread_group(comm)] += in_kernel
        rows[role] += 1
        if role in (WORKER, BACKEND):
            for label, holds in CATEGORIES:
                if holds(funcs):
                    work[role][label] += 1
                    break
            else:
                work[role]["other"] += 1

    def name(role):
        if role in threads:
            return f"{role} ({', '.join(c for c, _ in threads[role].most_common(3))})"
        return role

    out = ["| process | CPU s |", "|---|---|"]
    ranked = rows.most_common()
    for role, n in ranked[:12]:
        out.append(f"| {name(role)} | {n / freq:.2f} |")
    rest = sum(n for _, n in ranked[12:])
    if rest:
        out.append(f"| {len(ranked) - 12} other processes | {rest / freq:.2f} |")
    for role in sorted(work):
        total = sum(work[role].values())
        out += ["", f"{role}, {total / freq:.2f} CPU s:", "", "| what | share | CPU s |", "|---|---|---|"]
        for label, _ in CATEGORIES + [("other", None)]:
            n = work[role][label]
            if n:
                out.append(f"| {label} | {100 * n / total:.1f} % | {n / freq:.2f} |")
    everything = sum(rows.values())
    for role, n in ranked:
        if role not in groups or n < everything / 10:
            continue
        out += ["", f"{name(role)} by thread group, {n / freq:.2f} CPU s:", "",
                "| thread group | share | CPU s | of which in the kernel |", "|---|---|---|---|"]
        for group, k in groups[role].most_common(10):
            out.append(f"| {group} | {100 * k / n:.1f} % | {k / freq:.2f} | "
                       f"{100 * group_kernel[role][group] / k:.0f} % |")
        rest = sum(k for _, k in groups[role].most_common()[10:])
        if rest:
            out.append(f"| {len(groups[role]) - 10} other groups | {100 * rest / n:.1f} % | {rest / freq:.2f} | |")
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("script", nargs="?", help="perf script output (default: standard input)")
    p.add_argument("--freq", type=float, required=True, help="perf record's sampling frequency, Hz")
    args = p.parse_args()
    if args.freq <= 0:
        p.error("--freq must be positive")
    with (open(args.script) if args.script else sys.stdin) as f:
        table = breakdown(read_samples(f), args.freq)
    if table is None:
        sys.exit("perf_breakdown: no samples in the input")
    print(table)


if __name__ == "__main__":
    main()
