#!/usr/bin/env python3
"""report.py: turns benchmarks/peers' figures (a TSV: run, system, measure, value) into the
markdown tables appended to benchmarks/results.md and, with --plots, PNG plots (matplotlib).

Every figure is given as its range over the runs (min to max); every ratio is computed within
one run (lakehouse against a peer measured minutes apart on the same machine) and then given
as a range, so a slow hour of the machine cannot make one system look better than another.
The targets are those of issue 12; each line says met or missed, and by how much.
"""
import argparse
import collections
import sys

SINKS = ["lakehouse", "copy", "python", "connect", "spark10", "sparkfast"]
LABEL = {
    "lakehouse": "lakehouse (stream worker)",
    "copy": "plain COPY (ceiling)",
    "python": "Python sink (confluent-kafka + psycopg COPY)",
    "connect": "Kafka Connect + Debezium JDBC sink",
    "spark10": "Spark Structured Streaming, trigger 10 s",
    "sparkfast": "Spark Structured Streaming, shortest trigger",
    "lakehouse-producer": "lakehouse-producer",
    "python-producer": "Python producer (fastjsonschema)",
    "kcat": "kcat -P (no validation, keyed by wiki: the ceiling)",
}
JVM = ["connect", "spark10", "sparkfast"]


def load(path):
    # fig[system][measure][run] = value; memory is recorded once per phase: keep the peak.
    fig = collections.defaultdict(lambda: collections.defaultdict(dict))
    with open(path) as f:
        for line in f:
            run, system, measure, value = line.rstrip("\n").split("\t")
            v = float(value)
            old = fig[system][measure].get(run)
            fig[system][measure][run] = v if old is None else max(old, v)
    return fig


def rng(values, fmt="{:,.0f}"):
    if not values:
        return "n/a"
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else fmt.format(lo) + " to " + fmt.format(hi)


RUNS = None   # how many runs the figures should cover (--runs); None: whatever is there


def per_run_ratio(fig, a, b, measure):
    """a / b per run, for runs where both were measured."""
    ra, rb = fig[a][measure], fig[b][measure]
    return [ra[r] / rb[r] for r in sorted(ra) if r in rb and rb[r] > 0]


def judged(fig, a, b, measure):
    """The per-run ratios when both sides were measured in every run, else None."""
    r = per_run_ratio(fig, a, b, measure)
    if not r or (RUNS is not None and len(r) < RUNS):
        return None
    return r


def rates_of(fig):
    rates = set()
    for system in fig:
        for m in fig[system]:
            if m.startswith("fresh_") and m.endswith("_p95"):
                rates.add(m[len("fresh_"):-len("_p95")])
    return sorted(rates, key=lambda r: (r == "max", int(r) if r.isdigit() else 0))


