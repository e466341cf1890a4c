-- lakehouse.kafka_watermarks() fails clearly and quickly on bad calls; the positive cases
-- (real counts from a real broker) are in t/010_kafka_watermarks.pl.
CREATE EXTENSION IF NOT EXISTS lakehouse;
\set VERBOSITY terse
SET lakehouse.request_timeout = '1s';

-- Argument errors never reach a broker.
SELECT * FROM lakehouse.kafka_watermarks(NULL);
SELECT * FROM lakehouse.kafka_watermarks('');
SELECT * FROM lakehouse.kafka_watermarks('t', '');

-- No broker listens on port 1 of loopback: an error after lakehouse.request_timeout.
SELECT * FROM lakehouse.kafka_watermarks('t', '127.0.0.1:1');

-- A real broker that has no such topic (regress.brokers is the scratch Kafka).
SET lakehouse.request_timeout = '20s';
SELECT * FROM lakehouse.kafka_watermarks('lakehouse_regress_no_such_topic',
                                         current_setting('regress.brokers'));
-- Topic names Kafka cannot hold are refused before any network call.
SELECT * FROM lakehouse.kafka_watermarks(repeat('x', 250), '127.0.0.1:1');
SELECT * FROM lakehouse.kafka_watermarks('no spaces', '127.0.0.1:1');
SELECT * FROM lakehouse.kafka_watermarks('..', '127.0.0.1:1');

\set VERBOSITY default
-- The full error says what went wrong and what to do (the detail quotes librdkafka,
-- whose wording varies, so only its gist is checked).
SET lakehouse.request_timeout = '300ms';
DO $$
DECLARE
  state text; msg text; detail text; hint text;
BEGIN
  PERFORM * FROM lakehouse.kafka_watermarks('t', '127.0.0.1:1');
  RAISE EXCEPTION 'kafka_watermarks did not fail';
EXCEPTION WHEN connection_failure THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RAISE NOTICE 'sqlstate: %', state;
  RAISE NOTICE 'message: %', msg;
  RAISE NOTICE 'detail names the refusal: %', detail LIKE '%Connection refused%';
  RAISE NOTICE 'hint: %', hint;
END $$;
