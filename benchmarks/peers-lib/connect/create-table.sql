-- Sink table of the Kafka Connect peer (connect-run): one row per Kafka message, the same
-- shape as the other PostgreSQL peers. Run with psql, naming the table:
--   psql -v table=NAME -f create-table.sql
-- The connector upserts on the primary key and never alters the table (schema.evolution=none).
CREATE TABLE :"table" (
    kafka_partition int         NOT NULL,
    kafka_offset    bigint      NOT NULL,
    kafka_timestamp timestamptz NOT NULL,
    payload         jsonb       NOT NULL,
    PRIMARY KEY (kafka_partition, kafka_offset)
);
