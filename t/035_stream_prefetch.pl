# lakehouse.prefetch_memory bounds what librdkafka fetches ahead for a stream worker: the
# value reaches the consumer (librdkafka's own fetch log names the bound and says when the
# queue hit it), and a bound far smaller than the backlog still ingests every offset
# exactly once (the worker reads on as the queue drains).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $prefetch_kb = 1024;
# librdkafka's fetch decisions are debug messages; the worker logs them at DEBUG1. Small
# batches keep the worker slower than the fetcher, so the queue fills up to the bound.
my $node = lh_node('prefetch', conf => "lakehouse.prefetch_memory = '${prefetch_kb}kB'\n"
	  . "lakehouse.max_batch_messages = 100\n"
	  . "lakehouse.kafka_config = 'debug=fetch'\n"
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
ok($node->log_contains(qr{not fetchable: queued\.max\.messages\.kbytes exceeded}),
	'the bound was reached during the backlog (fetching paused, then resumed)');

$node->stop;
done_testing();
