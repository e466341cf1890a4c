# lakehouse.schedule() on a server that preloads pg_cron: the jobs it creates really run
# (cron.job_run_details shows them succeed, and their effects are there: check results,
# maintenance, a scheduled refresh of a silver table with continuous refresh off), and
# unschedule() removes them. pg_cron 1.4 runs jobs at most once a minute, so this test
# waits about a minute for them.
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $top = lh_top();
my $producer = "$top/src/producer/lakehouse-producer";
my $brokers = lh_brokers();
my $tmp = $PostgreSQL::Test::Utils::tmp_check;

# The test cluster listens on a Unix socket only, so pg_cron runs its jobs in background
# workers instead of connecting to localhost.
my $node = lh_node('cron', conf => "shared_preload_libraries = 'lakehouse, pg_cron'\ncron.database_name = 'postgres'\n"
	  . "cron.use_background_workers = on\nmax_worker_processes = 20\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse; CREATE EXTENSION pg_cron;');

my $topic = lh_unique_name('cron');
lh_create_topic(lh_kafka_dir(), $topic, 2);
my ($out, $err);
IPC::Run::run([ $producer, '--generate', 300, '--out', "$tmp/cron.jsonl", '--seed', 5 ], '>', \$out, '2>', \$err)
  or die "generate: $err";
IPC::Run::run([ $producer, '--brokers', $brokers, '--topic', $topic, '--file', "$tmp/cron.jsonl", '--quiet' ],
	'>', \$out, '2>', \$err)
  or die "publish: $err";
$node->safe_psql('postgres', qq{
	SELECT lakehouse.create_stream('wiki', '$topic');
	SELECT lakehouse.create_recentchange_pipeline('wiki');
	SELECT lakehouse.set_silver_continuous('edits', false);
});
ok(lh_wait_caught_up($node, 'wiki', $topic), 'bronze caught up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM silver.edits'), '0', 'continuous refresh off: silver empty');

# The jobs run as the extension's owner in a database others may own: a search_path set on
# the database with a schema that shadows count(*) is there before they first run, and
# must not run anything of theirs. (From here on the test's own queries name
# pg_catalog.count.)
$node->safe_psql('postgres', q{
	CREATE SCHEMA evil;
	CREATE TABLE evil.ran (who text, at timestamptz DEFAULT now());
	CREATE FUNCTION evil.trap(bigint) RETURNS bigint LANGUAGE sql
	  AS 'INSERT INTO evil.ran (who) VALUES (current_user) RETURNING $1';
	CREATE AGGREGATE evil.count(*) (sfunc = int8inc, stype = int8, finalfunc = evil.trap, initcond = '0');
	ALTER DATABASE postgres SET search_path = evil, pg_catalog, public;
});
$node->safe_psql('postgres', 'SELECT count(*) FROM pg_class');
my $armed = $node->safe_psql('postgres', 'SELECT pg_catalog.count(*) FROM evil.ran');
is($armed, '1', 'the trap is armed (an unqualified count(*) now runs evil.count)');

my $jobs = $node->safe_psql('postgres', q{
	SELECT string_agg(job_name, ',' ORDER BY job_name)
	  FROM lakehouse.schedule(checks => '* * * * *', maintenance => '* * * * *', refresh => '* * * * *')});
is($jobs, 'lakehouse-checks,lakehouse-maintenance,lakehouse-refresh', 'schedule() created three jobs');
is($node->safe_psql('postgres', q{SELECT pg_catalog.count(*) FROM cron.job WHERE jobname LIKE 'lakehouse-%'}), '3',
	'pg_cron holds them');

ok( $node->poll_query_until('postgres', q{
		SELECT pg_catalog.count(DISTINCT j.jobname) = 3 FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		 WHERE j.jobname LIKE 'lakehouse-%' AND d.status = 'succeeded'}, 't'),
	'each job ran and succeeded (cron.job_run_details)');
is($node->safe_psql('postgres', q{
		SELECT pg_catalog.count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		 WHERE j.jobname LIKE 'lakehouse-%' AND d.status <> 'succeeded'}), '0', 'no job failed');
my $expected = grep { /"type":"(edit|new)"/ } do { open my $f, '<', "$tmp/cron.jsonl" or die; <$f> };
ok($node->poll_query_until('postgres', "SELECT pg_catalog.count(*) = $expected FROM silver.edits"),
	"the scheduled refresh filled silver ($expected edit/new events)");
cmp_ok($node->safe_psql('postgres', 'SELECT pg_catalog.count(*) FROM lakehouse.check_results'), '>', 0,
	'the checks job wrote check results');
is($node->safe_psql('postgres', q{
		SELECT pg_catalog.count(*) FROM cron.job_run_details d JOIN cron.job j USING (jobid)
		 WHERE j.jobname = 'lakehouse-maintenance' AND d.return_message = 'SELECT 1'}) > 0 ? 1 : 0, 1,
	'the maintenance job ran maintain()');

is($node->safe_psql('postgres', q{SELECT pg_catalog.count(*) FROM evil.ran}), $armed,
	'no job ran the shadowing count(*)');
$node->safe_psql('postgres', q{ALTER DATABASE postgres RESET search_path; DROP SCHEMA evil CASCADE;});

is($node->safe_psql('postgres', 'SELECT lakehouse.unschedule()'), '3', 'unschedule() removed three jobs');
is($node->safe_psql('postgres', q{SELECT count(*) FROM cron.job WHERE jobname LIKE 'lakehouse-%'}), '0',
	'none left in pg_cron');

$node->stop;
done_testing();
