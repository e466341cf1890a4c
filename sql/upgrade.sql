-- An existing 0.1.0 installation upgrades in place (ALTER EXTENSION UPDATE) and ends with
-- the same objects as CREATE EXTENSION of the current version.
CREATE TEMP TABLE fresh AS
  SELECT pg_describe_object(classid, objid, 0) AS object
    FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'lakehouse');
DROP EXTENSION lakehouse;

CREATE EXTENSION lakehouse VERSION '0.1.0';
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';
ALTER EXTENSION lakehouse UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'lakehouse';

CREATE TEMP TABLE upgraded AS
  SELECT pg_describe_object(classid, objid, 0) AS object
    FROM pg_depend WHERE refclassid = 'pg_extension'::regclass
     AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'lakehouse');
SELECT count(*) > 0 AS has_objects FROM upgraded;
(SELECT 'only after install' AS diff, object FROM fresh EXCEPT SELECT 'only after install', object FROM upgraded)
UNION ALL
(SELECT 'only after upgrade', object FROM upgraded EXCEPT SELECT 'only after upgrade', object FROM fresh)
ORDER BY 1, 2;
