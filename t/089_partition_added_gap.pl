# A partition added to the topic while its stream is stopped, whose first records
# retention deletes before the stream starts again: the stream never read them, so
# starting at the broker's low watermark would skip them without a word. The partition
# starts stopped, loudly, like a retention gap, until reset_offsets() says where to resume.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
my $kdir = lh_kafka_dir();
my $node = lh_node('partition_added_gap');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('added_gap');
lh_create_topic($kdir, $topic, 1);

my $seq = 0;
my $first = 5 + int(rand(20));
lh_publish($brokers, $topic, [ map { [ 0, undef, lh_event('p0', $seq++) ] } 1 .. $first ]);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('g', '$topic')");
ok(lh_wait_caught_up($node, 'g', $topic), 'the stream read partition 0');
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('g')");
ok($node->poll_query_until('postgres', "SELECT bool_and(state = 'stopped') FROM lakehouse.stream_status() WHERE stream = 'g'"),
	'the stream is stopped');

# While it is stopped: a second partition, records in it, and the first of them deleted.
lh_kafka('tool', $kdir, 'org.apache.kafka.tools.TopicCommand', '--bootstrap-server', $brokers,
	'--alter', '--topic', $topic, '--partitions', 2);
my $added = 10 + int(rand(20));
my $cut = 3 + int(rand(5));
lh_publish($brokers, $topic, [ map { [ 1, undef, lh_event('p1', $seq++) ] } 1 .. $added ]);
lh_kafka('delete-records', $kdir, $topic, 1, $cut);
my $wm = lh_watermarks($node, $topic);
is($wm->{1}[0], $cut, "partition 1 was added and retention took its first $cut records (fault landed)");

$node->safe_psql('postgres', "SELECT lakehouse.start_stream('g')");
ok($node->poll_query_until('postgres',
		"SELECT state = 'partition stopped' FROM lakehouse.stream_status() WHERE stream = 'g' AND kafka_partition = 1"),
	'partition 1 starts stopped, not at the low watermark');
like($node->safe_psql('postgres', "SELECT error FROM lakehouse.offsets WHERE stream = 'g' AND kafka_partition = 1"),
	qr/offset 0 is no longer available.*starts at offset $cut/, 'its error says where the broker starts');
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.g WHERE kafka_partition = 1"), '0',
	'nothing of partition 1 was ingested meanwhile');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_log WHERE stream = 'g' AND event = 'partition_stopped'"),
	'1', 'the stop is in stream_log');

# Resuming is an explicit, recorded decision.
$node->safe_psql('postgres', "SELECT lakehouse.reset_offsets('g', 1, $cut)");
ok(lh_wait_caught_up($node, 'g', $topic), 'after reset_offsets partition 1 catches up');
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.g WHERE kafka_partition = 1"), $added - $cut,
	'from the reset offset on, exactly');
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.g WHERE kafka_partition = 0"), $first,
	'partition 0 unaffected');

$node->stop;
done_testing();
