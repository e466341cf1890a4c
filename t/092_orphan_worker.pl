# One worker per stream, whatever happens to the launcher (issue 10, item 9). The launcher
# knows its workers only in memory; when it dies, the postmaster starts a new one that
# knows none of them and starts a worker per stream again. The database must keep the
# second one out (an advisory lock per stream), and stop_stream() must still stop the
# worker that kept running.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
my $node = lh_node('orphan');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('orphan');
lh_create_topic(lh_kafka_dir(), $topic, 2);
my $sent = 0;
my $send = sub {
	my ($n) = @_;
	lh_produce($brokers, $topic, $_, $n, "orphan$sent") for 0 .. 1;
	$sent += 2 * $n;
};
my $bronze = sub { $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.o') };
my $workers = sub {
	$node->safe_psql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'});
};

$send->(100);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('o', '$topic')");
ok(lh_wait_caught_up($node, 'o', $topic), 'the stream caught up');
my $worker = $workers->();
like($worker, qr/^\d+$/, "one stream worker runs ($worker)");
is($node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'o'}), $worker,
	'and it is the one lakehouse.streams names');
my $launcher = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher'});

# The launcher dies (an error in it would do the same); the postmaster starts it again
# after its restart delay, and the new one starts a worker for the stream.
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher' AND pid <> $launcher}),
	'a new launcher runs');
# The fault must land: the new launcher's worker must try, and find the stream taken
# (before the fix it ran beside the first one, and this line never came).
my $deadline = time + 30;
my $refused = 0;
while (time < $deadline)
{
	$refused = 1, last
	  if slurp_file($node->logfile, $log_offset) =~ /lakehouse stream "o" already has a worker \(PID $worker\); this one exits/;
	select(undef, undef, undef, 0.1);
}
ok($refused, 'the new launcher started a worker for the stream, which found it taken and exited');
# A refused worker is in pg_stat_activity for a moment before it exits (and the launcher
# tries again every few seconds): wait for the list to be the first worker alone.
ok($node->poll_query_until('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'}, $worker),
	'the stream still has one worker, the first one');
is($node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'o'}), $worker,
	'lakehouse.streams still names it');
is($node->safe_psql('postgres', q{SELECT string_agg(pid::text, ',') FROM pg_locks
	WHERE locktype = 'advisory' AND granted AND classid = 1279936595 AND objid = 'bronze.o'::regclass AND objsubid = 3}), $worker,
	'and it holds the stream\'s lock, as pg_locks shows it');

# The first worker goes on ingesting.
$send->(50);
ok(lh_wait_caught_up($node, 'o', $topic), 'it goes on ingesting');

# stop_stream() stops it: nothing is ingested while the stream is stopped.
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('o')");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'}),
	'stop_stream() stopped the stream\'s worker');
my $stopped_at = $bronze->();
$send->(50);
sleep 3;
is($bronze->(), $stopped_at, 'nothing is ingested while the stream is stopped');
is($workers->(), '', 'and no worker came back');

# The lock cannot be taken from SQL: a role holding advisory locks with the stream's
# numbers (both forms of pg_advisory_lock) does not keep its worker out.
my $squatter = $node->background_psql('postgres');
$squatter->query_safe(q{SELECT pg_advisory_lock((1279936595::int8 << 32) | 'bronze.o'::regclass::oid::int8),
	pg_advisory_lock(1279936595, (o - CASE WHEN o > 2147483647 THEN 4294967296 ELSE 0 END)::int4)
	FROM (SELECT 'bronze.o'::regclass::oid::int8 AS o) x});
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted
	AND classid = 1279936595 AND objid = 'bronze.o'::regclass AND objsubid IN (1, 2)}), '2',
	'a session holds advisory locks with the stream\'s numbers in both SQL forms');
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('o')");
ok(lh_wait_caught_up($node, 'o', $topic), 'started again while a session holds advisory locks with its numbers, it catches up');
$squatter->quit;
is($bronze->(), $sent, "bronze holds the $sent messages sent");
lh_check_exactly_once($node, 'o', $topic, 'after the launcher died');

$node->stop;
done_testing();
