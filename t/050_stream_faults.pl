# Faults around the stream worker on a real broker: the broker killed with -9 and
# restarted mid-ingest, a clean server restart mid-backlog (which must land mid-backlog,
# or the test says "inconclusive" and fails), a retention gap (records deleted before the
# stream read them), which must stop the partition loudly until reset_offsets() rather
# than skip silently, also across a restart, and partitions added to the running stream,
# picked up within a bound.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakehouseTest;

# A broker of our own, so killing it does not disturb other suites.
my $kdir = PostgreSQL::Test::Utils::tempdir('kafka');
my $kport = lh_free_port_pair();
my $brokers = (split /\n/, lh_kafka('start', $kdir, '--port', $kport))[-1];

my $node = lh_node('faults', conf => "lakehouse.max_batch_messages = 200\nlakehouse.brokers = '$brokers'\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

my $partitions = 3;
my $seq = 0;

sub events
{
	my ($n, $tag) = @_;
	return [ map { [ $_ % $partitions, undef, lh_event($tag, $seq++) ] } 1 .. $n ];
}

sub committed
{
	my ($stream) = @_;
	return $node->safe_psql('postgres', "SELECT count(*) FROM bronze.$stream");
}

# --- 1. The broker is killed with -9 mid-ingest and comes back on the same log.
my $topic = lh_unique_name('faults');
# The broker stamps each record with the time it appended it, so that the restart's guard
# (section 2) can ask it what it held at a given moment.
lh_create_topic($kdir, $topic, $partitions, 'message.timestamp.type=LogAppendTime');
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('s1', '$topic')");
my $first = events(40000, 'broker');
my $pub = lh_publish_start($brokers, $topic, $first);
my $seen = lh_wait_beyond($node, 'SELECT count(*) FROM bronze.s1', 0);    # dies when no row comes
lh_kafka('kill', $kdir);
my $at_kill = committed('s1');
if ($at_kill >= @$first)
{
	fail("inconclusive: the broker was killed after the whole backlog ($at_kill rows) was committed");
	done_testing();
	exit 1;
}
pass("the broker was killed mid-ingest: $at_kill of " . scalar(@$first) . " committed ($seen when the kill was sent)");
my ($stdout, $stderr);
ok(!IPC::Run::run([ lh_top() . '/scripts/kafka', 'status', $kdir ], '>', \$stdout, '2>', \$stderr),
	'the broker is down (fault landed)');
ok($node->poll_query_until('postgres',
		"SELECT bool_and(state = 'waiting for broker' AND last_error IS NOT NULL) FROM lakehouse.stream_status() WHERE stream = 's1'"),
	'stream_status shows the stream waiting for the broker, with the reason');
ok($node->log_contains(qr/LOG:\s+librdkafka \w+: .*Connection refused/),
	"librdkafka's own complaint reaches the server log (through the worker's log queue)");
my $worker = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 's1'");
ok(!lh_process_gone($worker), 'the worker stays up while the broker is down (no crash loop)');

lh_kafka('start', $kdir);
lh_publish_finish($pub);    # the producer's retries deliver the rest to the restarted broker
lh_publish($brokers, $topic, events(3000, 'broker-after'));
ok(lh_wait_caught_up($node, 's1', $topic), 'after the broker restarts the stream catches up');
is($node->safe_psql('postgres', "SELECT DISTINCT state FROM lakehouse.stream_status() WHERE stream = 's1'"),
	'running', 'stream_status is back to running');
is($node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 's1'"), $worker,
	'the same worker rode out the outage');
lh_check_exactly_once($node, 's1', $topic, 'broker restart');

# --- 2. A clean server restart in the middle of a backlog. It must land mid-backlog, or
# the test says "inconclusive" and fails: some of this backlog committed before the
# restart (lower bound), and the broker held more than had committed (a backlog was still
# waiting), asked of Kafka itself (kcat), not of lakehouse.kafka_watermarks().
# The backlog is on the broker before the worker starts on it (a worker as fast as the
# publisher would otherwise keep up with it), and more arrives across the restart.
my $progress_sql = "SELECT coalesce(sum(messages), 0) FROM lakehouse.stream_progress WHERE stream = 's1'";
$worker = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 's1'");
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('s1')");
my $gone = lh_wait_gone($worker);
ok($gone, 'the stream is stopped while its backlog is published');
lh_publish($brokers, $topic, events(12000, 'restart'));
my $before_restart = $node->safe_psql('postgres', $progress_sql);
$pub = lh_publish_start($brokers, $topic, events(3000, 'restart-more'));
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('s1')");
$seen = lh_wait_beyond($node, $progress_sql, $before_restart);    # fails and dies when nothing comes
$node->restart;
# What the old server committed: the batches committed before the new postmaster started;
# and the moment of its last commit, in milliseconds since the epoch (server and broker
# share this machine's clock).
my ($at_restart, $last_commit_ms) = split /\|/, $node->safe_psql('postgres', q{
	SELECT coalesce(sum(messages), 0), floor(extract(epoch FROM max(committed_at)) * 1000)::bigint
	  FROM lakehouse.stream_progress WHERE stream = 's1' AND committed_at < pg_postmaster_start_time()});
# What the broker held at that last commit (records appended before it): the old server
# committed nothing after it, so whatever of this the old server had not committed was
# still waiting when the restart came.
my $held_high = lh_broker_high_watermarks($brokers, $topic, $partitions, $last_commit_ms);
my $held = 0;
$held += $_ for values %$held_high;
if ($at_restart <= $before_restart)
{
	fail("inconclusive: the old server committed $at_restart messages, no more than the $before_restart before"
		  . " this backlog; the restart did not land mid-backlog");
	done_testing();
	exit 1;
}
if ($at_restart >= $held)
{
	fail("inconclusive: the old server committed $at_restart messages, all the $held the broker held at its last"
		  . " commit; no backlog was waiting at the restart");
	done_testing();
	exit 1;
}
pass('the restart landed mid-backlog: ' . ($at_restart - $before_restart) . ' of this backlog committed before it'
	  . " ($seen in all when the restart was sent), the broker held " . ($held - $at_restart) . ' more');
lh_publish_finish($pub);
ok(lh_wait_caught_up($node, 's1', $topic), 'after a server restart mid-backlog the stream catches up');
lh_check_exactly_once($node, 's1', $topic, 'server restart');

# --- 3. Retention gap: records deleted before the stream read them.
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('s1')");
my $before = lh_watermarks($node, $topic);
lh_publish($brokers, $topic, events(600, 'gap'));
my $rows_p0 = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.s1 WHERE kafka_partition = 0');
my $cut = $before->{0}[1] + 50;
lh_kafka('delete-records', $kdir, $topic, 0, $cut);
is(lh_watermarks($node, $topic)->{0}[0], $cut, "partition 0's low watermark moved past the stream's offset (fault landed)");
my $offset = -s $node->logfile;
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('s1')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'partition stopped' AND last_error LIKE '%no longer available%' FROM lakehouse.stream_status()"
		  . " WHERE stream = 's1' AND kafka_partition = 0"),
	'partition 0 stops, and stream_status says why');
