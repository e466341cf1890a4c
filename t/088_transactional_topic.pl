# A topic written by a transactional producer: commit and abort markers take offsets, and
# aborted records are in the log but never delivered (the worker reads committed data
# only). The stream must hold exactly the committed records, reach lag 0 (its next offset
# passes a marker at the end of a partition), account for every offset (rows, dead letters
# and ranges passed without a message) in its own checks, and keep reading after retention
# deletes the records up to past a marker.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
my $kdir = lh_kafka_dir();
my $node = lh_node('transactional', conf => "lakehouse.max_batch_messages = 50\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('txn');
my $partitions = 2;
lh_create_topic($kdir, $topic, $partitions);

# Transactions of random sizes over both partitions: committed, aborted, committed, and an
# aborted one last, so that each partition ends with aborted records and a marker.
my $seq = 0;
my (%committed, @lines);
sub transaction
{
	my ($end, $size) = @_;
	for (1 .. $size)
	{
		my $s = $seq++;
		push @lines, [ $s % $partitions, undef, lh_event('txn', $s) ];
		$committed{$s} = 1 if $end eq 'COMMIT';
	}
	push @lines, $end;
	return;
}
transaction('COMMIT', 100 + int(rand(200)));
transaction('ABORT', 20 + int(rand(50)));
transaction('COMMIT', 100 + int(rand(200)));
transaction('ABORT', 20 + int(rand(50)));
lh_publish($brokers, $topic, \@lines, lh_unique_name('txn_producer'));
my $n_committed = keys %committed;
note("published $seq records in 4 transactions, $n_committed of them committed");

# The fault landed: markers and aborted records take offsets beyond the committed records.
my $wm = lh_broker_watermarks($brokers, $topic);
my $span = 0;
$span += $wm->{$_}[1] - $wm->{$_}[0] for keys %$wm;
cmp_ok($span, '>', $seq, "the broker holds $span offsets for $seq records ($n_committed committed): markers take offsets");

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('tx', '$topic')");
ok(lh_wait_caught_up($node, 'tx', $topic), 'the stream reaches the high watermark of every partition (lag 0)');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_status() WHERE stream = 'tx' AND lag = 0 AND state = 'running'"),
	$partitions, 'stream_status shows lag 0 and running for each partition');

my %in_bronze = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', "SELECT payload->>'seq' FROM bronze.tx");
is_deeply(\%in_bronze, \%committed, "bronze holds exactly the $n_committed committed records, no aborted one");
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.tx"), $n_committed, 'each of them once');
is($node->safe_psql('postgres', "SELECT sum(messages) FROM lakehouse.stream_progress WHERE stream = 'tx'"),
	$n_committed, 'stream_progress counts the committed records as messages');
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.skipped_offsets WHERE stream = 'tx'"), '>=', 2 * $partitions,
	'ranges passed without a message are recorded (at least a marker after each aborted transaction per partition)');
lh_check_exactly_once($node, 'tx', $topic, 'transactions', 1);

my %checks = map { split /\|/, $_, 2 } split /\n/, $node->safe_psql('postgres',
	"SELECT check_name, passed::text || ': ' || detail FROM lakehouse.run_checks() WHERE check_name LIKE 'bronze%'");
like($checks{'bronze_offsets_once:tx'}, qr/^true: /, "the offsets check explains the markers: $checks{'bronze_offsets_once:tx'}");
like($checks{'bronze_matches_broker:tx'}, qr/^true: .* 0 messages not yet in bronze/, "the broker check sees no lag: $checks{'bronze_matches_broker:tx'}");

# An aborted transaction after the stream caught up: no message arrives, yet the markers
# must be passed, by a batch of no message.
@lines = ();
transaction('ABORT', 10 + int(rand(20)));
lh_publish($brokers, $topic, \@lines, lh_unique_name('txn_producer'));
ok(lh_wait_caught_up($node, 'tx', $topic), 'after an aborted transaction alone, lag is 0 again');
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_progress WHERE stream = 'tx' AND messages = 0 AND first_offsets = '{}'"),
	'>', 0, 'a batch of no message moved the offsets past it');
is($node->safe_psql('postgres', "SELECT count(*) FROM bronze.tx"), $n_committed, 'and bronze is unchanged');
lh_check_exactly_once($node, 'tx', $topic, 'an aborted transaction alone', 1);

