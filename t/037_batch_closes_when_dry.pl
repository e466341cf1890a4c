# A micro-batch closes as soon as librdkafka's queue runs dry, not when
# lakehouse.max_batch_ms runs out (issue 10, item 17: freshness was set by the batch
# window, not by the work). With max_batch_ms at ten minutes, a few messages must land in
# bronze within seconds, each group in batches of its own; a worker that waited out the window
# would commit nothing before the deadline. The backlog side (batches filling up to
# max_batch_messages while the queue stays full) is checked here too, and its speed by
# benchmarks/bench_ingest.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakehouseTest;

my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();

my $node = lh_node('dry', conf => "lakehouse.max_batch_ms = 600000\nlakehouse.max_batch_messages = 500\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('dry');
lh_create_topic($kafka_dir, $topic, 2);
lh_create_topic($kafka_dir, "$topic.dlq", 1);
$node->safe_psql('postgres', qq{SELECT lakehouse.create_stream('dry', '$topic')});
ok($node->poll_query_until('postgres', q{SELECT state = 'running' FROM lakehouse.streams WHERE name = 'dry'}),
	'the stream worker runs');

# Three small groups, one after the other: each lands long before max_batch_ms (10 min).
my $sent = 0;
for my $group (1 .. 3)
{
	my $n = 2 + $group;
	my $t0 = Time::HiRes::time();
	lh_publish($brokers, $topic, [ map { [ $_ % 2, undef, qq({"group":$group,"i":$_}) ] } 1 .. $n ]);
	$sent += $n;
	my $landed = lh_wait_beyond($node, 'SELECT count(*) FROM bronze.dry', $sent - 1);
	my $secs = Time::HiRes::time() - $t0;
	is($landed, $sent, sprintf('group %d (%d messages) landed in bronze %.1f s after publishing, with max_batch_ms at 10 minutes', $group, $n, $secs));
}
# No batch mixes two groups, and every group has its own (one, or one per partition when
# the partitions' messages come more than the linger apart).
my ($batches_small, $mixed) = split /\|/, $node->safe_psql('postgres', q{
	SELECT count(*), count(*) FILTER (WHERE groups > 1)
	  FROM (SELECT batch_id, count(DISTINCT payload->>'group') AS groups FROM bronze.dry GROUP BY batch_id) b});
is($mixed, 0, "no batch holds two groups ($batches_small batches for 3 groups)");
cmp_ok($batches_small, '>=', 3, 'each group committed on its own');

# The linger (lakehouse.batch_linger_ms): with it at 2 s, two bursts 0.3 s apart make one
# batch, though the queue runs dry between them; a trickle does not cost a commit per
# arrival.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.batch_linger_ms = '2s'; SELECT pg_reload_conf()});
sleep 2;    # the idle worker reads the reload within a second (IDLE_WAKE_MS)
my $before_bursts = $node->safe_psql('postgres', q{SELECT coalesce(max(batch_id), 0) FROM lakehouse.stream_progress WHERE stream = 'dry'});
lh_publish($brokers, $topic, [ map { [ $_ % 2, undef, qq({"burst":1,"i":$_}) ] } 1 .. 4 ]);
Time::HiRes::sleep(0.3);
lh_publish($brokers, $topic, [ map { [ $_ % 2, undef, qq({"burst":2,"i":$_}) ] } 1 .. 4 ]);
$sent += 8;
ok($node->poll_query_until('postgres', "SELECT count(*) = $sent FROM bronze.dry"), 'both bursts landed');
is($node->safe_psql('postgres', qq{SELECT count(*) FROM lakehouse.stream_progress WHERE stream = 'dry' AND batch_id > $before_bursts}),
	1, 'in one batch: it stayed open for the linger although the queue ran dry between the bursts');
$node->safe_psql('postgres', q{ALTER SYSTEM RESET lakehouse.batch_linger_ms; SELECT pg_reload_conf()});

# A backlog: published while the stream is stopped, read in batches that fill up to
# max_batch_messages (the queue does not run dry between them), every offset once.
$node->safe_psql('postgres', q{SELECT lakehouse.stop_stream('dry')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'}),
	'stream stopped for the backlog');
my $backlog = 5000;
lh_publish($brokers, $topic, [ map { [ $_ % 2, undef, qq({"backlog":$_}) ] } 1 .. $backlog ]);
$sent += $backlog;
my $batches_before = $node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.stream_progress WHERE stream = 'dry'});
$node->safe_psql('postgres', q{SELECT lakehouse.start_stream('dry')});
ok(lh_wait_caught_up($node, 'dry', $topic), 'the backlog is in bronze');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.dry'), $sent, 'every message once');
my ($batches, $full) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT count(*), count(*) FILTER (WHERE messages = 500) FROM lakehouse.stream_progress
	 WHERE stream = 'dry' AND batch_id > $batches_before});
cmp_ok($full, '>=', $backlog / 500 / 2, "the backlog filled batches up to max_batch_messages ($full of $batches batches full)");
lh_check_exactly_once($node, 'dry', $topic, 'after the backlog');

$node->stop;
done_testing();
