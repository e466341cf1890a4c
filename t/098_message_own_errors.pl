# A message that bronze cannot take for a reason of its own becomes a dead letter, even
# when the error is not a data exception (SQLSTATE class 22): a JSON array of more than
# 2^24 elements passes every check before COPY (valid JSON, shallow, under a raised
# lakehouse.max_message_bytes), then jsonb's input asks for a 1 GB array and PostgreSQL
# refuses with XX000 "invalid memory alloc request size". Before, that error aborted the
# batch, and the same batch failed on every retry: the stream stood still for good.
# The other side of the rule: an error that a stand-in row at the same offset meets too
# (here a trigger that refuses every row with such a code) is the table's, not the
# message's: the batch aborts, nothing becomes a dead letter, and once the cause is gone
# every message arrives.
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

# More elements than 2^24: jsonb's element array doubles past 2^24 entries of 64 bytes.
my $elements = 2**24 + 1 + int(rand(100_000));
my $huge = '[' . ('1,' x ($elements - 1)) . '1]';
my $huge_file = "$PostgreSQL::Test::Utils::tmp_check/huge.json";
open(my $fh, '>', $huge_file) or die "$huge_file: $!";
print $fh $huge;
close $fh;
cmp_ok(length($huge), '<', 64 * 1024 * 1024, 'the array is under lakehouse.max_message_bytes (64MB): no check refuses it before COPY');

# Whether PostgreSQL itself refuses this value with an error outside class 22; if it took
# it (a PostgreSQL that can allocate more), this test would prove nothing.
my ($rc, $out, $err) = $node->psql('postgres', "SELECT pg_column_size(pg_read_file('$huge_file')::jsonb)",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  (XX000|54000|53200): /,
	'precondition: jsonb input refuses the array with an error outside SQLSTATE class 22')
  or BAIL_OUT("jsonb took the array: $err");
my ($huge_code) = $err =~ /ERROR:  (\w{5}): /;
note("jsonb input said: $err");

# Five events, the huge array, five more events, all in one partition.
my $before = 5 + int(rand(5));
my $after = 5 + int(rand(5));
lh_produce($brokers, $topic, 0, $before, 'before');
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

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('own_errors', '$topic')");
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'the stream caught up past the array');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.own_errors'), $before + $after,
	'bronze holds every event');
is($node->safe_psql('postgres',
		q{SELECT kafka_offset || ' ' || length(raw_value) FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	"$before " . length($huge), 'the array is a dead letter at its offset, with its whole payload');
like($node->safe_psql('postgres', q{SELECT reason FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	qr/refused by bronze: .+ \(SQLSTATE \Q$huge_code\E\)/, 'its reason is the error and its SQLSTATE');
lh_check_exactly_once($node, 'own_errors', $topic, 'after the array');

# The table's own refusal: a trigger refuses every row with an error of the same kinds. A
# stand-in row meets it too, so no message is blamed: the batch aborts and is retried.
$node->safe_psql('postgres', q{
	CREATE FUNCTION public.bronze_closed() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		RAISE EXCEPTION 'bronze is closed for maintenance' USING ERRCODE = 'program_limit_exceeded';
	END $$;
	CREATE TRIGGER closed BEFORE INSERT ON bronze.own_errors FOR EACH ROW EXECUTE FUNCTION public.bronze_closed();
});
my $more = 3 + int(rand(5));
lh_produce($brokers, $topic, 0, $more, 'closed');
ok($node->poll_query_until('postgres',
		q{SELECT last_error LIKE '%bronze is closed for maintenance%' FROM lakehouse.streams WHERE name = 'own_errors'}),
	'the worker reports the table refusing its batch');
is($node->safe_psql('postgres', q{SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'own_errors'}),
	1, 'and blames no message: no new dead letter');
is($node->safe_psql('postgres', q{SELECT next_offset FROM lakehouse.offsets WHERE stream = 'own_errors'}),
	$before + 1 + $after, 'the offsets did not move');
$node->safe_psql('postgres', 'DROP TRIGGER closed ON bronze.own_errors');
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'with the trigger gone, the stream catches up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.own_errors'), $before + $after + $more,
	'and bronze holds every event');
lh_check_exactly_once($node, 'own_errors', $topic, 'after the refusing trigger');

# A trigger that refuses one message by its content, with such a code, blames that message.
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
lh_publish($brokers, $topic,
	[ [ 0, undef, lh_event('poison', 1) ], [ 0, undef, '{"poison": true}' ], [ 0, undef, lh_event('poison', 2) ] ]);
ok(lh_wait_caught_up($node, 'own_errors', $topic), 'the stream catches up past a message the trigger refuses');
is($node->safe_psql('postgres',
		q{SELECT string_agg(reason, ';') FROM lakehouse.dead_letters WHERE stream = 'own_errors' AND convert_from(raw_value, 'UTF8') LIKE '%poison%'}),
	'refused by bronze: poison refused (SQLSTATE XX000)', 'that message alone is a dead letter');
lh_check_exactly_once($node, 'own_errors', $topic, 'after the refused message');

$node->stop;
done_testing();
