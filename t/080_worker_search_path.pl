# The launcher, the stream workers and the silver worker run as the bootstrap superuser in
# a database that others own. A database owner who is not a superuser sets the database's
# search_path to a schema of theirs holding functions and aggregates that shadow what the
# workers call (now, clock_timestamp, to_regclass, current_setting, a better-matching
# jsonb_build_object, count, max, and = on integers, which a starting worker evaluates
# over its data): none of it may run as the superuser, and ingestion must go on as before.
# The workers pin search_path to pg_catalog, pg_temp and name pg_catalog's functions.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
my $node = lh_node('search_path', conf => "lakehouse.max_batch_messages = 50\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('search_path');
my $partitions = 2;
lh_create_topic(lh_kafka_dir(), $topic, $partitions);

# Every query of this test names pg_catalog itself (the trap is for the workers; polls run
# without psql's -q, so they qualify their calls instead of setting search_path).
sub q_ { my ($sql) = @_; return $node->safe_psql('postgres', "SET search_path = pg_catalog; $sql"); }

# --- The database owner (no superuser) lays the trap.
$node->safe_psql('postgres', q{
	CREATE ROLE mallory LOGIN;
	ALTER DATABASE postgres OWNER TO mallory;
	GRANT CREATE ON DATABASE postgres TO mallory;
});
$node->safe_psql('postgres', q{
	SET ROLE mallory;
	CREATE SCHEMA evil;
	CREATE TABLE evil.ran (fn text, who text, at timestamptz DEFAULT pg_catalog.clock_timestamp());
	GRANT INSERT ON evil.ran TO PUBLIC;
	CREATE FUNCTION evil.note(fn text) RETURNS void LANGUAGE sql
	  AS $$ INSERT INTO evil.ran (fn, who) VALUES (fn, pg_catalog.current_user()) $$;
	CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql
	  AS $$ SELECT evil.note('now'); SELECT pg_catalog.now() $$;
	CREATE FUNCTION evil.clock_timestamp() RETURNS timestamptz LANGUAGE sql
	  AS $$ SELECT evil.note('clock_timestamp'); SELECT pg_catalog.clock_timestamp() $$;
	CREATE FUNCTION evil.to_regclass(text) RETURNS regclass LANGUAGE sql
	  AS $$ SELECT evil.note('to_regclass'); SELECT pg_catalog.to_regclass($1) $$;
	CREATE FUNCTION evil.current_setting(text) RETURNS text LANGUAGE sql
	  AS $$ SELECT evil.note('current_setting'); SELECT pg_catalog.current_setting($1) $$;
	CREATE FUNCTION evil.jsonb_build_object(text, integer, text, text) RETURNS jsonb LANGUAGE sql
	  AS $$ SELECT evil.note('jsonb_build_object'); SELECT pg_catalog.jsonb_build_object($1, $2, $3, $4) $$;
	CREATE FUNCTION evil.trap8(bigint) RETURNS bigint LANGUAGE sql
	  AS $$ SELECT evil.note('count or max'); SELECT $1 $$;
	CREATE AGGREGATE evil.count(*) (sfunc = pg_catalog.int8inc, stype = int8, finalfunc = evil.trap8, initcond = '0');
	CREATE AGGREGATE evil.max(bigint) (sfunc = pg_catalog.int8larger, stype = int8, finalfunc = evil.trap8);
	CREATE FUNCTION evil.int4eq(integer, integer) RETURNS boolean LANGUAGE sql
	  AS $$ SELECT evil.note('= on integers'); SELECT $1 OPERATOR(pg_catalog.=) $2 $$;
	CREATE OPERATOR evil.= (leftarg = integer, rightarg = integer, function = evil.int4eq);
	ALTER DATABASE postgres SET search_path = evil, pg_catalog, public;
});
# New backends (and the workers, once the server restarts) get the owner's search_path.
$node->restart;
$node->safe_psql('postgres', 'SELECT now(), count(*) FROM (VALUES (1)) v WHERE 1 = 1');
is(q_("SELECT count(*) FROM evil.ran WHERE fn IN ('now', 'count or max', '= on integers')"), '3',
	'the trap is armed: an unqualified now(), count(*) and = on integers run the owner\'s code');
q_('TRUNCATE evil.ran');

# --- A stream and a silver table over it, with the trap armed since the server started.
q_("SELECT lakehouse.create_stream('s', '$topic')");
q_(q{SELECT lakehouse.create_silver('s_rows', 's',
	ARRAY[lakehouse.silver_column('k', 'text', $e$(payload->>'tag') || '/' || (payload->>'partition') || '/' || (payload->>'seq')$e$),
	      lakehouse.silver_column('t', 'timestamptz', 'kafka_timestamp')],
	ARRAY['k'], 't')});
my $per_partition = 120 + int(rand(80));
lh_produce($brokers, $topic, $_, $per_partition, 'sp') for 0 .. $partitions - 1;
my $published = $per_partition * $partitions;

ok( $node->poll_query_until('postgres',
		"SELECT pg_catalog.count(*) = $published FROM bronze.s"),
	"the stream worker ingested all $published messages");
ok( $node->poll_query_until('postgres',
		"SELECT pg_catalog.count(*) = $published FROM silver.s_rows"),
	'the silver worker admitted every one');
is(q_('SELECT count(*) FROM bronze.s') + 0, $published, 'bronze holds each message once');

# Stopping, and starting again over the data it holds: a starting worker compares each
# partition's offsets with its data (where the unqualified = on integers is evaluated).
q_("SELECT lakehouse.stop_stream('s')");
ok($node->poll_query_until('postgres',
		"SELECT pg_catalog.bool_and(state = 'stopped') FROM lakehouse.stream_status() WHERE stream = 's'"),
	'the stream stopped');
q_("SELECT lakehouse.start_stream('s')");
ok($node->poll_query_until('postgres',
		"SELECT pg_catalog.bool_and(state = 'running') FROM lakehouse.stream_status() WHERE stream = 's'"),
	'the stream started again over its data');
q_("SELECT lakehouse.stop_stream('s')");
ok($node->poll_query_until('postgres',
		"SELECT pg_catalog.bool_and(state = 'stopped') FROM lakehouse.stream_status() WHERE stream = 's'"),
	'and stopped');

is(q_("SELECT coalesce(string_agg(DISTINCT fn || ' as ' || who, ', '), 'nothing') FROM evil.ran"), 'nothing',
	'no function or aggregate of the database owner ran in a lakehouse process');
my ($launcher) = q_("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher'");
is($launcher, '1', 'the launcher is still running');

# --- Without the extension, a schema "lakehouse" is whoever made it: the database owner's
# view there would run their functions as the superuser if the launcher read it. The
# launcher and the silver worker read only the extension's own tables.
q_('DROP EXTENSION lakehouse CASCADE');
q_('TRUNCATE evil.ran');
$node->safe_psql('postgres', q{
	SET ROLE mallory;
	CREATE FUNCTION evil.yes(what text) RETURNS boolean LANGUAGE sql
	  AS $$ SELECT evil.note(what); SELECT true $$;
	CREATE SCHEMA lakehouse;
	CREATE VIEW lakehouse.streams AS SELECT 'fake'::text AS name, evil.yes('a fake lakehouse.streams') AS enabled;
	CREATE VIEW lakehouse.silver_tables AS
	  SELECT 'fake'::text AS name, 'fake'::text AS stream, 0::bigint AS last_batch_id, evil.yes('a fake lakehouse.silver_tables') AS continuous;
});
# The launcher looks every second; three seconds give it three chances.
sleep(3);
is(q_("SELECT coalesce(string_agg(DISTINCT fn || ' as ' || who, ', '), 'nothing') FROM evil.ran"), 'nothing',
	'no lakehouse process read a schema lakehouse that is not the extension\'s');
$node->safe_psql('postgres', 'SET search_path = pg_catalog; DROP SCHEMA lakehouse CASCADE');

q_(q{ALTER DATABASE postgres RESET search_path});
$node->stop;
done_testing();
