-- lakehouse 0.1.0 install script: the schemas of the medallion layers and the first SQL
-- functions. Loaded by CREATE EXTENSION lakehouse.
\echo Use "CREATE EXTENSION lakehouse" to load this file. \quit

-- lakehouse: control tables and functions; bronze: raw Kafka rows per stream;
-- silver: deduplicated events; gold: views for people and BI tools.
CREATE SCHEMA lakehouse;
CREATE SCHEMA bronze;
CREATE SCHEMA silver;
CREATE SCHEMA gold;

GRANT USAGE ON SCHEMA lakehouse TO PUBLIC;
GRANT USAGE ON SCHEMA gold TO PUBLIC;

-- The broker's own view of a topic: per partition, the oldest retained offset (low) and
-- the next offset to be written (high). Verifiers compare bronze against this.
CREATE FUNCTION lakehouse.kafka_watermarks(topic text, brokers text DEFAULT NULL)
RETURNS TABLE (partition integer, low bigint, high bigint)
LANGUAGE C VOLATILE PARALLEL RESTRICTED
AS 'MODULE_PATHNAME', 'lakehouse_kafka_watermarks';

COMMENT ON FUNCTION lakehouse.kafka_watermarks(text, text) IS
  'per partition of a Kafka topic: low and high watermark offsets, read from the broker';

-- Talking to brokers is an administrator's call: it opens network connections from the
-- server with the server's credentials (lakehouse.kafka_config).
REVOKE ALL ON FUNCTION lakehouse.kafka_watermarks(text, text) FROM PUBLIC;
