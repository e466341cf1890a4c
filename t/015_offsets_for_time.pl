# kafka_offsets_for_time() and a stream that starts from a time, on a real broker: the
# broker stamps each message when it stores it (LogAppendTime), the test publishes two
# bursts with a pause between them and asks for the offsets at a moment in the pause.
# Expected offsets come from what the test published, not from the code under test.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
my $node = lh_node('offsets_for_time');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('for_time');
my $partitions = 2;
lh_create_topic(lh_kafka_dir(), $topic, $partitions, 'message.timestamp.type=LogAppendTime');

# Burst one, a pause whose middle is "the moment", burst two.
my (%before, %after);
for my $p (0 .. $partitions - 1) { $before{$p} = 3 + int(rand(20)); $after{$p} = 2 + int(rand(20)); }
my $seq = 0;
lh_publish($brokers, $topic, [ map { my $p = $_; map { [ $p, undef, lh_event("before-p$p", $seq++) ] } 1 .. $before{$p} } 0 .. $partitions - 1 ]);
sleep(1.5);
my $moment = $node->safe_psql('postgres', 'SELECT clock_timestamp()');
sleep(1.5);
lh_publish($brokers, $topic, [ map { my $p = $_; map { [ $p, undef, lh_event("after-p$p", $seq++) ] } 1 .. $after{$p} } 0 .. $partitions - 1 ]);

my $expected = join(',', map { "$_:$before{$_}" } 0 .. $partitions - 1);
is($node->safe_psql('postgres', qq{SELECT string_agg(partition || ':' || next_offset, ',' ORDER BY partition)
		FROM lakehouse.kafka_offsets_for_time('$topic', '$moment')}),
	$expected, 'at a moment between the bursts, each partition answers the first offset of the second burst');
is($node->safe_psql('postgres', qq{SELECT string_agg(partition || ':' || next_offset, ',' ORDER BY partition)
		FROM lakehouse.kafka_offsets_for_time('$topic', '1970-01-01 00:00+00')}),
	join(',', map { "$_:0" } 0 .. $partitions - 1), 'before everything: offset 0');
is($node->safe_psql('postgres', qq{SELECT string_agg(partition || ':' || next_offset, ',' ORDER BY partition)
		FROM lakehouse.kafka_offsets_for_time('$topic', clock_timestamp() + interval '1 hour')}),
	join(',', map { "$_:" . ($before{$_} + $after{$_}) } 0 .. $partitions - 1),
	'after everything: the end of each partition');

# A stream that starts from the moment holds the second burst and nothing of the first.
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('from_time', '$topic', start_from => '$moment')");
my $second = 0;
$second += $after{$_} for 0 .. $partitions - 1;
ok($node->poll_query_until('postgres', "SELECT count(*) = $second FROM bronze.from_time"),
	"a stream started from the moment ingests the second burst ($second events)");
is($node->safe_psql('postgres', q{SELECT count(*) FROM bronze.from_time WHERE payload->>'tag' LIKE 'before-%'}),
	'0', 'and nothing of the first');

# A broker that answers the lookup with an error. librdkafka's mock cluster (fault
# injection only: test/tools/mock_broker) fails the next ListOffsets requests (API key 2)
# with KAFKA_STORAGE_ERROR (56), per partition, as a broker with a failed log directory
# would. The lookup must be an error that says so, never an answer of "no message after
# that time" (the end of the partition), and a stream asked to start from that time must
# not be created. (librdkafka 2.0.2 turns a partition's error in the answer into the
# call's error, which is the message checked here; lakehouse also refuses a partition's
# own error left in the list, which this librdkafka does not leave.)
{
	my ($min, $mout, $merr) = ('', '', '');
	my $mock = IPC::Run::start([ lh_top() . '/test/tools/mock_broker', 'mocked', 3 ],
		'<', \$min, '>', \$mout, '2>', \$merr, IPC::Run::timeout(120));
	$mock->pump until $mout =~ /\n/;
	my ($mock_brokers) = $mout =~ /^(\S+)\n/;
	$mout = '';
	my $lookup = "SELECT count(*) FROM lakehouse.kafka_offsets_for_time('mocked', now(), '$mock_brokers')";
	is($node->safe_psql('postgres', $lookup), 3, 'the mock broker answers a lookup for its three partitions');

	my $fail_next = sub {
		my ($n) = @_;
		$min .= "push 2 56 $n\n";
		$mock->pump until $mout =~ /ok\n/;
		$mout = '';
	};
	$fail_next->(3);
	my ($rc, $out, $err) = $node->psql('postgres', $lookup);
	isnt($rc, 0, 'a lookup answered with a storage error fails');
	like($err, qr/could not look up offsets by time in (partition \d+ of )?Kafka topic "mocked".*\n.*Disk error/,
		'and says what the broker answered');

	$fail_next->(3);
	($rc, $out, $err) = $node->psql('postgres',
		"SELECT lakehouse.create_stream('mocked_start', 'mocked', '$mock_brokers', start_from => now()::text)");
	isnt($rc, 0, 'a stream asked to start from a time the broker cannot look up is refused');
	like($err, qr/could not look up offsets by time/, 'for that reason');
	is($node->safe_psql('postgres',
			q{SELECT (SELECT count(*) FROM lakehouse.streams WHERE name = 'mocked_start')}
			  . q{ + (SELECT count(*) FROM pg_class WHERE relname = 'mocked_start')}),
		0, 'and nothing of it is created');
	$mock->finish;
}

$node->stop;
done_testing();
