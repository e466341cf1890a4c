# The data as the second checkpoint, at its edges, on a real broker. When the offsets rows
# are lost or rolled back, the worker resumes after the last offset found in bronze or in
# the dead letters: here the last offsets of two partitions are dead letters, so a worker
# that looked only at bronze would read them again. When a partition's offsets row and all
# its data are gone, the worker starts where the broker begins: at offset 0 when the
# broker still holds it (its low watermark), and stopped, loudly, until reset_offsets()
# when the broker's low watermark is above 0 (records it deleted: a partition the stream
# never read, see t/089). Dead letters keep the message's raw key bytes.
use strict;
use warnings;

use Digest::MD5 qw(md5_hex);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();    # the sizes below; LAKEHOUSE_TEST_SEED replays a run
my $kdir = lh_kafka_dir();
my $node = lh_node('data_checkpoint', conf => "lakehouse.max_batch_messages = 50\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('checkpoint');
my $partitions = 4;
lh_create_topic($kdir, $topic, $partitions);

my $seq = 0;
sub good
{
	my ($p, $n) = @_;
	return map { [ $p, undef, lh_event("p$p", $seq++) ] } 1 .. $n;
}

sub q1 { return $node->safe_psql('postgres', $_[0]); }

# --- The scenario. Good events per partition, and:
#   p0: its last message is a dead letter, with a key of every byte value (not UTF-8, a NUL);
#   p1: its last two messages are dead letters (not JSON, a tombstone);
#   p2: its first $cut records are deleted (retention) before the stream starts;
#   p3: a dead letter in the middle, an empty value under a UTF-8 key.
my $poison = lh_poison_kinds();
my %n = map { $_ => 20 + int(rand(60)) } 0 .. $partitions - 1;
my $cut = 3 + int(rand(10));
my $raw_key = join('', map { chr } 0 .. 255);
my $p3_key = "cl\xc3\xa9 3";
my $p3_half = int($n{3} / 2);
my @records = (
	good(0, $n{0}), [ 0, $raw_key, '{"ok":true}' ],
	good(1, $n{1}), [ 1, @{ $poison->{not_json} }[ 0, 1 ] ], [ 1, @{ $poison->{null} }[ 0, 1 ] ],
	good(2, $n{2}),
	good(3, $p3_half), [ 3, $p3_key, '' ], good(3, $n{3} - $p3_half));
lh_publish($brokers, $topic, \@records);
my %dead = (0 => 1, 1 => 2, 2 => 0, 3 => 1);    # dead letters per partition, from the scenario
my %last = map { $_ => $n{$_} + $dead{$_} } 0 .. $partitions - 1;    # messages per partition = high watermark
lh_kafka('delete-records', $kdir, $topic, 2, $cut);
my $wm = lh_broker_watermarks($brokers, $topic);
is_deeply($wm, { map { $_ => [ $_ == 2 ? $cut : 0, $last{$_} ] } 0 .. $partitions - 1 },
	"the broker holds the scenario, partition 2 from offset $cut (fault landed)");

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('d', '$topic')");
ok(lh_wait_caught_up($node, 'd', $topic), 'the stream read the scenario');
lh_check_exactly_once($node, 'd', $topic, 'before the damage');

# --- Dead letters keep the raw key bytes (README, "Nothing is lost on bad input").
is(q1("SELECT reason || ' | ' || encode(kafka_key, 'hex') || ' | ' || convert_from(raw_value, 'UTF8')"
	  . " FROM lakehouse.dead_letters WHERE stream = 'd' AND kafka_partition = 0 AND kafka_offset = $n{0}"),
	'key is not valid UTF-8 text | ' . unpack('H*', $raw_key) . ' | {"ok":true}',
	'a key that is not UTF-8 (all 256 byte values) is kept byte for byte in its dead letter');
is(q1("SELECT md5(kafka_key) || ' ' || length(raw_value) FROM lakehouse.dead_letters"
	  . " WHERE stream = 'd' AND kafka_partition = 3 AND kafka_offset = $p3_half"),
	md5_hex($p3_key) . ' 0', 'the UTF-8 key of a dead letter with an empty value is kept too');
is(q1("SELECT max(kafka_offset) FROM bronze.d WHERE kafka_partition = 0") . ',' . q1(
		"SELECT string_agg(kafka_offset::text, ',' ORDER BY kafka_partition, kafka_offset) FROM lakehouse.dead_letters WHERE stream = 'd' AND kafka_partition IN (0, 1)"),
	($n{0} - 1) . ",$n{0}," . join(',', $n{1}, $n{1} + 1),
	'the last offsets of partitions 0 and 1 are dead letters (the scenario landed)');

# --- The damage, with the stream stopped: p0's offsets row lost, p1's rolled back behind
# its last rows, and for p2 and p3 the offsets row, the bronze rows and the dead letters.
my $pid = q1("SELECT worker_pid FROM lakehouse.streams WHERE name = 'd'");
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('d')");
my $gone = lh_wait_gone($pid);
ok($gone, 'stop_stream ended the worker');
my $rollback = $n{1} - 1 - int(rand(5));
$node->safe_psql('postgres', qq{
	DELETE FROM lakehouse.offsets WHERE stream = 'd' AND kafka_partition IN (0, 2, 3);
	UPDATE lakehouse.offsets SET next_offset = $rollback WHERE stream = 'd' AND kafka_partition = 1;
	DELETE FROM bronze.d WHERE kafka_partition IN (2, 3);
	DELETE FROM lakehouse.dead_letters WHERE stream = 'd' AND kafka_partition IN (2, 3);});
my $log_before = q1('SELECT max(id) FROM lakehouse.stream_log');
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('d')");
# The worker records 'running' once it has read its offsets and the data (lh_offsets_reconcile).
ok($node->poll_query_until('postgres',
		"SELECT state = 'running' AND worker_pid <> $pid FROM lakehouse.streams WHERE name = 'd'"),
	'a new worker reconciled the offsets');

# Where each partition starts, before anything new arrives (p3's offsets row is already
# moving on: where it started is in stream_log, below).
is(q1("SELECT string_agg(kafka_partition || ':' || next_offset || ':' || (error IS NOT NULL), ' ' ORDER BY kafka_partition)"
	  . " FROM lakehouse.offsets WHERE stream = 'd' AND kafka_partition <> 3"),
	join(' ', '0:' . ($n{0} + 1) . ':false', '1:' . ($n{1} + 2) . ':false', '2:0:true'),
	"p0 and p1 resume after their last dead letter; p2 (low watermark $cut) is stopped at offset 0");
is(q1("SELECT string_agg(event || ':' || (detail->>'partition') || ':' || coalesce(detail->>'next_offset', detail->>'data_next_offset', ''), ' ' ORDER BY detail->>'partition')"
	  . " FROM lakehouse.stream_log WHERE stream = 'd' AND id > $log_before AND event <> 'offsets_reset'"),
	join(' ', 'offsets_restored_from_data:0:' . ($n{0} + 1), 'resumed_from_data:1:' . ($n{1} + 2), 'partition_stopped:2:',
		'partition_added:3:0'),
	'each start is recorded in stream_log: p3 (low watermark 0) started at 0');
like(q1("SELECT last_error FROM lakehouse.stream_status() WHERE stream = 'd' AND kafka_partition = 2"),
	qr/offset 0 is no longer available.*starts at offset $cut\)/, "p2's error says where the broker starts");

