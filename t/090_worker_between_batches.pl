# During a backlog the stream worker never waits for Kafka: one batch follows the next at
# once. It must still see a configuration reload and the postmaster's death between
# batches, not only when the backlog is over (issue 10, item 10): a reload that shrinks
# max_batch_messages applies to the next batches, and after the postmaster is killed the
# worker commits nothing more.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
my $node = lh_node('between_batches', conf => "lakehouse.max_batch_messages = 200\nrestart_after_crash = off\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('between');
lh_create_topic(lh_kafka_dir(), $topic, 1);

# Small messages in batches of 200, each batch's COPY slowed by a trigger that keeps the
# CPU busy (pg_sleep would notice the postmaster's death itself): librdkafka fetches far
# ahead of the worker, so its queue never runs dry and the worker never waits while the
# backlog lasts (without the trigger the queue emptied now and then, and the worker saw
# the signals while it waited: the test could not fail).
my $backlog = 40_000;
lh_produce($brokers, $topic, 0, $backlog, 'reload');
$node->safe_psql('postgres', "BEGIN; SELECT lakehouse.create_stream('b', '$topic');
	CREATE FUNCTION public.slow_batch() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN PERFORM count(*) FROM generate_series(1, 50000); RETURN NULL; END \$\$;
	CREATE TRIGGER slow AFTER INSERT ON bronze.b FOR EACH STATEMENT EXECUTE FUNCTION public.slow_batch(); COMMIT");
lh_wait_beyond($node, 'SELECT count(*) FROM bronze.b', 2_000);

# --- A reload mid-backlog.
$node->safe_psql('postgres', 'ALTER SYSTEM SET lakehouse.max_batch_messages = 50');
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
my ($at_reload, $reload_time) = split /\|/, $node->safe_psql('postgres', 'SELECT count(*), clock_timestamp() FROM bronze.b');
if ($at_reload > $backlog / 2)
{
	fail("inconclusive: the reload came when $at_reload of $backlog rows were in bronze, not mid-backlog");
	done_testing();
	exit 1;
}
pass("the reload came mid-backlog ($at_reload of $backlog rows in bronze)");
ok(lh_wait_caught_up($node, 'b', $topic), 'the stream caught up');
# Batches begun a second after the reload, while the backlog lasted (full batches of the
# new size; the old code went on with batches of 200 until the backlog was over).
my ($after, $small, $large) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT count(*), count(*) FILTER (WHERE messages = 50), count(*) FILTER (WHERE messages > 50)
	  FROM lakehouse.stream_progress WHERE stream = 'b' AND started_at > '$reload_time'::timestamptz + interval '1 second'});
cmp_ok($small, '>=', 10, "batches of the reloaded size followed during the backlog ($small of $after)");
is($large, 0, 'no batch after the reload exceeded the new max_batch_messages');
is($node->safe_psql('postgres', 'SELECT count(*) = count(DISTINCT kafka_offset) AND count(*) = ' . $backlog . ' FROM bronze.b'),
	't', 'bronze holds each message once');

# --- The postmaster killed mid-backlog: the worker stops committing.
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('b')");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'}),
	'the stream worker stopped');
lh_produce($brokers, $topic, 0, $backlog, 'death');
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('b')");
lh_wait_beyond($node, 'SELECT count(*) FROM bronze.b', $backlog + 1_000);
my $worker = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'});
my ($before_kill, $kill_time) = split /\|/, $node->safe_psql('postgres', 'SELECT count(*), clock_timestamp() FROM bronze.b');
my $pidfile = $node->data_dir . '/postmaster.pid';
my ($postmaster) = split /\n/, slurp_file($pidfile);
# The server's processes, found by their working directory (the data directory, compared
# by device and inode, not by path). Seen once before the kill, so that the scan cannot
# pass by finding nothing.
my @datadir_id = (stat $node->data_dir)[ 0, 1 ];
my $server_processes = sub {
	grep {
		my @cwd = stat("$_/cwd");
		my $pid = (split m{/}, $_)[-1];
		@cwd && $cwd[0] == $datadir_id[0] && $cwd[1] == $datadir_id[1] && !lh_process_gone($pid)
	} glob('/proc/[0-9]*');
};
my @before = $server_processes->();
ok((grep { m{/$postmaster$} } @before) && (grep { m{/$worker$} } @before),
	'the scan for the server\'s processes finds the postmaster and the stream worker (' . scalar(@before) . ' processes)');
$node->kill9;
my $killed_at = time;
if ($before_kill > $backlog + $backlog / 2)
{
	fail("inconclusive: the postmaster died when $before_kill of " . 2 * $backlog . ' rows were in bronze, not mid-backlog');
	done_testing();
	exit 1;
}
pass("the postmaster was killed mid-backlog ($before_kill of " . 2 * $backlog . ' rows in bronze)');
# The orphaned worker must go away before the server can start again.
ok(lh_wait_gone($worker, $killed_at + $PostgreSQL::Test::Utils::timeout_default - time),
	'the orphaned stream worker exited') or BAIL_OUT('an orphan of the killed server still runs');
# The killed postmaster may stay a zombie that nobody reaps here, and PostgreSQL would take
# its lock files for a running server's: once it and its other children are gone, they
# go, and the server starts again (crash recovery).
# Every process of the old server (they all run in its data directory) must be gone
# before its lock files go: PostgreSQL checks them to keep a second server off shared
# memory that an old child still uses.
my $survivors;
for (1 .. 100)
{
	$survivors = () = $server_processes->();
	last unless $survivors;
	select(undef, undef, undef, 0.1);
}
is($survivors, 0, 'no process of the killed server is left') or BAIL_OUT('processes of the killed server still run');
ok(lh_process_gone($postmaster), 'the postmaster is gone');
if (kill(0, $postmaster))
{
	my $socket = $node->host . '/.s.PGSQL.' . $node->port;
	unlink $pidfile, "$socket.lock", $socket;
}
$node->start;
# What the killed server committed (the new one commits too, from its start on).
my ($late_batches, $rows_then) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT count(*) FILTER (WHERE committed_at > '$kill_time'::timestamptz + interval '1 second'),
	       sum(messages)
	  FROM lakehouse.stream_progress WHERE stream = 'b' AND committed_at < pg_postmaster_start_time()});
is($late_batches, 0, 'no batch was committed more than a second after the postmaster died');
cmp_ok($rows_then, '<', 2 * $backlog, "the backlog was not finished by an orphan ($rows_then rows)");
ok(lh_wait_caught_up($node, 'b', $topic), 'started again, the stream catches up');
lh_check_exactly_once($node, 'b', $topic, 'after the postmaster died');

$node->stop;
done_testing();
