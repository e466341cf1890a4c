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

$node->stop;
done_testing();
