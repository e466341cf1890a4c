# The offsets travel in the WAL with the rows, so a copy of the database made by physical
# replication resumes exactly where its own data ends:
#
# - a base backup (pg_basebackup) taken while a batch is open, restored as a new server:
#   it resumes from its own offsets, no duplicate, no gap;
# - a streaming replica of that backup runs no stream worker while it is a standby (the
#   workers start only when recovery has finished), and promoted after the primary crashed
#   mid-ingest, it resumes from where its replayed data ends, no duplicate, no gap.
#
# The old primary must not consume too: it is down here (crashed), and the README says to
# keep it so, or to bring it back only as a standby.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();    # the sizes below; LAKEHOUSE_TEST_SEED replays a run
my $kdir = lh_kafka_dir();
my $primary = lh_node('primary', init => { allows_streaming => 1 }, conf => join('', map { "$_\n" }
	"lakehouse.max_batch_messages = 50",
	# allows_streaming makes a small server for many standbys; this one ingests.
	"shared_buffers = 128MB",
	"max_connections = 20"));
$primary->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

my $topic = lh_unique_name('replica');
my $partitions = 2;
lh_create_topic($kdir, $topic, $partitions);
my ($seq, $total) = (0, 0);

sub publish
{
	my ($n) = @_;
	lh_publish($brokers, $topic, [ map { [ int(rand($partitions)), undef, lh_event('rep', $seq++) ] } 1 .. $n ]);
	$total += $n;
	return;
}

publish(2000 + int(rand(1000)));
$primary->safe_psql('postgres', "SELECT lakehouse.create_stream('r', '$topic')");
# A batch held open: a second session takes the batch ledger in SHARE mode, then $n more
# events arrive, and the worker's batch waits at its ledger row with its rows written (an
# open transaction) until the returned session ends.
sub hold_open_batch
{
	my ($n) = @_;
	my $pid = $primary->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE application_name = 'lakehouse stream r'});
	my $hold = $primary->background_psql('postgres');
	$hold->query_safe('BEGIN; LOCK TABLE lakehouse.stream_progress IN SHARE MODE');
	publish($n);
	ok($primary->poll_query_until('postgres', lh_waits_on_ledger_sql($pid)),
		'the stream worker holds a batch open, its rows written');
	return $hold;
}

# --- The base backup, taken with a batch open.
ok(lh_wait_caught_up($primary, 'r', $topic), 'the stream read the first events');
my $hold = hold_open_batch(1000 + int(rand(1000)));
my ($at_backup, $last_batch) = split /\|/, $primary->safe_psql('postgres',
	q{SELECT (SELECT count(*) FROM bronze.r), (SELECT max(batch_id) FROM lakehouse.stream_progress WHERE stream = 'r')});
my $ledger_sql = qq{SELECT string_agg(batch_id || ' at ' || committed_at, ',' ORDER BY batch_id) FROM lakehouse.stream_progress
	 WHERE stream = 'r' AND batch_id <= $last_batch};
my $ledger_at_backup = $primary->safe_psql('postgres', $ledger_sql);
ok($at_backup > 0 && $at_backup < $total, "mid-ingest: $at_backup of $total rows committed when the backup starts");
$primary->backup('mid');
$hold->quit;

# --- A streaming replica from that backup, following the primary while it ingests more.
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'mid', has_streaming => 1);
$standby->start;

# The primary crashes mid-ingest, with a batch open; the standby has replayed every commit.
ok(lh_wait_caught_up($primary, 'r', $topic), 'the primary read the events held back during the backup');
$hold = hold_open_batch(1000 + int(rand(1000)));
$primary->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type LIKE 'lakehouse%'}),
	'0', 'the standby runs no lakehouse worker (they start when recovery finishes)');
$primary->stop('immediate');
eval { $hold->quit };
my ($on_standby, $standby_next) = split /\|/, $standby->safe_psql('postgres',
	q{SELECT (SELECT count(*) FROM bronze.r), (SELECT sum(next_offset) FROM lakehouse.offsets WHERE stream = 'r')});
ok($on_standby > $at_backup && $on_standby < $total,
	"the primary crashed mid-ingest: the standby holds $on_standby of $total rows");
is($standby_next, $on_standby, "the standby's offsets end where its rows end ($standby_next)");

$standby->promote;
ok(lh_wait_caught_up($standby, 'r', $topic), 'promoted, the replica reads the rest');
lh_check_exactly_once($standby, 'r', $topic, 'the promoted replica');
is($standby->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.stream_log WHERE stream = 'r' AND event = 'resumed_from_data'}),
	'0', 'it resumed from its offsets (no repair from the data was needed)');

# --- The same backup restored as a server of its own (the crashed primary stays down).
my $restored = PostgreSQL::Test::Cluster->new('restored');
$restored->init_from_backup($primary, 'mid');
$restored->start;
ok(lh_wait_caught_up($restored, 'r', $topic), 'the restored backup reads from its own offsets to the end');
lh_check_exactly_once($restored, 'r', $topic, 'the restored backup');
is($restored->safe_psql('postgres', $ledger_sql), $ledger_at_backup,
	"its batches up to the backup's (batch $last_batch) are the primary's");
is($restored->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.stream_log WHERE stream = 'r' AND event = 'resumed_from_data'}),
	'0', 'it resumed from its offsets (no repair from the data was needed)');

$standby->stop;
$restored->stop;
done_testing();
