#!/usr/bin/env python3
"""Spark Structured Streaming peer of the sink benchmark: Kafka -> Parquet files.

The architecture the project replaces: a micro-batch query reading a Kafka topic from the
earliest offset and appending each batch to a Parquet folder through Spark's file sink, whose
metadata log (OUT/_spark_metadata) decides which files belong to the table, with the Kafka
offsets in a checkpoint folder. Rows carry the Kafka partition, offset and timestamp next to
the payload, so spark_measure.py can check completeness and compute freshness.

Run it with the venv that spark-env prints: "$VENV/bin/python spark_sink.py --help".
It runs until SIGTERM or SIGINT, then stops the query (an unfinished batch is dropped and
redone by the next start) and exits 0.
"""
import argparse
import glob
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROG = "spark_sink"

# 100,000 offsets per trigger: sized so that one 10 s batch carries the ~10,000 events/s the
# pipeline the project replaces reports. With the 10 s trigger it also caps a backlog at
# 10,000 rows/s (a 100,000-row batch takes ~2-6 s here, then waits for the next trigger);
# shorter triggers drain faster. Override with --max-offsets-per-trigger.
DEFAULT_MAX_OFFSETS = 100_000


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(1)


def say(msg):
    print(f"{PROG}: {msg}", file=sys.stderr, flush=True)


def parse_args():
    p = argparse.ArgumentParser(
        prog="spark_sink.py",
        description="Stream a Kafka topic into a Parquet folder with Spark Structured Streaming "
                    "(local[2], 1 GB driver). Output columns: kafka_partition int, kafka_offset "
                    "bigint, kafka_timestamp timestamp (UTC, the message's Kafka timestamp), "
                    "payload string (the message value). Runs until SIGTERM/SIGINT.",
        epilog="Run with the python of the venv that spark-env prints; its jars/ folder holds "
               "the Kafka source. Restarting with the same --checkpoint resumes where the last "
               "committed batch ended.")
    p.add_argument("--brokers", required=True, help="Kafka bootstrap servers, HOST:PORT[,...]")
    p.add_argument("--topic", required=True, help="topic to read (all partitions)")
    p.add_argument("--out", required=True, metavar="DIR", help="Parquet output folder")
    p.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="checkpoint folder (Kafka offsets, batch commits)")
    p.add_argument("--trigger-seconds", type=float, default=10.0, metavar="S",
                   help="micro-batch interval in seconds (default 10, the seeds' setting); "
                        "0 = Spark's default trigger: the next batch starts as soon as the "
                        "previous one ends")
    p.add_argument("--max-offsets-per-trigger", type=int, default=DEFAULT_MAX_OFFSETS,
                   metavar="N",
                   help=f"cap on offsets per batch, over all partitions (default "
                        f"{DEFAULT_MAX_OFFSETS}); 0 = no cap")
    p.add_argument("--progress", metavar="FILE",
                   help="keep in FILE the number of rows of the batches completed so far "
                        "(from the query's progress reports), so that a harness can follow "
                        "the run without reading the Parquet files")
    a = p.parse_args()
    if a.trigger_seconds < 0:
        p.error("--trigger-seconds must be 0 or more")
    if a.max_offsets_per_trigger < 0:
        p.error("--max-offsets-per-trigger must be 0 or more")
    return a


