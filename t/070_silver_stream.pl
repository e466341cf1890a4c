# Silver on a real stream: the producer publishes a generated recording as a scenario
# (loops with unique ids, a resent loop, contract violations) to the scratch Kafka, the
# stream worker lands it in bronze, and the silver worker keeps silver.edits fresh by
# itself. Every expected count comes from the recording and the scenario: silver holds
# each edit/new event once, the resent loop counts as duplicates, events stamped an hour
# behind are late (recorded, replayable), copies sent again later are duplicates (also an
# hour after every partition's watermark passed them), and with
# continuous refresh off only refresh_silver() moves silver.
use strict;
use warnings;

use IPC::Run ();
use JSON::PP ();
use POSIX ();
use Time::Local qw(timegm);
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $top = lh_top();
my $producer = "$top/src/producer/lakehouse-producer";
my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $json = JSON::PP->new->utf8->canonical;
my $seed = $ENV{LAKEHOUSE_TEST_SEED} // int(rand(1_000_000));
srand($seed);
note "seed $seed (LAKEHOUSE_TEST_SEED=$seed replays this run)";

sub run_producer
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $producer, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(180));
	die "lakehouse-producer @args failed: $err" if $?;
	return $out;
}

my $node = lh_node('silver', conf => "lakehouse.silver_naptime = 50ms\nrestart_after_crash = on\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

my $topic = lh_unique_name('silver');
lh_create_topic($kafka_dir, $topic, 3);
lh_create_topic($kafka_dir, "$topic.dlq", 1);

# The recording, and what the scenario makes of it.
my $events = 200 + int(rand(300));
my $loops = 2 + int(rand(3));
my $violations = 1 + int(rand(10));
run_producer('--generate', $events, '--out', "$tmp/rec.jsonl", '--seed', $seed);
open my $fh, '<', "$tmp/rec.jsonl" or die;
my @rec = map { $json->decode($_) } <$fh>;
close $fh;
my $per_loop = grep { $_->{type} eq 'edit' || $_->{type} eq 'new' } @rec;
my ($newest) = sort { $b cmp $a } map { $_->{meta}{dt} } @rec;
cmp_ok($per_loop, '>', 0, "the recording has edit/new events ($per_loop of $events)");

run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--loops', $loops,
	'--resend-loop', 0, '--violations', $violations, '--quiet');
$node->safe_psql('postgres', qq{
	SELECT lakehouse.create_stream('wiki', '$topic');
	SELECT lakehouse.create_recentchange_pipeline('wiki');
	SELECT lakehouse.create_recentchange_pipeline('wiki');   -- idempotent
});

# Silver has read every committed bronze batch.
sub wait_silver_caught_up
{
	ok(lh_wait_caught_up($node, 'wiki', $topic), 'bronze caught up with the broker');
	ok( $node->poll_query_until('postgres', q{
			SELECT t.last_batch_id = (SELECT coalesce(max(p.batch_id), 0) FROM lakehouse.stream_progress p WHERE p.stream = 'wiki')
			  FROM lakehouse.silver_tables t WHERE t.name = 'edits'}),
		'silver caught up with bronze, by itself');
}

sub totals
{
	my ($kind) = @_;
	my $row = $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(rows_in), 0), coalesce(sum(rows_out), 0), coalesce(sum(duplicates_dropped), 0),
		       coalesce(sum(late_dropped), 0), coalesce(sum(invalid), 0), coalesce(sum(filtered), 0)
		  FROM lakehouse.silver_progress WHERE silver = 'edits' AND kind = '$kind'});
	my %t;
	@t{qw(in out dup late invalid filtered)} = split /\|/, $row;
	return \%t;
}

sub silver_counts
{
	return split /\|/, $node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT event_id) FROM silver.edits');
}

