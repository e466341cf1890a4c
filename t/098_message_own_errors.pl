# A message that bronze cannot take for a reason of its own becomes a dead letter, even
# when the error is not a data exception (SQLSTATE class 22): a JSON array of more than
# 2^24 elements passes every check before COPY (valid JSON, shallow, under a raised
# lakehouse.max_message_bytes), then jsonb's input asks for a 1 GB array and PostgreSQL
# refuses with XX000 "invalid memory alloc request size". Before, that error aborted the
# batch, and the same batch failed on every retry: the stream stood still for good.
# The other side of the rule: the same error met by a stand-in row at the same offset
# (here a trigger that raises it for every row) is the table's, not the message's: the
# batch aborts, nothing becomes a dead letter, and once the cause is gone every message
# arrives. An XX000 of another kind (a trigger's RAISE) blames no message either.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
my $node = lh_node('message_own_errors', conf => "lakehouse.max_message_bytes = '64MB'\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('own_errors');
# The broker must take one message of about 34 MB (a record batch must also fit a segment).
my $big_limit = 64 * 1024 * 1024;
lh_create_topic(lh_kafka_dir(), $topic, 1, "max.message.bytes=$big_limit", 'segment.bytes=' . 2 * $big_limit);

# More elements than 2^24: jsonb's array of 32-byte entries doubles past 2^24 to 1 GB.
my $elements = 2**24 + 1 + int(rand(100_000));
my $huge = '[' . ('1,' x ($elements - 1)) . '1]';
my $huge_file = "$PostgreSQL::Test::Utils::tmp_check/huge.json";
open(my $fh, '>', $huge_file) or die "$huge_file: $!";
print $fh $huge;
close $fh;
cmp_ok(length($huge), '<', 64 * 1024 * 1024, 'the array is under lakehouse.max_message_bytes (64MB): no check refuses it before COPY');

# Whether PostgreSQL itself refuses this value with the allocation limit's XX000; if it
# took it (a PostgreSQL that can allocate more), this test would prove nothing.
my ($rc, $out, $err) = $node->psql('postgres', "SELECT pg_column_size(pg_read_file('$huge_file')::jsonb)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
unless (like($err, qr/ERROR:  XX000: invalid memory alloc request size/,
		'precondition: jsonb input refuses the array with XX000, the 1 GB allocation limit'))
{
	fail("inconclusive: jsonb input did not refuse the array as expected: $err");
	done_testing();
	exit 1;
}

# The stream first, idle on the empty topic; its worker is then held at its first batch's
# ledger row while five to nine events, the huge array and five to nine more are
# published, so that librdkafka has queued the array together with the events after it
# and the array's batch holds several messages (several attempts parse it).
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('own_errors', '$topic')");
ok($node->poll_query_until('postgres', q{SELECT state = 'running' FROM lakehouse.stream_status() WHERE stream = 'own_errors'}),
	'the stream runs on the empty topic');
my $stream_pid = $node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'own_errors'});
my $hold = $node->background_psql('postgres');
$hold->query_safe('BEGIN; LOCK TABLE lakehouse.stream_progress IN SHARE MODE');
my $before = 5 + int(rand(5));
my $after = 5 + int(rand(5));
lh_produce($brokers, $topic, 0, $before, 'before');
ok($node->poll_query_until('postgres', lh_waits_on_ledger_sql($stream_pid)), 'the worker holds its first batch');
{
	my ($kout, $kerr) = ('', '');
	IPC::Run::run([ 'kcat', '-P', '-b', $brokers, '-t', $topic, '-p', 0,
			'-X', "message.max.bytes=$big_limit", $huge_file ],
		'>', \$kout, '2>', \$kerr, IPC::Run::timeout(120))
	  or die "kcat could not publish the array: $kerr";
}
lh_produce($brokers, $topic, 0, $after, 'after');
my $wm = lh_broker_watermarks($brokers, $topic);
is($wm->{0}[1], $before + 1 + $after, 'the topic holds the events and the array');
sleep 3;    # librdkafka fetches ahead (lakehouse.prefetch_memory, 128MB) while the worker waits
$hold->query_safe('COMMIT');
$hold->quit;
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'the stream caught up past the array');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.own_errors'), $before + $after,
	'bronze holds every event');
