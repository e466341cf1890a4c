#!/usr/bin/env python3
"""python_producer.py: the Python producer peer of lakehouse-producer's replay mode.

What a competent team writes in Python: read a JSONL file of recentchange events, validate
each against the JSON schema with fastjsonschema (which compiles the schema into Python
code, ~25x faster than jsonschema's Draft7Validator here), send valid events to the topic
and invalid ones to a dead-letter topic with the reason in a header. Kafka settings mirror
lakehouse-producer's (src/producer/kafka_out.c), so the comparison is about the code, not
the configuration. Run with the venv of python-env.
"""
import argparse
import json
import os
import sys
import time

import fastjsonschema
from confluent_kafka import KafkaException, Producer

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SCHEMA = os.path.normpath(
    os.path.join(TOP, "..", "shared", "data", "wikimedia", "recentchange_schema.json"))


def parse_args():
    p = argparse.ArgumentParser(
        description="Validate a JSONL file of events against a JSON schema and produce them to "
                    "Kafka (invalid ones to a dead-letter topic). Exits 1 if any delivery failed.")
    p.add_argument("--brokers", required=True, help="Kafka bootstrap servers, host:port[,...]")
    p.add_argument("--topic", required=True, help="topic for valid events")
    p.add_argument("--dlq-topic", help="topic for invalid events (default TOPIC.dlq)")
    p.add_argument("--file", required=True, help="JSONL file, one event per line")
    p.add_argument("--schema", default=DEFAULT_SCHEMA,
                   help=f"JSON schema file (default {DEFAULT_SCHEMA})")
    args = p.parse_args()
    args.dlq_topic = args.dlq_topic or args.topic + ".dlq"
    return args


def check_topics_exist(producer, topics):
    # The project's broker does not create topics on first use; a message to a missing
    # topic raises nothing and only fails after message.timeout.ms, so check up front.
    md = producer.list_topics(timeout=10)
    for t in topics:
        if t not in md.topics or md.topics[t].error is not None:
            sys.exit(f"python-producer: topic {t} does not exist; create it first")


def main():
    args = parse_args()
    try:
        with open(args.schema, "rb") as f:
            validate = fastjsonschema.compile(json.load(f))
    except (OSError, ValueError, fastjsonschema.JsonSchemaDefinitionException) as e:
        sys.exit(f"python-producer: cannot load the schema {args.schema}: {e}")

    producer = Producer({
        "bootstrap.servers": args.brokers,
        "client.id": "python-producer",
        "enable.idempotence": True,
        "acks": "all",
        "message.timeout.ms": 120000,
        "linger.ms": 20,
        "compression.codec": "lz4",
        "queue.buffering.max.messages": 500000,
    })
    check_topics_exist(producer, [args.topic, args.dlq_topic])

    failed = 0

    def on_delivery(err, msg):
        nonlocal failed
        if err is not None:
            failed += 1
            if failed <= 5:
                print(f"python-producer: delivery to {msg.topic()} failed: {err}", file=sys.stderr)

    def send(topic, value, key=None, headers=None):
        while True:
            try:
                producer.produce(topic, value, key=key, headers=headers, on_delivery=on_delivery)
                break
            except BufferError:
                # Local queue full: wait for deliveries to free room, then retry.
                producer.poll(0.1)
        producer.poll(0)

    events = valid = dead = 0
    start = time.monotonic()
    try:
        with open(args.file, "rb") as f:
            for line in f:
                line = line.rstrip(b"\r\n")
                if not line:
                    continue
                events += 1
                try:
                    event = json.loads(line)
                    validate(event)
                except ValueError as e:  # JSONDecodeError and JsonSchemaValueException
                    reason = e.message if isinstance(e, fastjsonschema.JsonSchemaValueException) \
                        else f"not JSON: {e}"
                    send(args.dlq_topic, line, headers=[("lakehouse.reason", reason.encode())])
                    dead += 1
                    continue
                # Key by wiki as lakehouse-producer does: one wiki's events stay in order.
                wiki = event.get("wiki")
                send(args.topic, line, key=wiki.encode() if isinstance(wiki, str) else None)
                valid += 1
    except OSError as e:
        print(f"python-producer: cannot read {args.file}: {e}", file=sys.stderr)
        failed += 1
    except KafkaException as e:
        print(f"python-producer: cannot produce: {e}", file=sys.stderr)
        failed += 1

    # flush() returns how many messages are still queued: those never got an answer.
    left = producer.flush()
    failed += left
    elapsed = time.monotonic() - start
    print(f"python-producer: {events} events in {elapsed:.2f} s = {events / elapsed:.0f} events/s "
          f"(valid {valid}, dead-lettered {dead}, failed {failed})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