wait_silver_caught_up();
my $bronze = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
is($bronze, $events * ($loops + 1), 'bronze holds every published event (the resent loop too)');
my ($rows, $distinct) = silver_counts();
is($rows, $per_loop * $loops, 'silver.edits holds each edit/new event of every loop once');
is($distinct, $rows, 'no event id twice in silver');
my $t = totals('pass');
is($t->{in}, $bronze, 'passes read every bronze row');
is($t->{dup}, $per_loop, 'the resent loop counted as duplicates');
is($t->{late}, 0, 'nothing late');
is($t->{invalid}, 0, 'nothing invalid');
is($t->{filtered}, $bronze - $per_loop * ($loops + 1), 'other event types filtered out');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM silver.edits s JOIN bronze.wiki b USING (kafka_partition, kafka_offset)
		 WHERE (b.payload->'meta'->>'id')::uuid = s.event_id AND b.payload->>'title' IS NOT DISTINCT FROM s.title}),
	$rows, 'every silver row points at a bronze copy of its event');
is( $node->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'}),
	1, 'one silver worker runs');

# Writes copies of the given events to a file, the i-th with id $prefix followed by i in
# 12 hex digits, and meta.dt the recording's newest plus $offset seconds.
sub write_copies
{
	my ($file, $prefix, $offset, @bases) = @_;
	my ($y, $mo, $d, $h, $mi, $s) = $newest =~ /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)/;
	my $dt = POSIX::strftime('%Y-%m-%dT%H:%M:%SZ', gmtime(timegm($s, $mi, $h, $d, $mo - 1, $y) + $offset));
	open my $fh, '>', $file or die "$file: $!";
	for my $i (0 .. $#bases)
	{
		my %e = %{ $bases[$i] };
		$e{meta} = { %{ $e{meta} }, id => sprintf('%s%012x', $prefix, $i), dt => $dt };
		print $fh $json->encode(\%e), "\n";
	}
	close $fh;
}

# Events stamped an hour behind the newest: late, recorded, replayable.
my $late = 3 + int(rand(8));
my @edits = grep { $_->{type} eq 'edit' } @rec;
write_copies("$tmp/late.jsonl", 'ffffffff-ffff-4fff-8fff-', -3600, map { $edits[ $_ % @edits ] } 0 .. $late - 1);
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/late.jsonl", '--quiet');
wait_silver_caught_up();
($rows) = silver_counts();
is($rows, $per_loop * $loops, 'late events did not enter silver');
is(totals('pass')->{late}, $late, "all $late late events counted as late");
is($node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.silver_late WHERE silver = 'edits'}),
	$late, 'and recorded in silver_late');
my ($replay_in, $replay_out) = split /\|/, $node->safe_psql('postgres', qq{
	SELECT rows_in, rows_out FROM lakehouse.replay_late('edits', timestamptz '$newest' - interval '2 hours', '$newest')});
is($replay_in, $late, 'replay_late took the late events again');
is($replay_out, $late, 'and admitted them');
($rows) = silver_counts();
is($rows, $per_loop * $loops + $late, 'silver holds them after the replay');

# Copies of loop 0 sent again much later: duplicates, not new rows.
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--loops', 1, '--quiet');
wait_silver_caught_up();
($rows) = silver_counts();
is($rows, $per_loop * $loops + $late, 'copies sent later added nothing');
is(totals('pass')->{dup}, 2 * $per_loop, 'they counted as duplicates');

