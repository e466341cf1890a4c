# A batch that touches many partitions: the worker keeps one entry per partition it wrote
# to, and reads them after the batch's commit to move its offsets and report them to Kafka.
# Those entries must outlive the transaction (above 341 partitions the list is a block of
# its own that the end of the transaction really frees). A backlog on a topic of 400
# partitions, read in batches that each hold most of them, must land exactly once.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
# glibc fills freed memory with this byte (and new memory with its complement), so a read
# after free sees garbage at once instead of whatever happened to stay there.
local $ENV{MALLOC_PERTURB_} = 165;
# librdkafka hands over what it fetched partition by partition, and a batch closes when its
# queue runs dry: a 2 s linger keeps the first batch open until most partitions are in it.
my $node = lh_node('many_partitions', conf => "lakehouse.batch_linger_ms = 2000\nlakehouse.max_batch_ms = 2000\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('many');
my $partitions = 400;
lh_create_topic(lh_kafka_dir(), $topic, $partitions);

# The backlog first, then the stream: its first batches gather every partition at once.
my %per_partition;
my @records;
my $seq = 0;
for my $p (0 .. $partitions - 1)
{
	$per_partition{$p} = 2 + int(rand(4));
	push @records, map { [ $p, undef, lh_event("many-p$p", $seq++) ] } 1 .. $per_partition{$p};
}
my $published = lh_publish($brokers, $topic, \@records);
is($published, scalar(@records), "published $published events over $partitions partitions");

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('many', '$topic')");
ok($node->poll_query_until('postgres', "SELECT count(*) = $published FROM bronze.many"),
	'the stream ingested the backlog');

# The fault must have had its chance: a batch that held more than 341 partitions.
my $widest = $node->safe_psql('postgres',
	q{SELECT max((SELECT count(*) FROM jsonb_object_keys(first_offsets))) FROM lakehouse.stream_progress WHERE stream = 'many'});
cmp_ok($widest, '>', 341, "a batch wrote to $widest partitions (more than 341), or the test is inconclusive");

my $expected = join(',', map { "($_,$per_partition{$_})" } sort { $a <=> $b } keys %per_partition);
my $wrong = $node->safe_psql('postgres', qq{
	WITH e(p, n) AS (VALUES $expected),
	     b AS (SELECT kafka_partition AS p, count(*) AS n, count(DISTINCT kafka_offset) AS d, max(kafka_offset) AS hi
	             FROM bronze.many GROUP BY 1)
	SELECT count(*) FROM e
	  LEFT JOIN b ON b.p = e.p
	  LEFT JOIN lakehouse.offsets o ON o.stream = 'many' AND o.kafka_partition = e.p
	 WHERE b.n IS DISTINCT FROM e.n OR b.d IS DISTINCT FROM e.n OR b.hi IS DISTINCT FROM e.n - 1
	    OR o.next_offset IS DISTINCT FROM e.n});
is($wrong, '0', "every partition holds each of its events once and its next_offset follows the last one");
is($node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'many'}), '0',
	'no dead letters');
# The worker restarts after an error and clears last_error, so the server log says it.
my @errors = grep { /ERROR:|FATAL:.*lakehouse stream/ } split /\n/, slurp_file($node->logfile);
is(scalar(@errors), 0, 'the worker hit no error' . (@errors ? ": $errors[0]" : ''));
ok(lh_wait_caught_up($node, 'many', $topic), 'and it is caught up with the broker');

$node->stop;
done_testing();
