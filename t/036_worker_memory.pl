# The stream worker's own memory (its PostgreSQL memory contexts, as
# pg_log_backend_memory_contexts() reports them) goes back down after one huge batch: the
# COPY buffer that batch grew is not kept for the small batches after it, and a turn of the
# worker's loop leaves nothing behind in TopMemoryContext.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
# Large batches may hold the whole backlog: a 2 s linger keeps a batch open while
# librdkafka hands over what it fetched.
my $node = lh_node('worker_memory', conf => "lakehouse.max_batch_messages = 100000\n"
	  . "lakehouse.batch_linger_ms = 2000\nlakehouse.max_batch_ms = 5000\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('memory');
lh_create_topic(lh_kafka_dir(), $topic, 1);

my $seq = 0;
lh_publish($brokers, $topic, [ [ 0, undef, lh_event('mem', $seq++) ] ]);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('m', '$topic')");
ok(lh_wait_caught_up($node, 'm', $topic), 'the stream read the first event');
my $pid = $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'");

# The worker's memory contexts, in bytes: asked of the worker itself, read from the log.
sub worker_memory
{
	my $offset = -s $node->logfile;
	$node->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($pid)");
	for (1 .. 600)
	{
		my ($total) = slurp_file($node->logfile, $offset) =~ /\[$pid\][^\n]*LOG:\s+Grand total: (\d+) bytes/;
		return $total if defined $total;
		select(undef, undef, undef, 0.1);
	}
	die "the worker did not log its memory contexts within 60 s\n";
}
my $at_start = worker_memory();

# A backlog of about 40 MB waits behind a lock on bronze while it is published, then goes
# in as one or two large batches.
my $hold = $node->background_psql('postgres');
$hold->query_safe('BEGIN; LOCK TABLE bronze.m IN SHARE MODE');
my $backlog = 32000 + int(rand(2000));
lh_publish($brokers, $topic, [ map { [ 0, undef, lh_event('mem', $seq++) ] } 1 .. $backlog ]);
ok($node->poll_query_until('postgres', "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND NOT granted)"),
	'the worker waits for the lock with a batch in hand');
$hold->query_safe('COMMIT');
$hold->quit;
ok(lh_wait_caught_up($node, 'm', $topic), 'the stream ingested the backlog');
my ($biggest, $biggest_bytes) = split /\|/, $node->safe_psql('postgres',
	"SELECT messages, bytes FROM lakehouse.stream_progress WHERE stream = 'm' ORDER BY bytes DESC LIMIT 1");
cmp_ok($biggest_bytes, '>', 16 * 1024 * 1024, "the largest batch held $biggest messages, $biggest_bytes bytes (fault landed)");

# Then a trickle: small batches.
for my $round (1 .. 3)
{
	lh_publish($brokers, $topic, [ map { [ 0, undef, lh_event('mem', $seq++) ] } 1 .. 10 ]);
	ok(lh_wait_caught_up($node, 'm', $topic), "small batch $round ingested");
}
my $after = worker_memory();
note("worker memory contexts: $at_start bytes at start, $after bytes after the backlog and three small batches");
cmp_ok($after, '<', $at_start + 8 * 1024 * 1024,
	"after small batches the worker holds less than 8 MB more than at start ($at_start -> $after bytes), not the large batch's buffer");
is($node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'"), $pid,
	'the same worker did all of it');

done_testing();
