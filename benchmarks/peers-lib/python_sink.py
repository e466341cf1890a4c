#!/usr/bin/env python3
"""python_sink.py: the hand-written Kafka -> PostgreSQL sink peer of benchmarks/peers.

What a competent team writes when it does not use a framework: confluent-kafka reads the
topic, psycopg 3 COPYs each batch into a table, and the next offset of every partition is
stored in PostgreSQL in the same transaction as the rows. Kafka's group offsets are never
used, so a crash at any point loses nothing and duplicates nothing: on restart the sink
reads its offsets back from the table it writes. Run with the venv of python-env.
"""
import argparse
import logging
import signal
import sys
import time
from datetime import datetime, timezone

import psycopg
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from psycopg import sql

log = logging.getLogger("python-sink")


def parse_args():
    p = argparse.ArgumentParser(
        description="Copy a Kafka topic into a PostgreSQL table, exactly once, until SIGTERM/SIGINT.")
    p.add_argument("--brokers", required=True, help="Kafka bootstrap servers, host:port[,...]")
    p.add_argument("--topic", required=True, help="topic to read (all its partitions)")
    p.add_argument("--dsn", default="",
                   help="libpq conninfo, e.g. 'host=/tmp/pg port=5432 user=postgres' "
                        "(default: the PG* environment)")
    p.add_argument("--table", default="python_sink",
                   help="sink table (default python_sink); offsets go to TABLE_offsets")
    p.add_argument("--group", default="python-sink",
                   help="Kafka group.id (default python-sink); offsets are kept in PostgreSQL, "
                        "not in the group")
    p.add_argument("--batch-size", type=int, default=5000,
                   help="most messages per transaction (default 5000)")
    # 500 ms: a batch closes when the consumer's queue runs dry, so this only bounds a
    # batch under a load that never lets it run dry; batch-size (5000 rows, ~0.1 to 0.3 s
    # of work) usually ends those first.
    p.add_argument("--batch-ms", type=int, default=500,
                   help="most milliseconds a batch stays open (default 500)")
    args = p.parse_args()
    if args.batch_size < 1 or args.batch_ms < 1:
        p.error("--batch-size and --batch-ms must be positive")
    return args


def create_tables(conn, table, offsets):
    with conn.transaction():
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " kafka_partition int NOT NULL,"
            " kafka_offset bigint NOT NULL,"
            " kafka_timestamp timestamptz,"
            " payload jsonb,"
            " PRIMARY KEY (kafka_partition, kafka_offset))").format(table))
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " topic text NOT NULL,"
            " kafka_partition int NOT NULL,"
            " next_offset bigint NOT NULL,"
            " PRIMARY KEY (topic, kafka_partition))").format(offsets))


def assign_from_stored_offsets(consumer, conn, topic, offsets):
    md = consumer.list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        sys.exit(f"python-sink: topic {topic} not found ({t.error if t else 'no metadata'}); create it first")
    stored = dict(conn.execute(
        sql.SQL("SELECT kafka_partition, next_offset FROM {} WHERE topic = %s").format(offsets),
        (topic,)).fetchall())
    parts = [TopicPartition(topic, p, stored.get(p, OFFSET_BEGINNING)) for p in sorted(t.partitions)]
    consumer.assign(parts)
    log.info("assigned %s", ", ".join(
        f"{tp.partition}@{'beginning' if tp.offset == OFFSET_BEGINNING else tp.offset}" for tp in parts))


def collect_batch(consumer, max_count, max_wait, stop_requested):
    """Messages until there are max_count, the queue runs dry, max_wait seconds have passed
    or a stop is asked.

    A batch closes as soon as librdkafka has nothing more to hand over (what lakehouse's
    worker does too): under a trickle each message is committed at once, under load the
    batch fills to max_count. max_wait only bounds a batch that never runs dry."""
    batch = []
    deadline = time.monotonic() + max_wait
    while len(batch) < max_count and not stop_requested():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if batch:
            # With messages in hand: take only what is already there.
            msgs = consumer.consume(num_messages=max_count - len(batch), timeout=0)
            if not msgs:
                break
        else:
            # The first message: consume() returns when it has num_messages or at the
            # timeout, so ask for one (asking for a batch would wait out the timeout
            # whenever traffic is light). At most 1 s per call, so a signal is noticed soon.
            msgs = consumer.consume(num_messages=1, timeout=min(remaining, 1.0))
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(f"Kafka error on {m.topic()} [{m.partition()}]: {err}")
            batch.append(m)
    return batch


def write_batch(conn, table, offsets, topic, batch):
    """One transaction: COPY the rows, then move each partition's stored offset past them."""
    next_offset = {}
    copy_sql = sql.SQL(
        "COPY {} (kafka_partition, kafka_offset, kafka_timestamp, payload) FROM STDIN").format(table)
    upsert_sql = sql.SQL(
        "INSERT INTO {} (topic, kafka_partition, next_offset) VALUES (%s, %s, %s) "
        "ON CONFLICT (topic, kafka_partition) DO UPDATE SET next_offset = EXCLUDED.next_offset"
    ).format(offsets)
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy(copy_sql) as copy:
            for m in batch:
                _, ts_ms = m.timestamp()
                ts = None if ts_ms < 0 else datetime.fromtimestamp(ts_ms / 1000, timezone.utc)
                value = m.value()
                copy.write_row((m.partition(), m.offset(), ts,
                                None if value is None else value.decode("utf-8")))
                next_offset[m.partition()] = m.offset() + 1
        for partition, offset in next_offset.items():
            cur.execute(upsert_sql, (topic, partition, offset))


def main():
    args = parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s python-sink: %(message)s")
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    table = sql.Identifier(args.table)
    offsets = sql.Identifier(args.table + "_offsets")
    # autocommit: every transaction is an explicit conn.transaction() block.
    try:
        conn = psycopg.connect(args.dsn, autocommit=True)
        create_tables(conn, table, offsets)
    except psycopg.Error as e:
        sys.exit(f"python-sink: cannot prepare the tables in PostgreSQL ({args.dsn!r}): {e}")

    consumer = Consumer({
        "bootstrap.servers": args.brokers,
        "group.id": args.group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        # A stored offset that Kafka no longer holds (retention) must stop the sink, not
        # jump silently to another offset: "error" surfaces it as a message error.
        "auto.offset.reset": "error",
    })
    assign_from_stored_offsets(consumer, conn, args.topic, offsets)

    total = 0
    last_log, last_total = time.monotonic(), 0
    status = 0
    try:
        while not stopping:
            batch = collect_batch(consumer, args.batch_size, args.batch_ms / 1000, lambda: stopping)
            # Also on the way out: messages already read are committed, not read again later.
            if batch:
                write_batch(conn, table, offsets, args.topic, batch)
                total += len(batch)
            now = time.monotonic()
            if now - last_log >= 5:
                log.info("%d rows committed, %.0f rows/s over the last %.1f s",
                         total, (total - last_total) / (now - last_log), now - last_log)
                last_log, last_total = now, total
        log.info("stopped: %d rows committed in this run", total)
    except (RuntimeError, KafkaException, psycopg.Error) as e:
        # Nothing of the open batch was committed; the stored offsets still point before it.
        log.error("%s; exiting, the open batch is not committed", e)
        status = 1
    finally:
        consumer.close()
        conn.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