# p3 is read again from offset 0, once; p0 and p1 read nothing twice.
my $high = lh_broker_high_watermarks($brokers, $topic, $partitions);
ok($node->poll_query_until('postgres',
		"SELECT next_offset = $high->{3} FROM lakehouse.offsets WHERE stream = 'd' AND kafka_partition = 3"),
	'p3 is read again up to the high watermark');
is(q1("SELECT string_agg(kafka_partition || ':' || n, ' ' ORDER BY kafka_partition) FROM"
	  . " (SELECT kafka_partition, count(*) n FROM lakehouse.dead_letters WHERE stream = 'd' GROUP BY 1) x"),
	'0:1 1:2 3:1', 'each dead letter once: none of p0 and p1 again, p3\'s again');
is(q1("SELECT md5(kafka_key) FROM lakehouse.dead_letters WHERE stream = 'd' AND kafka_partition = 3 AND kafka_offset = $p3_half"),
	md5_hex($p3_key), 'p3\'s dead letter, read again, keeps its key');
is(q1("SELECT count(*) || ':' || count(DISTINCT kafka_offset) FROM bronze.d WHERE kafka_partition = 3"),
	"$n{3}:$n{3}", 'p3\'s bronze rows are all back, once');
is(q1("SELECT state || ':' || coalesce(last_error, '') FROM lakehouse.streams WHERE name = 'd'"), 'running:',
	'the worker runs without an error');

# p2 resumes only by an explicit call, at its low watermark; then new messages everywhere.
$node->safe_psql('postgres', "SELECT lakehouse.reset_offsets('d', 2, $cut)");
my %more = map { $_ => 5 + int(rand(20)) } 0 .. $partitions - 1;
lh_publish($brokers, $topic, [ map { good($_, $more{$_}) } 0 .. $partitions - 1 ]);
ok(lh_wait_caught_up($node, 'd', $topic), 'the stream catches up with the new messages');
lh_check_exactly_once($node, 'd', $topic, 'after the damage');
my %rows = map { split /\|/ } split /\n/, q1('SELECT kafka_partition, count(*) FROM bronze.d GROUP BY 1');
is_deeply(\%rows, { 0 => $n{0} + $more{0}, 1 => $n{1} + $more{1}, 2 => $n{2} - $cut + $more{2}, 3 => $n{3} + $more{3} },
	'bronze holds every good event once per partition (p2 from its low watermark)');
is(q1("SELECT count(*) FROM bronze.d WHERE kafka_partition = 0 AND kafka_offset = $n{0} + 1"), '1',
	'the first message after p0\'s last dead letter is in bronze (nothing missed)');

$node->stop;
done_testing();