# Continuous refresh off: only refresh_silver() moves silver (the same pass).
$node->safe_psql('postgres', q{SELECT lakehouse.set_silver_continuous('edits', false)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'}),
	'the silver worker exits when no table is continuous');
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--loops', $loops + 1, '--quiet');
ok(lh_wait_caught_up($node, 'wiki', $topic), 'bronze caught up');
sleep 1;
($rows) = silver_counts();
is($rows, $per_loop * $loops + $late, 'with continuous off, silver waits');
my $passes = 0;
while ($passes < 1000)
{
	$passes++;
	last if $node->safe_psql('postgres', q{SELECT rows_in FROM lakehouse.refresh_silver('edits')}) == 0;
}
($rows, $distinct) = silver_counts();
is($rows, $per_loop * ($loops + 1) + $late, "refresh_silver() by hand admitted the new loop ($passes calls)");
is($distinct, $rows, 'still no event id twice');
$t = totals('pass');
is($t->{in}, $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki'), 'every bronze row read once');
is($t->{in}, $t->{out} + $t->{dup} + $t->{late} + $t->{invalid} + $t->{filtered}, 'the ledger balances');
$node->safe_psql('postgres', q{SELECT lakehouse.set_silver_continuous('edits', true)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'}),
	'turned on again, the launcher starts the silver worker');

# The silver worker SIGKILLed in the middle of a backlog (small passes, so there are many):
# the server recovers, the worker starts again from the last committed pass, and silver
# ends with every event once. The kill must land mid-backlog, or the test is inconclusive.
# The backlog waits in bronze (continuous off) and is then read in passes of 20 rows.
my $more = 12;
$node->safe_psql('postgres', q{SELECT lakehouse.set_silver_continuous('edits', false)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'}),
	'silver worker stopped for the backlog');
# Small bronze batches, so that the backlog takes many passes.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.max_batch_messages = 50; SELECT pg_reload_conf()});
my $read_before = totals('pass')->{in};
my $bronze_before = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--loops', $loops + $more, '--quiet');
my $bronze_after = $bronze_before + $events * ($loops + $more);
ok(lh_wait_caught_up($node, 'wiki', $topic), "bronze holds the backlog ($bronze_after rows)");
cmp_ok($node->safe_psql('postgres', qq{SELECT count(*) FROM lakehouse.stream_progress p, lakehouse.silver_tables t
	WHERE t.name = 'edits' AND p.stream = 'wiki' AND p.batch_id > t.last_batch_id}), '>=', 20, 'in many bronze batches');
$node->safe_psql('postgres', q{UPDATE lakehouse.silver_tables SET max_rows_per_pass = 20 WHERE name = 'edits';
	SELECT lakehouse.set_silver_continuous('edits', true)});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'}),
	'silver worker started on the backlog');
my $silver_pid = $node->safe_psql('postgres', q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse silver'});
my $seen = lh_wait_beyond($node, q{SELECT coalesce(sum(rows_in), 0) FROM lakehouse.silver_progress WHERE silver = 'edits' AND kind = 'pass'},
	$read_before + 100);
my $log_offset = -s $node->logfile;
kill 'KILL', $silver_pid;
$node->wait_for_log(qr/\(PID $silver_pid\) was terminated by signal 9/, $log_offset);
ok(lh_wait_recovered($node), 'the server recovered from the crash');
my $read_at_kill = totals('pass')->{in};
if (!($read_at_kill > $read_before && $read_at_kill < $bronze_after))
{
	fail("inconclusive: the kill found $read_at_kill bronze rows read by silver (before: $read_before,"
		  . " bronze after the backlog: $bronze_after); it did not land mid-backlog");
	done_testing();
	exit 1;
}
pass("the kill landed mid-backlog: silver had read $read_at_kill of $bronze_after bronze rows");
wait_silver_caught_up();
($rows, $distinct) = silver_counts();
is($rows, $per_loop * ($loops + $more) + $late, 'after the crash, silver holds each event of every loop once');
is($distinct, $rows, 'no event id twice');
$t = totals('pass');
is($t->{in}, $bronze_after, 'every bronze row read once across the crash');
is($t->{in}, $t->{out} + $t->{dup} + $t->{late} + $t->{invalid} + $t->{filtered}, 'the ledger balances');

# A silver table whose passes fail (its owner lost the right to read bronze) is reported
# and retried with backoff by the silver worker, and holds up no other table.
$node->safe_psql('postgres', q{
	CREATE ROLE regress_silver_owner;
	GRANT lakehouse_admin TO regress_silver_owner;
	SET ROLE regress_silver_owner;
	SELECT lakehouse.create_silver('broken', 'wiki',
	  ARRAY[lakehouse.silver_column('id', 'uuid', $e$(payload->'meta'->>'id')::uuid$e$),
	        lakehouse.silver_column('t', 'timestamptz', $e$(payload->'meta'->>'dt')::timestamptz$e$)],
	  ARRAY['id'], 't');
	RESET ROLE;
	REVOKE SELECT ON bronze.wiki FROM regress_silver_owner;
});
$log_offset = -s $node->logfile;
my $edits_before = totals('pass')->{in};
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--quiet');
wait_silver_caught_up();
cmp_ok(totals('pass')->{in}, '>', $edits_before, 'silver.edits went on while the other table failed');
ok($node->wait_for_log(qr/WARNING:  lakehouse silver pass of "broken" failed: permission denied for table wiki/, $log_offset),
	'the failing table is reported in the server log');
my $warnings = () = slurp_file($node->logfile, $log_offset) =~ /silver pass of "broken" failed/g;
sleep 2;
my $warnings_later = () = slurp_file($node->logfile, $log_offset) =~ /silver pass of "broken" failed/g;
cmp_ok($warnings_later - $warnings, '<=', 3, "and retried with backoff, not in a loop ($warnings, then $warnings_later after 2 s)");
$node->safe_psql('postgres', q{SELECT lakehouse.drop_silver('broken', true); DROP OWNED BY regress_silver_owner; DROP ROLE regress_silver_owner;});

# An idle pipeline spends no transaction ids (the silver worker's look for new batches is
# read-only): the next transaction id does not move while nothing arrives.
my $xid_before = $node->safe_psql('postgres', 'SELECT pg_snapshot_xmax(pg_current_snapshot())');
sleep 2;
my $xid_after = $node->safe_psql('postgres', 'SELECT pg_snapshot_xmax(pg_current_snapshot())');
is($xid_after, $xid_before, 'no transaction id spent in 2 s of idling');

# A copy resent an hour after its original is still dropped. First every partition's
# watermark moves more than an hour past the recording: one edit per wiki (the message
# key, so every partition that holds the recording gets one), 80 minutes after its
# newest event. Then loop 0 is sent once more, its copies carrying their original times.
my ($rows_before_ahead) = silver_counts();
my %by_wiki = map { $_->{wiki} => $_ } grep { $_->{type} eq 'edit' && defined $_->{wiki} } @rec;
my @ahead_wikis = sort keys %by_wiki;
write_copies("$tmp/ahead.jsonl", 'eeeeeeee-eeee-4eee-8eee-', 80 * 60, map { $by_wiki{$_} } @ahead_wikis);
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/ahead.jsonl", '--quiet');
wait_silver_caught_up();
is( $node->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE max_event_time - interval '10 minutes' > timestamptz '$newest' + interval '1 hour')
		       = count(*) AND count(*) > 0
		  FROM lakehouse.silver_partitions WHERE silver = 'edits'}),
	't', 'every partition\'s watermark is more than an hour past the recording (the resend below would be late)');
my ($rows_ahead) = silver_counts();
is($rows_ahead - $rows_before_ahead, scalar(@ahead_wikis), 'the edits 80 minutes ahead were admitted');
my $before = totals('pass');
run_producer('--brokers', $brokers, '--topic', $topic, '--file', "$tmp/rec.jsonl", '--loops', 1, '--quiet');
wait_silver_caught_up();
my $after = totals('pass');
($rows) = silver_counts();
is($rows, $rows_ahead, 'copies resent an hour after their originals added nothing');
is($after->{dup} - $before->{dup}, $per_loop, 'they counted as duplicates');
is($after->{late} - $before->{late}, 0, 'and none as late');

# The asset checks on a real stream: all pass (the broker check asks the broker itself),
# and an offset moved past the broker's end fails the broker check.
wait_silver_caught_up();
is( $node->safe_psql('postgres', q{
		SELECT string_agg(check_name || '=' || coalesce(passed::text, 'skipped'), ' ' ORDER BY check_name)
		  FROM lakehouse.run_checks() WHERE passed IS DISTINCT FROM true}),
	'', 'every asset check passes on the real pipeline');
$node->safe_psql('postgres', q{SELECT lakehouse.stop_stream('wiki')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'}),
	'stream stopped');
$node->safe_psql('postgres', q{UPDATE lakehouse.offsets SET next_offset = next_offset + 5 WHERE stream = 'wiki' AND kafka_partition = 0});
like( $node->safe_psql('postgres', q{SELECT passed::text || ': ' || detail FROM lakehouse.run_checks() WHERE check_name = 'bronze_matches_broker:wiki'}),
	qr/^false: partition 0: next_offset \d+ is past the broker's high watermark/, 'an offset past the broker fails the broker check');

$node->stop;
done_testing();