def progress_file_listener():
    """A StreamingQueryListener class that keeps the rows of the completed batches in a
    file. Spark calls it once per batch (no polling of query.recentProgress, which would
    cost the JVM round trips the benchmark measures)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressFile(StreamingQueryListener):
        def __init__(self, path):
            self.path = path
            self.rows = 0
            self.counted = set()

        def onQueryStarted(self, event):
            pass

        def onQueryProgress(self, event):
            p = event.progress
            # An idle trigger reports the next batch id with no rows, and that id reports
            # again when the batch runs: count only reports with rows, each batch once.
            if p.numInputRows <= 0 or p.batchId in self.counted:
                return
            self.counted.add(p.batchId)
            self.rows += p.numInputRows
            tmp = self.path + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{self.rows}\n")
            os.replace(tmp, self.path)   # readers never see half a number

        def onQueryIdle(self, event):
            pass

        def onQueryTerminated(self, event):
            pass

    return ProgressFile


def find_jars():
    # spark-env puts the jars beside the venv's python: sys.prefix is the venv.
    jars = sorted(glob.glob(os.path.join(sys.prefix, "jars", "*.jar")))
    if len(jars) != 4:
        die(f"expected the 4 jars of pom.xml in {sys.prefix}/jars, found {len(jars)}; "
            f"run this script with the python of the venv that "
            f"benchmarks/peers-lib/spark/spark-env prints")
    return jars


def main():
    args = parse_args()
    jars = find_jars()
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import col
    except ImportError:
        die("pyspark is missing; run with the python of the venv that spark-env prints")

    # Everything on loopback: no "hostname resolves to a loopback address" warning, and no
    # port opened on another interface.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    stop_requested = []

    def on_signal(signum, _frame):
        stop_requested.append(signum)

    # Installed before the JVM starts, so a signal during start-up is not lost either.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    t0 = time.time()
    log4j = "file:" + os.path.join(HERE, "log4j2.properties")
    spark = (SparkSession.builder
             .appName("lakehouse-peer-spark")
             .master("local[2]")
             # Read when the JVM starts, so they must be set here (not in spark.conf later).
             .config("spark.driver.memory", "1g")
             .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log4j}")
             .config("spark.jars", ",".join(jars))
             .config("spark.driver.host", "127.0.0.1")
             .config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.ui.enabled", "false")
             # No progress bar on stderr (it draws one per stage, so many per batch).
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             # Streaming queries ignore adaptive execution anyway; off, Spark stops warning
             # about it at every start.
             .config("spark.sql.adaptive.enabled", "false")
             .config("spark.sql.session.timeZone", "UTC")
             # A plain int64 Parquet timestamp rather than the legacy INT96 default.
             .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
             # Keep every per-batch file of _spark_metadata: after a compaction (N.compact every
             # 10 batches) Spark would otherwise delete the earlier ones, and with them the
             # batch each data file was committed in, which spark_measure.py needs for
             # freshness. The log stays small at benchmark sizes.
             .config("spark.sql.streaming.fileSink.log.deletion", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    say(f"Spark {spark.version} up in {time.time() - t0:.1f} s")

    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", args.brokers)
              .option("subscribe", args.topic)
              .option("startingOffsets", "earliest"))
    if args.max_offsets_per_trigger > 0:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    rows = reader.load().select(
        col("partition").alias("kafka_partition"),
        col("offset").alias("kafka_offset"),
        col("timestamp").alias("kafka_timestamp"),
        col("value").cast("string").alias("payload"))

    writer = (rows.writeStream.format("parquet")
              .queryName("peer_spark")
              .option("path", args.out)
              .option("checkpointLocation", args.checkpoint)
              .outputMode("append"))
    if args.trigger_seconds > 0:
        writer = writer.trigger(processingTime=f"{int(round(args.trigger_seconds * 1000))} milliseconds")
    if args.progress:
        spark.streams.addListener(progress_file_listener()(args.progress))
    query = writer.start()
    say(f"query started: topic {args.topic} -> {args.out}, trigger "
        f"{args.trigger_seconds:g} s, maxOffsetsPerTrigger {args.max_offsets_per_trigger or 'none'}")

    failed = None
    try:
        # Short waits so the Python signal handler gets to run (it cannot while a py4j call
        # blocks the main thread).
        while not stop_requested:
            if query.awaitTermination(0.5):
                break
    except Exception as e:  # the query died (StreamingQueryException) or the JVM went away
        failed = e

    if stop_requested:
        # Further signals must not interrupt the orderly stop below.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        say(f"signal {stop_requested[0]}: stopping the query")
        try:
            query.stop()
            spark.stop()
        except Exception as e:
            # The JVM got the signal too (sent to the whole process group) and shut itself
            # down: the output is still consistent, since only committed batches count.
            say(f"the JVM was already stopping ({type(e).__name__}); output stays at the last "
                f"committed batch")
        say("stopped")
        return 0
    if failed is None:
        failed = query.exception()
    say(f"the query ended by itself: {failed}")
    try:
        spark.stop()
    except Exception:
        pass
    return 1


if __name__ == "__main__":
    sys.exit(main())
