# Faults around the stream worker on a real broker: the broker killed with -9 and
# restarted mid-ingest, a clean server restart mid-backlog, and a retention gap (records
# deleted before the stream read them), which must stop the partition loudly until
# reset_offsets() rather than skip silently.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
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
lh_create_topic($kdir, $topic, $partitions);
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

# --- 2. A clean server restart in the middle of a backlog.
$pub = lh_publish_start($brokers, $topic, events(12000, 'restart'));
$node->poll_query_until('postgres',
	"SELECT count(*) > " . committed('s1') . " FROM bronze.s1") or die 'no progress';
$node->restart;
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
$node->restart;
ok($node->poll_query_until('postgres',
		"SELECT state = 'partition stopped' FROM lakehouse.stream_status() WHERE stream = 's1' AND kafka_partition = 0"),
	'the stop survives a server restart');

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

# --- 4. Partitions added to the topic while the stream runs are picked up.
lh_kafka('tool', $kdir, 'org.apache.kafka.tools.TopicCommand', '--bootstrap-server', $brokers,
	'--alter', '--topic', $topic, '--partitions', $partitions + 2);
is(scalar(keys %{ lh_watermarks($node, $topic) }), $partitions + 2, 'the topic has two more partitions (fault landed)');
my @spread = map { [ $_ % ($partitions + 2), undef, lh_event('grown', $seq++) ] } 1 .. 500;
lh_publish($brokers, $topic, \@spread);
ok(lh_wait_caught_up($node, 's1', $topic), 'the running stream picks up the new partitions');
lh_check_exactly_once($node, 's1', $topic, 'after adding partitions');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_log WHERE stream = 's1' AND event = 'partition_added'"),
	'2', 'each new partition is recorded in stream_log');

lh_kafka('remove', $kdir);
done_testing();