# The offsets row of partition 0 lost while the stream is stopped: the data, up to the end
# of the range passed last, says where to resume.
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('tx')");
my $high0 = lh_broker_watermarks($brokers, $topic)->{0}[1];
$node->safe_psql('postgres', "DELETE FROM lakehouse.offsets WHERE stream = 'tx' AND kafka_partition = 0");
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('tx')");
ok($node->poll_query_until('postgres', "SELECT next_offset = $high0 FROM lakehouse.offsets WHERE stream = 'tx' AND kafka_partition = 0"),
	"with its offsets row lost, partition 0 resumes at the end of the last range passed ($high0)");
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_log WHERE stream = 'tx' AND event = 'offsets_restored_from_data'"),
	1, 'and says so in stream_log');
# A reset into the range is refused: the worker would resume after it anyway.
my ($ok, $out, $err) = $node->psql('postgres', "SELECT lakehouse.reset_offsets('tx', 0, " . ($high0 - 1) . ")");
like($err, qr/already holds offsets up to @{[ $high0 - 1 ]}.*skipped_offsets/s, 'reset_offsets refuses to go back into a range passed');

# Retention deletes everything up to the end, markers included; then a new transaction.
$wm = lh_broker_watermarks($brokers, $topic);
for my $p (0 .. $partitions - 1)
{
	lh_kafka('delete-records', $kdir, $topic, $p, $wm->{$p}[1]);
}
$wm = lh_broker_watermarks($brokers, $topic);
is(scalar(grep { $wm->{$_}[0] == $wm->{$_}[1] } keys %$wm), $partitions, 'retention removed every record and marker (fault landed)');
@lines = ();
transaction('COMMIT', 50 + int(rand(100)));
lh_publish($brokers, $topic, \@lines, lh_unique_name('txn_producer'));
$n_committed = keys %committed;
ok(lh_wait_caught_up($node, 'tx', $topic), 'after retention passed the markers, the stream catches up again');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.offsets WHERE stream = 'tx' AND error IS NULL"),
	$partitions, 'no partition stopped: the next offsets were already past the markers');
%in_bronze = map { $_ => 1 } split /\n/, $node->safe_psql('postgres', "SELECT payload->>'seq' FROM bronze.tx");
is_deeply(\%in_bronze, \%committed, "bronze holds the $n_committed committed records");
lh_check_exactly_once($node, 'tx', $topic, 'after retention', 1);
%checks = map { split /\|/, $_, 2 } split /\n/, $node->safe_psql('postgres',
	"SELECT check_name, passed::text || ': ' || detail FROM lakehouse.run_checks() WHERE check_name LIKE 'bronze%'");
like($checks{'bronze_offsets_once:tx'}, qr/^true: /, "the offsets check passes: $checks{'bronze_offsets_once:tx'}");
like($checks{'bronze_matches_broker:tx'}, qr/^true: /, "the broker check passes: $checks{'bronze_matches_broker:tx'}");

# maintain() prunes the ranges the offsets check has gone past, but the last of each
# partition (where a worker whose offsets row is lost resumes).
like($node->safe_psql('postgres', "SELECT detail FROM lakehouse.maintain() WHERE detail LIKE 'skipped_offsets of tx:%'"),
	qr/^skipped_offsets of tx: [1-9]\d* ranges$/, 'maintain() prunes ranges the offsets check has gone past');
is($node->safe_psql('postgres', "SELECT count(DISTINCT kafka_partition) FROM lakehouse.skipped_offsets WHERE stream = 'tx'"),
	$partitions, 'but keeps the last range of each partition');
is($node->safe_psql('postgres', "SELECT passed FROM lakehouse.run_checks() WHERE check_name = 'bronze_offsets_once:tx'"),
	't', 'and the offsets check still passes');

# The accounting can fail: a range passed without a message, removed by hand, is a hole.
$node->safe_psql('postgres', "DELETE FROM lakehouse.skipped_offsets WHERE ctid = (SELECT min(ctid) FROM lakehouse.skipped_offsets WHERE stream = 'tx')");
$node->safe_psql('postgres', "DELETE FROM lakehouse.check_state WHERE check_name = 'bronze_offsets_once:tx'");
like($node->safe_psql('postgres', "SELECT passed::text || ': ' || detail FROM lakehouse.run_checks() WHERE check_name = 'bronze_offsets_once:tx'"),
	qr/^false: partition \d+: offsets .* passed without a message/, 'without its record, a marker is a hole the check reports');

done_testing();