$node->wait_for_log(qr/WARNING:\s+lakehouse stream "s1" stopped partition 0/, $offset);
pass('the server log has a WARNING for the stopped partition');
ok($node->poll_query_until('postgres', qq{
	SELECT bool_and(o.next_offset = w.high) FROM lakehouse.offsets o
	  JOIN lakehouse.kafka_watermarks('$topic') w ON w.partition = o.kafka_partition
	 WHERE o.stream = 's1' AND o.kafka_partition <> 0}),
	'the other partitions go on');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.s1 WHERE kafka_partition = 0'), $rows_p0,
	'nothing was skipped into partition 0 silently');
is($node->safe_psql('postgres', "SELECT next_offset FROM lakehouse.offsets WHERE stream = 's1' AND kafka_partition = 0"),
	$before->{0}[1], "partition 0's checkpoint did not move");
# The stop survives a server restart. The stored error alone proves nothing (it is there
# before the restarted worker has done anything): the restarted worker must have loaded
# the stream, gone on with the other partitions, and left partition 0 where it stopped.
my $log_before_restart = $node->safe_psql('postgres', 'SELECT max(id) FROM lakehouse.stream_log');
my $p0_high_at_restart = lh_broker_high_watermarks($brokers, $topic, $partitions)->{0};
$node->restart;
ok($node->poll_query_until('postgres', q{
	SELECT s.state = 'running' AND s.state_at > pg_postmaster_start_time() AND a.pid IS NOT NULL
	  FROM lakehouse.streams s
	  LEFT JOIN pg_stat_activity a ON a.pid = s.worker_pid AND a.backend_type = 'lakehouse stream'
	 WHERE s.name = 's1'}),
	'after the restart a new worker read its offsets and runs (state written after the restart)');
lh_publish($brokers, $topic, events(300, 'after-restart'));
my $high_after = lh_broker_high_watermarks($brokers, $topic, $partitions);
ok($node->poll_query_until('postgres', qq{
	SELECT count(*) = 2 FROM lakehouse.offsets
	 WHERE stream = 's1' AND (kafka_partition, next_offset) IN ((1, $high_after->{1}), (2, $high_after->{2}))}),
	'the restarted worker ingests what partitions 1 and 2 received after the restart');
