-- The extension installs its schemas and functions, refuses the public, and drops cleanly.
CREATE EXTENSION lakehouse;

SELECT extname, extversion, extnamespace::regnamespace AS schema
  FROM pg_extension WHERE extname = 'lakehouse';

SELECT nspname FROM pg_namespace
 WHERE nspname IN ('lakehouse', 'bronze', 'silver', 'gold') ORDER BY nspname;

SELECT p.oid::regprocedure::text AS function, p.prosecdef AS security_definer
  FROM pg_proc p WHERE p.pronamespace = 'lakehouse'::regnamespace ORDER BY 1;

SELECT c.oid::regclass AS config_table FROM pg_extension e, unnest(e.extconfig) c(oid)
 WHERE e.extname = 'lakehouse' ORDER BY c.oid::regclass::text;

-- Nothing that controls streams is open to the public.
SELECT p.proname FROM pg_proc p
 WHERE p.pronamespace = 'lakehouse'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE')
 ORDER BY 1;

-- Only superusers (and those they grant) may make the server talk to brokers.
CREATE ROLE regress_lakehouse_user;
SET ROLE regress_lakehouse_user;
SELECT * FROM lakehouse.kafka_watermarks('any_topic');
RESET ROLE;
GRANT EXECUTE ON FUNCTION lakehouse.kafka_watermarks(text, text) TO regress_lakehouse_user;
SET ROLE regress_lakehouse_user;
\set VERBOSITY terse
SELECT * FROM lakehouse.kafka_watermarks(NULL);
\set VERBOSITY default
RESET ROLE;
REVOKE EXECUTE ON FUNCTION lakehouse.kafka_watermarks(text, text) FROM regress_lakehouse_user;

-- Dropping removes every schema the extension made, and it can come back.
DROP EXTENSION lakehouse;
SELECT count(*) AS schemas_left FROM pg_namespace
 WHERE nspname IN ('lakehouse', 'bronze', 'silver', 'gold');
CREATE EXTENSION lakehouse;
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';
-- Schemas already taken by something else are a clear error, not a silent merge.
DROP EXTENSION lakehouse;
CREATE SCHEMA silver;
\set VERBOSITY terse
CREATE EXTENSION lakehouse;
\set VERBOSITY default
DROP SCHEMA silver;
CREATE EXTENSION lakehouse;
DROP ROLE regress_lakehouse_user;
