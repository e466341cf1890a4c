-- The lakehouse.* settings exist with the documented defaults, units and contexts.
SELECT name, setting, unit, context, vartype, boot_val
  FROM pg_settings WHERE name LIKE 'lakehouse.%' ORDER BY name;

-- Intervals read back as SQL intervals.
SELECT current_setting('lakehouse.watermark')::interval AS watermark,
       current_setting('lakehouse.session_gap')::interval AS session_gap;
SET lakehouse.watermark = '90s';
SHOW lakehouse.watermark;
SET lakehouse.watermark = '2h';
SELECT current_setting('lakehouse.watermark')::interval AS watermark;
RESET lakehouse.watermark;

-- Bad values are refused with the reason.
SET lakehouse.watermark = '-1min';
SET lakehouse.watermark = 'soon';
SET lakehouse.request_timeout = 0;
SET lakehouse.max_batch_messages = 5000;
SET lakehouse.database = 'other';

-- Unknown names under the reserved prefix are refused, not kept as placeholders.
SET lakehouse.no_such_setting = 1;

-- The crash tests' fault setting is changed by reload only, never from a session.
SET lakehouse.test_fault = 'pause_before_commit';

-- kafka_config may hold secrets: superusers see it, others do not.
SHOW lakehouse.kafka_config;
CREATE ROLE regress_lakehouse_user;
SET ROLE regress_lakehouse_user;
SHOW lakehouse.kafka_config;
SELECT current_setting('lakehouse.kafka_config');
SELECT count(*) FROM pg_settings WHERE name = 'lakehouse.kafka_config';
RESET ROLE;
DROP ROLE regress_lakehouse_user;

-- Its syntax is checked when it is set.
ALTER SYSTEM SET lakehouse.kafka_config = 'security.protocol';
ALTER SYSTEM SET lakehouse.kafka_config = '=plaintext';
ALTER SYSTEM SET lakehouse.kafka_config = 'socket.timeout.ms=5000; client.rack = r1';
ALTER SYSTEM RESET lakehouse.kafka_config;

-- The prefetch bound has librdkafka's own limits; a batch holds at least 64kB.
ALTER SYSTEM SET lakehouse.prefetch_memory = '512kB';
ALTER SYSTEM SET lakehouse.prefetch_memory = '4GB';
ALTER SYSTEM SET lakehouse.max_batch_bytes = '10kB';
-- A batch's rows go to COPY in one buffer of at most 1 GB: the bound stays well below.
ALTER SYSTEM SET lakehouse.max_batch_bytes = '1GB';
