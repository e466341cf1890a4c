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
# reload applies it to the running worker: a backlog before the reload goes in batches
# larger than 64kB (the default bound is 64MB); after the reload the same worker cuts the
# next backlog into batches of 64kB.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.max_batch_messages = 10000});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('lakehouse.max_batch_messages') = '10000'"),
	'max_batch_messages is 10000, so only bytes can end a batch early');
my $topic2 = lh_unique_name('batchbytes');
lh_create_topic(lh_kafka_dir(), $topic2, $partitions);
my $bound = 64 * 1024;
my ($largest, $smallest) = (0, undef);
my $backlog = sub {
	my ($tag) = @_;
	my @r;
	for my $p (0 .. $partitions - 1)
	{
		push @r, map { [ $p, undef, lh_event("$tag-p$p", $_) ] } 1 .. 1000;
	}
	for (@r)
	{
		my $len = length($_->[2]);
		$largest = $len if $len > $largest;
		$smallest = $len if !defined $smallest || $len < $smallest;
	}
	return \@r;
};
my $records_before = $backlog->('bytes-before');
lh_publish(lh_brokers(), $topic2, $records_before);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('batchbytes', '$topic2')");
ok(lh_wait_caught_up($node, 'batchbytes', $topic2), 'the stream caught up with the default max_batch_bytes');
my ($last_batch, $max_bytes_before) = split /\|/, $node->safe_psql('postgres',
	"SELECT max(batch_id), max(bytes) FROM lakehouse.stream_progress WHERE stream = 'batchbytes'");
cmp_ok($max_bytes_before, '>', $bound + $largest,
	"before the reload a batch held more than 64kB plus one message ($max_bytes_before bytes)");
my $worker = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'batchbytes'");

# The reload, while the worker runs (SIGHUP sets its latch: it applies the file at once).
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.max_batch_bytes = '64kB'});
$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
ok($node->poll_query_until('postgres', "SELECT current_setting('lakehouse.max_batch_bytes') = '64kB'"),
	'the reload set max_batch_bytes to 64kB');
sleep 2;
# The next backlog piles up behind a lock on bronze, so that the worker then finds far more
# than 64kB waiting: only max_batch_bytes can keep its batches small.
my $lock = $node->background_psql('postgres');
$lock->query_safe('BEGIN');
$lock->query_safe('LOCK TABLE bronze.batchbytes IN ACCESS EXCLUSIVE MODE');
my $records_after = $backlog->('bytes-after');
lh_publish(lh_brokers(), $topic2, $records_after);
ok($node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $worker"),
	'the worker waits on the lock while the backlog builds up');
sleep 2;    # librdkafka fills its queue meanwhile
$lock->query_safe('COMMIT');
$lock->quit;
ok(lh_wait_caught_up($node, 'batchbytes', $topic2), 'the stream caught up with 64kB batches');
lh_check_exactly_once($node, 'batchbytes', $topic2, '64kB batches');
is($node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'batchbytes'"), $worker,
	'the same worker, without a restart');
my $bytes2 = 0;
$bytes2 += length($_->[2]) for @$records_after;
my ($batches, $max_bytes, $max_msgs) = split /\|/, $node->safe_psql('postgres',
	"SELECT count(*), max(bytes), max(messages) FROM lakehouse.stream_progress WHERE stream = 'batchbytes' AND batch_id > $last_batch");
cmp_ok($max_bytes, '<', $bound + $largest, "after the reload no batch holds more than 64kB plus one message ($max_bytes bytes)");
cmp_ok($batches, '>=', int($bytes2 / ($bound + $largest)),
	"the backlog of $bytes2 bytes took at least as many batches as the bound implies ($batches)");
# A batch ends with the message that reaches 64kB: at most this many of the smallest fit.
my $max_fit = int(($bound - 1) / $smallest) + 1;
cmp_ok($max_msgs, '<=', $max_fit,
	"batches ended on bytes: at most $max_fit messages of $smallest bytes or more ($max_msgs)");

$node->stop;
done_testing();
