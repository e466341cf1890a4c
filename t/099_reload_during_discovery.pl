# A reload while the stream worker waits for its broker at start (partition discovery)
# must not leave its message array smaller than the capacity it believes it has. Before
# the fix (issue 10 item 7) the worker recorded the capacity when it started
# (max_batch_messages = 100000 here) and allocated the array after discovery, with the
# value of a reload received meanwhile (10): a later reload to 50000 passed the "grow if
# larger than the capacity" test, and the next batch wrote 50000 message pointers into an
# array of 10. Evidence that the window was hit: the stream shows 'waiting for broker'
# across the first reload, its first batch holds exactly 10 messages, and a later batch
# holds more than 10; then the same worker, no crash, every offset once.
# Limit: run against the old code this test passes too. The overflow lands in memory the
# worker owns (its top memory context's free space) and nothing checks it in a build
# without assertions; the test shows the window is reached and handled, not that a
# corruption would be seen.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

# A broker of our own, stopped while the worker starts (the shared one serves others).
my $kdir = PostgreSQL::Test::Utils::tempdir('kafka');
my $kport = lh_free_port_pair();
my $brokers = (split /\n/, lh_kafka('start', $kdir, '--port', $kport))[-1];
my $node = lh_node('reload_discovery', conf => "lakehouse.max_batch_messages = 100000\nlakehouse.brokers = '$brokers'\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('reload_discovery');
lh_create_topic($kdir, $topic, 1);
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('rd', '$topic')");
ok($node->poll_query_until('postgres', q{SELECT state = 'running' FROM lakehouse.stream_status() WHERE stream = 'rd'}),
	'the stream runs');
my $first_pid = $node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'rd'});
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('rd')");
my $gone = lh_wait_gone($first_pid);
ok($gone, 'stopped: its worker is gone');
# Small messages, so that one batch of the second reload's size fits librdkafka's queue.
my $backlog = 60000 + int(rand(10000));
lh_publish($brokers, $topic, [ map { [ 0, undef, qq({"rd":$_}) ] } 1 .. $backlog ]);



# The broker goes down; the new worker starts with 100000 and waits in discovery.
lh_kafka('kill', $kdir);
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('rd')");
ok($node->poll_query_until('postgres', q{SELECT state = 'waiting for broker' FROM lakehouse.stream_status() WHERE stream = 'rd'}),
	'the new worker waits for the broker at start');
my $pid = $node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'rd'});
isnt($pid, $first_pid, 'a new worker');
lh_set_conf($node, 'ALTER SYSTEM SET lakehouse.max_batch_messages = 10');
sleep 2;    # the reload wakes the waiting worker at once; its next look at the broker is later
is($node->safe_psql('postgres', q{SELECT state FROM lakehouse.stream_status() WHERE stream = 'rd'}), 'waiting for broker', 'the worker still waits for the broker after the reload to 10');

# Its first batch is held at the ledger row, so that the next reload lands before batch 2.
my $hold = $node->background_psql('postgres');
$hold->query_safe('BEGIN; LOCK TABLE lakehouse.stream_progress IN SHARE MODE');
lh_kafka('start', $kdir);
ok($node->poll_query_until('postgres', lh_waits_on_ledger_sql($pid)), 'the worker found the broker and holds its first batch');
lh_set_conf($node, 'ALTER SYSTEM SET lakehouse.max_batch_messages = 50000');
my $log_offset = -s $node->logfile;
$hold->query_safe('COMMIT');
$hold->quit;

ok(lh_wait_caught_up($node, 'rd', $topic), 'the stream caught up with the backlog');
my ($first, $largest) = split /\|/, $node->safe_psql('postgres', q{
	SELECT (SELECT messages FROM lakehouse.stream_progress WHERE stream = 'rd' AND messages > 0 ORDER BY batch_id LIMIT 1),
	       (SELECT max(messages) FROM lakehouse.stream_progress WHERE stream = 'rd')});
is($first, 10, 'its first batch held 10 messages: the reload during discovery was read before the array was made');
cmp_ok($largest, '>', 10, "after the reload to 50000, batches held more than 10 (the largest $largest)");
cmp_ok($largest, '<=', 50000, 'and no more than 50000');
is($node->safe_psql('postgres', q{SELECT worker_pid FROM lakehouse.streams WHERE name = 'rd'}), $pid,
	'the same worker did it all');
ok(!$node->log_contains(qr/\(PID $pid\) was terminated by signal/, $log_offset), 'and it did not crash');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.rd'), $backlog, 'bronze holds every event');
lh_check_exactly_once($node, 'rd', $topic, 'after both reloads');

$node->stop;
lh_kafka('remove', $kdir);
done_testing();