def tables(fig, out):
    sinks = [s for s in SINKS if s in fig]
    w = out.write
    if sinks:
        w("| sink | rows/s from the backlog | lakehouse / sink (same run) | CPU s per million rows "
          "| sink CPU / lakehouse CPU | own private memory, peak MiB | whole system, peak MiB |\n")
        w("|---|---|---|---|---|---|---|\n")
        for s in sinks:
            f = fig[s]
            ratio = "" if s == "lakehouse" else rng(per_run_ratio(fig, "lakehouse", s, "rows_per_s"), "{:.2f}")
            cpu_ratio = "" if s == "lakehouse" else rng(per_run_ratio(fig, s, "lakehouse", "cpu_s_per_m"), "{:.2f}")
            w(f"| {LABEL[s]} | {rng(list(f['rows_per_s'].values()))} | {ratio} "
              f"| {rng(list(f['cpu_s_per_m'].values()), '{:.1f}')} | {cpu_ratio} "
              f"| {rng(list(f['own_anon_mib'].values()))} | {rng(list(f['system_mib'].values()))} |\n")
        w("\n")
    rates = rates_of(fig)
    if rates:
        w("Freshness, Kafka timestamp to visible in the sink, p50 / p95 / p99 (seconds; range over runs):\n\n")
        w("| sink | " + " | ".join(("the highest rate searched, from 0.8x its backlog rate" if r == "max" else f"{int(r):,} events/s") for r in rates) + " |\n")
        w("|---|" + "---|" * len(rates) + "\n")
        for s in sinks:
            cells = []
            for r in rates:
                p = [fig[s].get(f"fresh_{r}_{q}", {}) for q in ("p50", "p95", "p99")]
                if not p[1]:
                    cells.append("")
                    continue
                cell = " / ".join(rng(list(x.values()), "{:.3f}") for x in p)
                if r == "max":
                    kept = list(fig[s].get("max_kept_up", {}).values())
                    behind = sum(1 for k in kept if k < 1)
                    note = ("" if not kept else " (kept up)" if not behind
                            else f" (fell behind in {behind} of {len(kept)} runs)")
                    cell = f"at {rng(list(fig[s]['max_rate'].values()))}/s{note}: " + cell
                cells.append(cell)
            if any(cells):
                w(f"| {LABEL[s]} | " + " | ".join(cells) + " |\n")
        w("\n")
    prods = [p for p in ("lakehouse-producer", "python-producer", "kcat") if p in fig]
    if prods:
        w("| producer | events/s from a file (the producers validate; kcat does not) | lakehouse-producer / producer | CPU s per million events | peak RSS, MiB | dead-lettered |\n")
        w("|---|---|---|---|---|---|\n")
        for p in prods:
            f = fig[p]
            ratio = "" if p == "lakehouse-producer" else rng(per_run_ratio(fig, "lakehouse-producer", p, "events_per_s"), "{:.2f}")
            w(f"| {LABEL[p]} | {rng(list(f['events_per_s'].values()))} | {ratio} "
              f"| {rng(list(f['cpu_s_per_m'].values()), '{:.1f}')} | {rng(list(f['peak_rss_mib'].values()))} "
              f"| {rng(list(f['dead_lettered'].values()))} |\n")
        w("\n")


def verdict(ok, text):
    return ("met" if ok else "**missed**") + ": " + text


def targets(fig, out):
    w = out.write
    lines = []

    def judge(a, b, measure, ok, text):
        """One verdict on the per-run ratios a/b; 'not measured' unless every run has both."""
        r = judged(fig, a, b, measure)
        if r is None:
            lines.append(f"not measured in every run: {text.format(ratio='n/a')}")
        else:
            lines.append(verdict(ok(min(r), max(r)), text.format(ratio=rng(r, "{:.2f}"))))

    peers = [s for s in ("python", "connect", "spark10", "sparkfast") if s in fig]
    if "copy" in fig:
        judge("lakehouse", "copy", "rows_per_s", lambda lo, hi: lo >= 0.9,
              "lakehouse >= 0.9x the COPY ceiling in every run (lakehouse / COPY {ratio})")
    for s in peers:
        judge("lakehouse", s, "rows_per_s", lambda lo, hi: lo > 1,
              f"throughput above {LABEL[s]} in every run (lakehouse / it {{ratio}})")
    for s in peers:
        need = 3 if s in JVM else 1
        judge(s, "lakehouse", "cpu_s_per_m", lambda lo, hi, need=need: lo >= need if need > 1 else lo > 1,
              f"CPU per million rows {'at least 3x lower than' if need > 1 else 'lower than'} {LABEL[s]} (its CPU / lakehouse's {{ratio}})")
    if "spark10" in fig:
        judge("spark10", "lakehouse", "fresh_10000_p95", lambda lo, hi: lo >= 10,
              "freshness p95 at 10,000 events/s at least 10x better than Spark with a 10 s trigger (Spark p95 / lakehouse p95 {ratio})")
    for s in peers:
        for rate in rates_of(fig):
            if rate != "max":
                judge(s, "lakehouse", f"fresh_{rate}_p95", lambda lo, hi: lo > 1,
                      f"freshness p95 at {int(rate):,} events/s better than {LABEL[s]} (its p95 / lakehouse's {{ratio}})")
    for s in [j for j in JVM if j in fig]:
        o = per_run_ratio(fig, s, "lakehouse", "own_anon_mib")
        judge(s, "lakehouse", "system_mib", lambda lo, hi: lo > 1,
              f"memory below {LABEL[s]}: whole system (Postgres's shared_buffers included for lakehouse), its / lakehouse's {{ratio}}; own private memory, its / the stream worker's {rng(o, '{:.1f}')}")
    if "lakehouse-producer" in fig or "python-producer" in fig:
        ceiling = ""
        if "kcat" in fig and "python-producer" in fig:
            c = per_run_ratio(fig, "kcat", "python-producer", "events_per_s")
            ceiling = f"; the ceiling, kcat publishing the same file unvalidated, was {rng(c, '{:.2f}')}x the Python producer"
        judge("lakehouse-producer", "python-producer", "events_per_s", lambda lo, hi: lo >= 4,
              "lakehouse-producer >= 4x the Python producer with fastjsonschema (ratio {ratio}" + ceiling + ")")
    if lines:
        w("Targets (issue 12), judged on every run:\n\n")
        for line in lines:
            w(f"- {line}\n")
        w("\n")


