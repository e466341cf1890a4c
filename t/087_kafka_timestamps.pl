# Kafka message timestamps are whatever 64-bit value the producer sent (CreateTime):
# Long.MAX_VALUE is a common sentinel. One that a timestamptz cannot hold becomes NULL in
# bronze and in dead letters; it must never overflow into a value that reads back as an
# error (or breaks pg_dump). Ordinary timestamps arrive to the millisecond.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
my $node = lh_node('kafka_timestamps');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('stamps');
# The broker must keep the producer's time, however far in the future.
lh_create_topic(lh_kafka_dir(), $topic, 1, 'message.timestamp.type=CreateTime',
	'message.timestamp.after.max.ms=9223372036854775807');

my $long_max = '9223372036854775807';
my $beyond_pg = '9224318016000000';    # ms past timestamptz's end (x 1000 overflows int64)
my $ordinary = '1796000000123';         # 2026-11-30 ... .123 UTC
my @records = (
	[ 0, undef, lh_event('stamps', 1), $long_max ],
	[ 0, undef, lh_event('stamps', 2), $beyond_pg ],
	[ 0, undef, lh_event('stamps', 3), $ordinary ],
	[ 0, undef, 'not json', $long_max ],
	[ 0, undef, 'not json either', $ordinary ],
);
is(lh_publish($brokers, $topic, \@records), 5, 'published five messages with chosen timestamps');

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('stamps', '$topic')");
ok(lh_wait_caught_up($node, 'stamps', $topic), 'the stream caught up');

is($node->safe_psql('postgres',
		q{SELECT string_agg(kafka_offset || ':' || coalesce(kafka_timestamp::text, 'null'), ' ' ORDER BY kafka_offset)
		    FROM bronze.stamps}),
	'0:null 1:null 2:' . $node->safe_psql('postgres', "SELECT to_timestamp($ordinary / 1000.0)::text"),
	'bronze: out-of-range timestamps are NULL, the ordinary one is exact');
is($node->safe_psql('postgres',
		q{SELECT string_agg(kafka_offset || ':' || coalesce(kafka_timestamp::text, 'null'), ' ' ORDER BY kafka_offset)
		    FROM lakehouse.dead_letters WHERE stream = 'stamps'}),
	'3:null 4:' . $node->safe_psql('postgres', "SELECT to_timestamp($ordinary / 1000.0)::text"),
	'dead letters: the same');
is($node->safe_psql('postgres', q{SELECT coalesce(last_error, 'none') FROM lakehouse.streams WHERE name = 'stamps'}),
	'none', 'the worker reported no error');

# Every row reads back and dumps.
my ($rc, $out, $err) = $node->psql('postgres',
	q{COPY (SELECT * FROM bronze.stamps) TO STDOUT; COPY (SELECT * FROM lakehouse.dead_letters) TO STDOUT});
is($rc, 0, 'bronze and the dead letters copy out whole' . ($err ? ": $err" : ''));

$node->stop;
done_testing();
