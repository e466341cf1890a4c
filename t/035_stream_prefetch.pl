# The bounds on a stream worker's memory. lakehouse.prefetch_memory bounds what librdkafka
# fetches ahead: the value reaches the consumer (librdkafka's own fetch log names the
# bound and says when the queue hit it), and a bound far smaller than the backlog still
# ingests every offset exactly once (the worker reads on as the queue drains); a reload
# applies a new bound to the running worker. lakehouse.max_batch_bytes bounds the
# messages in hand: batches end on size, and a reload applies it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $prefetch_kb = 1024;
# librdkafka's fetch decisions are debug messages; the worker logs them at DEBUG1. Small
# batches keep the worker slower than the fetcher, so the queue fills up to the bound.
# kafka_config also tries to set the bound, which lakehouse.prefetch_memory must win.
my $node = lh_node('prefetch', conf => "lakehouse.prefetch_memory = '${prefetch_kb}kB'\n"
	  . "lakehouse.max_batch_messages = 100\n"
	  . "lakehouse.kafka_config = 'debug=fetch; queued.max.messages.kbytes=4096'\n"
	  . "log_min_messages = debug1\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
is($node->safe_psql('postgres', 'SHOW lakehouse.prefetch_memory'), '1MB', 'the setting reads back');

# A backlog several times the bound, in every partition.
my $topic = lh_unique_name('prefetch');
my $partitions = 2;
lh_create_topic(lh_kafka_dir(), $topic, $partitions);
my $per_partition = 2000;
my @records;
for my $p (0 .. $partitions - 1)
{
	push @records, map { [ $p, undef, lh_event("prefetch-p$p", $_) ] } 1 .. $per_partition;
}
my $bytes = 0;
$bytes += length($_->[2]) for @records;
cmp_ok($bytes, '>', 4 * $prefetch_kb * 1024, 'the backlog is several times the prefetch bound');
lh_publish(lh_brokers(), $topic, \@records);

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('prefetch', '$topic')");
ok(lh_wait_caught_up($node, 'prefetch', $topic), 'the stream caught up with a small prefetch bound');
lh_check_exactly_once($node, 'prefetch', $topic, 'small prefetch');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.prefetch'),
	scalar(@records), 'every published event is in bronze');

ok($node->log_contains(qr{/$prefetch_kb kb queued}),
	"librdkafka fetches with the configured bound ($prefetch_kb kB)");
ok(!$node->log_contains(qr{/4096 kb queued}),
	'queued.max.messages.kbytes in lakehouse.kafka_config does not override it');
ok($node->log_contains(qr{not fetchable: queued\.max\.messages\.kbytes exceeded}),
	'the bound was reached during the backlog (fetching paused, then resumed)');

# --- A reload with a new bound: the running worker reconnects to Kafka with it, and goes
# on exactly where it was.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.prefetch_memory = '2MB'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->wait_for_log(
		qr/lakehouse stream "prefetch": lakehouse\.prefetch_memory is now 2048kB \(was ${prefetch_kb}kB\); reconnecting to Kafka/),
	'after a reload the running worker reconnects with the new bound');
my @more;
for my $p (0 .. $partitions - 1)
{
	push @more, map { [ $p, undef, lh_event("prefetch-more-p$p", $_) ] } 1 .. 1000;
}
lh_publish(lh_brokers(), $topic, \@more);
ok(lh_wait_caught_up($node, 'prefetch', $topic), 'the stream caught up after reconnecting');
lh_check_exactly_once($node, 'prefetch', $topic, 'after the reload');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.prefetch'),
	scalar(@records) + scalar(@more), 'every event published before and after the reload is in bronze once');
ok($node->log_contains(qr{/2048 kb queued}), 'librdkafka now fetches with the new bound (2048 kB)');

# --- lakehouse.max_batch_bytes bounds a batch by size, whatever its message count, and a
# reload applies it to the running worker.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.max_batch_messages = 10000});
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.max_batch_bytes = '64kB'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
my $topic2 = lh_unique_name('batchbytes');
lh_create_topic(lh_kafka_dir(), $topic2, $partitions);
my @records2;
for my $p (0 .. $partitions - 1)
{
	push @records2, map { [ $p, undef, lh_event("bytes-p$p", $_) ] } 1 .. 1000;
}
my ($bytes2, $largest) = (0, 0);
for (@records2)
{
	$bytes2 += length($_->[2]);
	$largest = length($_->[2]) if length($_->[2]) > $largest;
}
lh_publish(lh_brokers(), $topic2, \@records2);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('batchbytes', '$topic2')");
ok(lh_wait_caught_up($node, 'batchbytes', $topic2), 'the stream caught up with 64kB batches');
lh_check_exactly_once($node, 'batchbytes', $topic2, '64kB batches');
my ($batches, $max_bytes, $max_msgs) = split /\|/, $node->safe_psql('postgres',
	"SELECT count(*), max(bytes), max(messages) FROM lakehouse.stream_progress WHERE stream = 'batchbytes'");
cmp_ok($max_bytes, '<', 64 * 1024 + $largest, "no batch holds more than 64kB plus one message ($max_bytes bytes)");
cmp_ok($batches, '>=', int($bytes2 / (64 * 1024 + $largest)),
	"the backlog of $bytes2 bytes took at least as many batches as the bound implies ($batches)");
cmp_ok($max_msgs, '<', 10000, "batches ended on bytes, far below max_batch_messages (at most $max_msgs messages)");

$node->stop;
done_testing();