is($node->safe_psql('postgres',
		q{SELECT kafka_offset || ' ' || length(raw_value) FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	"$before " . length($huge), 'the array is a dead letter at its offset, with its whole payload');
like($node->safe_psql('postgres', q{SELECT reason FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	qr/refused by bronze: invalid memory alloc request size \d+ \(SQLSTATE XX000\)/, 'its reason is the error and its SQLSTATE');
my $batch_messages = $node->safe_psql('postgres', q{
	SELECT p.messages FROM lakehouse.stream_progress p JOIN lakehouse.dead_letters d USING (stream, batch_id)
	 WHERE p.stream = 'own_errors'});
unless (cmp_ok($batch_messages, '>', 2, "the array's batch held $batch_messages messages: it was parsed more than once"))
{
	fail('inconclusive: the array came in a batch of its own, so one parse was enough and the memory check below proves nothing');
	done_testing();
	exit 1;
}
lh_check_exactly_once($node, 'own_errors', $topic, 'after the array');
# Each attempt parsed the array up to about 1 GB of jsonb input's memory (a 512 MB array,
# touched, then the failed 1 GB request), and several attempts were made (the batch, then
# its halves down to the array alone). Freed after each attempt, the worker's peak resident
# memory stays near one attempt's (about 1.4 GB seen); kept until the batch ended, it
# grows by about 0.7 GB per attempt.
my $worker = $node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'own_errors'});
is($worker, $stream_pid, 'the worker that took the array is the one measured (it never restarted)');
my ($hwm_kb) = slurp_file("/proc/$worker/status") =~ /^VmHWM:\s+(\d+) kB/m;
note(sprintf('stream worker peak resident memory after the array: %.0f MB', $hwm_kb / 1024));
cmp_ok($hwm_kb, '<', 2.5 * 1024 * 1024, 'the worker never held much more than one attempt\'s memory (under 2.5 GB)');

# The table's own refusal: a trigger raises the same allocation error for every row (it
# casts the array's file to jsonb). A stand-in row meets it too, so no message is blamed:
# the batch aborts, and the worker starts over from its last commit. One message, so that
# each try parses the array only twice (the message, then its stand-in).
$node->safe_psql('postgres', qq{
	CREATE FUNCTION public.bronze_too_big() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN
		PERFORM pg_catalog.pg_read_file('$huge_file')::jsonb;
		RETURN NEW;
	END \$\$;
	CREATE TRIGGER too_big BEFORE INSERT ON bronze.own_errors FOR EACH ROW EXECUTE FUNCTION public.bronze_too_big();
});
my $offsets_before = $node->safe_psql('postgres', q{SELECT next_offset FROM lakehouse.offsets WHERE stream = 'own_errors'});
my $more = 1;
my $log_offset = -s $node->logfile;
lh_produce($brokers, $topic, 0, $more, 'too-big');
# The log, not stream_status(): a worker that ran for a while is restarted at once, and
# the new one clears last_error as it starts.
$node->wait_for_log(qr/ERROR:  invalid memory alloc request size \d+\n.*CONTEXT:  SQL statement "SELECT pg_catalog\.pg_read_file/,
	$log_offset);
$node->wait_for_log(qr/background worker "lakehouse stream" \(PID \d+\) exited with exit code 1/, $log_offset);
pass('the worker met the allocation error for its batch, and its batch aborted');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	1, 'and blames no message for it: the stand-in met it too, no new dead letter');
is($node->safe_psql('postgres', q{SELECT next_offset FROM lakehouse.offsets WHERE stream = 'own_errors'}),
	$offsets_before, 'the offsets did not move');
$node->safe_psql('postgres', 'DROP TRIGGER too_big ON bronze.own_errors');
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'with the trigger gone, the stream catches up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.own_errors'), $before + $after + $more,
	'and bronze holds every event');

# An XX000 of another kind, raised for one message by its content, is not a size refusal:
# the batch aborts and waits, and the message arrives once the trigger is gone.
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF NEW.payload ? 'poison' THEN
			RAISE EXCEPTION 'poison refused' USING ERRCODE = 'internal_error';
		END IF;
		RETURN NEW;
	END $$;
	CREATE TRIGGER poison BEFORE INSERT ON bronze.own_errors FOR EACH ROW EXECUTE FUNCTION public.refuse_poison();
});
$log_offset = -s $node->logfile;
lh_publish($brokers, $topic,
	[ [ 0, undef, lh_event('poison', 1) ], [ 0, undef, '{"poison": true}' ], [ 0, undef, lh_event('poison', 2) ] ]);
$node->wait_for_log(qr/ERROR:  poison refused/, $log_offset);
$node->wait_for_log(qr/background worker "lakehouse stream" \(PID \d+\) exited with exit code 1/, $log_offset);
pass('a trigger raising XX000 for one message aborts the batch');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	1, 'and blames no message');
$node->safe_psql('postgres', 'DROP TRIGGER poison ON bronze.own_errors');
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'with that trigger gone, the stream catches up');
is($node->safe_psql('postgres', q{SELECT count(*) FROM bronze.own_errors WHERE payload ? 'poison'}), 1,
	'and the message is in bronze');
lh_check_exactly_once($node, 'own_errors', $topic, 'after both triggers');

$node->stop;
done_testing();