def plots(fig, folder):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def bars(measure, title, ylabel, name, systems, log=False):
        systems = [s for s in systems if fig[s].get(measure)]
        if not systems:
            return
        lo = [min(fig[s][measure].values()) for s in systems]
        hi = [max(fig[s][measure].values()) for s in systems]
        mid = [(a + b) / 2 for a, b in zip(lo, hi)]
        fig_, ax = plt.subplots(figsize=(9, 4.5))
        ax.bar(range(len(systems)), mid, yerr=[[m - a for m, a in zip(mid, lo)], [b - m for m, b in zip(mid, hi)]],
               capsize=4, color=["#2b6cb0" if s.startswith("lakehouse") else "#a0aec0" for s in systems])
        ax.set_xticks(range(len(systems)))
        ax.set_xticklabels([LABEL[s].replace(" (", "\n(").replace(", ", ",\n") for s in systems], fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_title(title + " (bar: middle of the runs' range; whiskers: min and max)", fontsize=9)
        if log:
            ax.set_yscale("log")
        fig_.tight_layout()
        fig_.savefig(f"{folder}/{name}.png", dpi=100)
        plt.close(fig_)

    sinks = [s for s in SINKS if s in fig]
    bars("rows_per_s", "Kafka to sink, rows/s from a preloaded backlog", "rows/s", "throughput", sinks)
    bars("cpu_s_per_m", "CPU seconds per million rows, all the sink's processes", "CPU s", "cpu", sinks)
    rates = [r for r in rates_of(fig) if r != "max"]
    if rates:
        fig_, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / max(1, len(sinks))
        for i, s in enumerate(s for s in sinks if fig[s].get(f"fresh_{rates[0]}_p95")):
            for j, q in enumerate(("p50", "p95", "p99")):
                pts = [(int(r), max(fig[s][f"fresh_{r}_{q}"].values())) for r in rates
                       if fig[s].get(f"fresh_{r}_{q}")]
                ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", linestyle=["-", "--", ":"][j],
                        label=f"{s} {q}" if q == "p95" else None, color=f"C{i}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("events/s")
        ax.set_ylabel("seconds (worst of the runs)")
        ax.set_title("Freshness: Kafka timestamp to visible; solid p50, dashed p95, dotted p99", fontsize=9)
        ax.legend(fontsize=7)
        fig_.tight_layout()
        fig_.savefig(f"{folder}/freshness.png", dpi=100)
        plt.close(fig_)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("figures", help="the TSV benchmarks/peers wrote")
    ap.add_argument("--plots", metavar="DIR", help="also draw PNG plots into DIR")
    ap.add_argument("--runs", type=int, help="runs the figures should cover: a target is "
                    "judged only when both sides were measured in each")
    ap.add_argument("--spark-fast-trigger", metavar="S",
                    help="sparkfast's trigger in seconds, for its label, when the figures do "
                    "not hold it (benchmarks/peers records it as the trigger_s figure; "
                    "0: Spark's default trigger, batches back to back)")
    args = ap.parse_args()
    global RUNS
    RUNS = args.runs
    fig = load(args.figures)
    recorded = sorted(set(fig.get("sparkfast", {}).get("trigger_s", {}).values()))
    if recorded:
        t = " or ".join(f"{v:g}" for v in recorded)
    elif args.spark_fast_trigger is not None:
        t = f"{float(args.spark_fast_trigger):g}"
    else:
        t = None
    if t is not None:
        LABEL["sparkfast"] = (f"Spark Structured Streaming, trigger {t} s"
                              + (" (batches back to back)" if t == "0" else ""))
    tables(fig, sys.stdout)
    targets(fig, sys.stdout)
    if args.plots:
        plots(fig, args.plots)


if __name__ == "__main__":
    main()