cmp_ok($node->safe_psql('postgres',
		"SELECT count(*) FROM lakehouse.stream_progress WHERE stream = 's1' AND committed_at > pg_postmaster_start_time()"),
	'>', 0, 'the restarted worker committed batches');
is($node->safe_psql('postgres',
		"SELECT state FROM lakehouse.stream_status() WHERE stream = 's1' AND kafka_partition = 0"),
	'partition stopped', 'the stop survives a server restart: partition 0 is still stopped after the worker ran');
cmp_ok($high_after->{0}, '>', $p0_high_at_restart, 'partition 0 received messages past the gap after the restart');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.s1 WHERE kafka_partition = 0'), $rows_p0,
	'the restarted worker wrote no row of partition 0 (nothing past the gap)');
is($node->safe_psql('postgres', "SELECT next_offset FROM lakehouse.offsets WHERE stream = 's1' AND kafka_partition = 0"),
	$before->{0}[1], "partition 0's checkpoint still did not move");
is($node->safe_psql('postgres',
		"SELECT count(*) FROM lakehouse.stream_log WHERE stream = 's1' AND event = 'partition_stopped' AND id > $log_before_restart"),
	'0', 'the restarted worker kept the stop from its offsets row (it did not run into the gap again)');

# Resuming needs an explicit call, which is recorded.
$node->safe_psql('postgres', "SELECT lakehouse.reset_offsets('s1', 0, $cut)");
ok(lh_wait_caught_up($node, 's1', $topic), 'after reset_offsets the partition catches up');
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.s1 WHERE kafka_partition = 0"),
	$rows_p0 + lh_watermarks($node, $topic)->{0}[1] - $cut, 'partition 0 resumed exactly at the reset offset');
is($node->safe_psql('postgres', q{
	SELECT string_agg(event, ',' ORDER BY id) FROM lakehouse.stream_log
	 WHERE stream = 's1' AND event IN ('partition_stopped', 'offsets_reset')}),
	'partition_stopped,offsets_reset', 'the stop and the reset are both in stream_log');
is($node->safe_psql('postgres', q{
	SELECT (detail->>'from')::bigint || '->' || (detail->>'to')::bigint FROM lakehouse.stream_log
	 WHERE stream = 's1' AND event = 'offsets_reset'}),
	"$before->{0}[1]->$cut", 'the reset records where it moved the partition from and to');

# --- 4. Partitions added to the topic while the stream runs are picked up within a bound.
my $log_before_added = $node->safe_psql('postgres', 'SELECT max(id) FROM lakehouse.stream_log');
my $t_tool = Time::HiRes::time();
lh_kafka('tool', $kdir, 'org.apache.kafka.tools.TopicCommand', '--bootstrap-server', $brokers,
	'--alter', '--topic', $topic, '--partitions', $partitions + 2);
# The partitions exist once the tool returns (the worker may even see them a moment before).
my $added_at = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
my $tool_s = sprintf('%.1f', Time::HiRes::time() - $t_tool);
is(scalar(keys %{ lh_broker_watermarks($brokers, $topic) }), $partitions + 2, 'the topic has two more partitions (fault landed)');
# The README says the running worker picks them up within about 10 s: it asks for the
# partition count every 10 s between batches. The bound is 30 s from the tool's return,
# generous for a loaded 2-core machine (Kafka's JVM, the server and other suites share
# it); a worker that looked every 30 s or more, or only at its start, fails it. Polled
# for up to PG_TEST_TIMEOUT_DEFAULT so that a slow pickup shows its time.
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM lakehouse.stream_log WHERE stream = 's1' AND event = 'partition_added' AND id > $log_before_added"),
	'the running worker records both new partitions as partition_added');
my $pickup = $node->safe_psql('postgres',
	"SELECT round(extract(epoch FROM max(logged_at) - '$added_at')::numeric, 1) FROM lakehouse.stream_log"
	  . " WHERE stream = 's1' AND event = 'partition_added'");
cmp_ok($pickup, '<', 30, "the new partitions were picked up $pickup s after they were created (bound 30 s; README: about 10 s; the topic tool itself took $tool_s s)");
my @spread = map { [ $_ % ($partitions + 2), undef, lh_event('grown', $seq++) ] } 1 .. 500;
lh_publish($brokers, $topic, \@spread);
ok(lh_wait_caught_up($node, 's1', $topic), 'the running stream reads the new partitions');
lh_check_exactly_once($node, 's1', $topic, 'after adding partitions');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_log WHERE stream = 's1' AND event = 'partition_added'"),
	'2', 'each new partition is recorded in stream_log once');

lh_kafka('remove', $kdir);
done_testing();
