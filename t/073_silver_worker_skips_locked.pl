# The silver worker does not let one table's lock hold up the others.
#
# Two continuous silver tables, a and b, over one stream. A session takes a's registry row
# (as a pass of its own in a transaction left open would, or a replay, or a drop) and keeps
# it. New events must still reach b, whose pass the worker runs after a's in name order, and
# reach a once the session lets go. Up to 0.11.0 the worker waited on a's row, and b stayed
# behind for as long as the session held it.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);
use LakehouseTest;

my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();

my $node = lh_node('skip_locked', conf => "lakehouse.silver_naptime = 50ms\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('skiplock');
lh_create_topic($kafka_dir, $topic, 1);
$node->safe_psql('postgres', qq{
	SELECT lakehouse.create_stream('s', '$topic');
	SELECT lakehouse.create_silver(t, 's',
	  ARRAY[lakehouse.silver_column('event_id', 'uuid', \$e\$(payload->'meta'->>'id')::uuid\$e\$),
	        lakehouse.silver_column('event_time', 'timestamptz', \$e\$(payload->'meta'->>'dt')::timestamptz\$e\$)],
	  ARRAY['event_id'], 'event_time')
	  FROM unnest(ARRAY['a', 'b']) t;
});

my $published = 0;
sub publish
{
	my ($n) = @_;
	lh_publish($brokers, $topic, [ map { [ 0, undef, lh_event('skip', $published + $_) ] } 1 .. $n ]);
	$published += $n;
	return;
}
sub rows { return $node->safe_psql('postgres', "SELECT count(*) FROM silver.$_[0]"); }

# Polls for at most $secs seconds (not the suite's long default: the failure mode here is
# waiting forever).
sub holds_within
{
	my ($table, $want, $secs) = @_;
	my $deadline = time() + $secs;
	while (time() < $deadline)
	{
		return 1 if rows($table) == $want;
		sleep(0.1);
	}
	return 0;
}

publish(5);
ok(holds_within('a', $published, 60) && holds_within('b', $published, 60), "both tables hold the first $published events");

my $hold = $node->background_psql('postgres');
$hold->query_safe(q{BEGIN; SELECT 1 FROM lakehouse.silver_tables WHERE name = 'a' FOR UPDATE});
# The fault landed: the row is taken, by that session.
my ($rc) = $node->psql('postgres', q{SELECT 1 FROM lakehouse.silver_tables WHERE name = 'a' FOR UPDATE NOWAIT});
isnt($rc, 0, "a's registry row is locked by the holding session");

publish(7);
ok(holds_within('b', $published, 30), "b takes the new events while a's row is held ($published rows)");
is(rows('a'), $published - 7, 'a waits for its row');
my $warnings = () = slurp_file($node->logfile) =~ /silver pass of "a" failed/g;
is($warnings, 0, 'skipping a locked table is not a failure');

$hold->query_safe('COMMIT');
$hold->quit;
ok(holds_within('a', $published, 30), "a catches up once the row is free ($published rows)");

done_testing();
