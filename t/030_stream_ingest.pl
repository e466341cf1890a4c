# Kafka to bronze on a real broker: every offset lands exactly once, either as a bronze row
# or as a dead letter with its reason; the SQL API drives the worker (stop, start, latest,
# drop) and refuses bad calls without changing anything; a lost or rolled-back offsets table
# is recovered from the data.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5 qw(md5_hex);
use Time::Local qw(timegm);
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();    # the shuffles and counts below; LAKEHOUSE_TEST_SEED replays a run
my $node = lh_node('ingest', conf => "lakehouse.max_batch_messages = 200\n"
	  . "lakehouse.max_message_bytes = '64kB'\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

my $topic = lh_unique_name('ingest');
my $partitions = 3;
lh_create_topic(lh_kafka_dir(), $topic, $partitions);

# --- Bad calls are refused and change nothing.
# The canary exists before the injection attempt, so a name that ran as SQL would drop it.
$node->safe_psql('postgres', 'CREATE TABLE canary (x int)');
my ($rc, $out, $err);
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT lakehouse.create_stream('x"; drop table canary; --', '$topic')});
like($err, qr/invalid stream name/, 'a stream name with SQL in it is refused');
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT lakehouse.create_stream('Bad Name', '$topic')});
like($err, qr/HINT:\s+Choose a name such as/, 'the refusal says what a valid name looks like');
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT lakehouse.create_stream('ghost', 'no_such_topic_$topic')});
like($err, qr/Kafka topic "no_such_topic_\w+" does not exist/, 'unknown topic is refused');
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT lakehouse.create_stream('ghost', '$topic', start_from => 'whenever')});
like($err, qr/invalid start_from "whenever"/, 'a bad start_from is refused');
is($node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM lakehouse.streams) + (SELECT count(*) FROM lakehouse.offsets)"
		  . " + (SELECT count(*) FROM pg_tables WHERE schemaname = 'bronze')"),
	'0', 'refused calls left no stream, offsets or bronze table behind');
is($node->safe_psql('postgres', "SELECT to_regclass('canary') IS NOT NULL"), 't', 'canary table untouched');

# --- The scenario: good events and every kind of poison, shuffled, on every partition.
my $poison = lh_poison_kinds();
my (@records, %expected_dead, %dead_bytes, %good_ids, %published);
my $seq = 0;
for my $p (0 .. $partitions - 1)
{
	my @msgs;
	push @msgs, map { [ undef, lh_event("ingest-p$p", $seq++) ] } 1 .. (300 + int(rand(400)));
	# Good events whose text holds 600 brackets inside a string, after an escaped quote
	# and before an escaped backslash: the nesting check must skip strings correctly.
	my $inside = '\\"' . ('[' x 600) . ('{' x 10) . '\\\\';
	push @msgs, map { my $v = lh_event("ingest-p$p", $seq++); $v =~ s/"comment":"/"comment":"$inside/; [ undef, $v ] } 1 .. 2;
	push @msgs, map { [ @{ $poison->{$_} }[ 0, 1 ], $_ ] } sort keys %$poison;
	# Fisher-Yates with Perl's rand: a different interleaving each run.
	for (my $i = $#msgs; $i > 0; $i--)
	{
		my $j = int(rand($i + 1));
		@msgs[ $i, $j ] = @msgs[ $j, $i ];
	}
	for my $offset (0 .. $#msgs)
	{
		my ($key, $value, $kind) = @{ $msgs[$offset] };
		push @records, [ $p, $key, $value ];
		if (defined $kind) { $expected_dead{"$p/$offset"} = $kind; $dead_bytes{"$p/$offset"} = [ $key, $value ]; }
		else { $good_ids{ ($value =~ /"seq":(\d+)\}$/)[0] } = 1; }
	}
	$published{$p} = scalar(@msgs);
}
lh_publish($brokers, $topic, \@records);
my $total = @records;
my $n_dead = keys %expected_dead;
note("published $total messages, $n_dead of them poison, over $partitions partitions");

$node->safe_psql('postgres', "SELECT lakehouse.create_stream('wiki', '$topic')");
ok(lh_wait_caught_up($node, 'wiki', $topic), 'the stream catches up with the broker');

my $wm = lh_check_exactly_once($node, 'wiki', $topic, 'ingest');
for my $p (0 .. $partitions - 1)
{
	is($wm->{$p}[1] - $wm->{$p}[0], $published{$p}, "partition $p: the broker holds what was published ($published{$p})");
}

# Each poison message is a dead letter exactly once, at its offset, with the right reason.
my %dead = map { my ($p, $o, $reason) = split /\|/; ("$p/$o" => $reason) } split /\n/,
  $node->safe_psql('postgres',
	"SELECT kafka_partition, kafka_offset, reason FROM lakehouse.dead_letters WHERE stream = 'wiki'");
cmp_ok($n_dead, '>', 0, 'the scenario has poison messages for the checks below');
is(scalar(keys %dead), $n_dead, "dead letters: $n_dead, one per poison message");
for my $where (sort keys %expected_dead)
{
	my $kind = $expected_dead{$where};
	like($dead{$where} // '(missing)', $poison->{$kind}[2], "poison '$kind' at $where dead-lettered with its reason");
}
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM lakehouse.dead_letters
	 WHERE stream = 'wiki' AND reason LIKE 'value contains a NUL byte' AND position('\x00'::bytea IN raw_value) > 0}),
	$partitions, 'raw bytes are kept as they came');
# Every dead letter holds the key and the value exactly as published (NULL for none),
# the key that is not UTF-8 among them.
my $digest = sub { defined $_[0] ? md5_hex($_[0]) . '/' . length($_[0]) : 'null' };
my %stored_bytes = map { my ($p, $o, $k, $v) = split /\|/; ("$p/$o" => "$k $v") } split /\n/, $node->safe_psql('postgres', q{
	SELECT kafka_partition, kafka_offset, coalesce(md5(kafka_key) || '/' || length(kafka_key), 'null'),
	       coalesce(md5(raw_value) || '/' || length(raw_value), 'null')
	  FROM lakehouse.dead_letters WHERE stream = 'wiki'});
is_deeply(\%stored_bytes, { map { $_ => $digest->($dead_bytes{$_}[0]) . ' ' . $digest->($dead_bytes{$_}[1]) } keys %dead_bytes },
	'every dead letter keeps the raw key and value bytes that were published');
is(join(',', sort map { unpack('H*', $dead_bytes{$_}[0]) } grep { $expected_dead{$_} eq 'bad_key' } keys %expected_dead),
	$node->safe_psql('postgres', q{
		SELECT string_agg(encode(kafka_key, 'hex'), ',' ORDER BY encode(kafka_key, 'hex')) FROM lakehouse.dead_letters
		 WHERE stream = 'wiki' AND reason = 'key is not valid UTF-8 text'}),
	'the keys that are not UTF-8 are stored byte for byte (' . $partitions . ' of them)');

# Every good event is in bronze once, with its payload intact.
my @seqs = split /\n/, $node->safe_psql('postgres', "SELECT payload->>'seq' FROM bronze.wiki ORDER BY (payload->>'seq')::int");
is_deeply(\@seqs, [ sort { $a <=> $b } keys %good_ids ], 'bronze holds exactly the good events, once each');
is($node->safe_psql('postgres', q{SELECT count(*) FROM bronze.wiki WHERE payload->>'comment' LIKE '"' || repeat('[', 600) || '%'}),
	2 * $partitions, 'brackets inside strings do not count as nesting (escaped quotes skipped right)');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM bronze.wiki WHERE payload->>'title' LIKE 'Page % ' || chr(233) || 't' || chr(233)"),
	scalar(keys %good_ids), 'non-ASCII text survives');

# Progress rows add up; batches were bounded by max_batch_messages.
my ($batches, $msgs, $dl, $biggest) = split /\|/, $node->safe_psql('postgres',
	"SELECT count(*), sum(messages), sum(dead_letters), max(messages) FROM lakehouse.stream_progress WHERE stream = 'wiki'");
is($msgs, $total, 'stream_progress counts every message');
is($dl, $n_dead, 'stream_progress counts every dead letter');
cmp_ok($batches, '>', 1, "several micro-batches ($batches)");
cmp_ok($biggest, '<=', 200, 'no batch exceeds lakehouse.max_batch_messages');

my $status = $node->safe_psql('postgres',
	"SELECT count(*), sum(lag), bool_and(state = 'running'), bool_and(worker_pid IS NOT NULL) FROM lakehouse.stream_status()");
is($status, "$partitions|0|t|t", 'stream_status: every partition running with lag 0 and a worker pid');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'lakehouse stream' AND application_name = 'lakehouse stream wiki'"),
	'1', 'the worker is named in pg_stat_activity');

# --- stop_stream: the worker goes; what arrives meanwhile waits in Kafka; start resumes.
my $pid = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'wiki'");
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('wiki')");
my $gone = lh_wait_gone($pid);
ok($gone, 'stop_stream ends the worker');
is($node->safe_psql('postgres', "SELECT DISTINCT state FROM lakehouse.stream_status()"), 'stopped',
	'stream_status says stopped');
my @more = map { [ $_ % $partitions, undef, lh_event('ingest-more', $seq++) ] } 1 .. 150;
lh_publish($brokers, $topic, \@more);
$published{ $_->[0] }++ for @more;
my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('wiki')");
ok(lh_wait_caught_up($node, 'wiki', $topic), 'after start_stream the stream catches up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki'), $before + 150,
	'exactly the messages published while stopped were added');

# --- start_from latest: only what arrives after creation.
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('wiki_latest', '$topic', start_from => 'latest')");
my @late = map { [ $_ % $partitions, undef, lh_event('ingest-late', $seq++) ] } 1 .. 40;
lh_publish($brokers, $topic, \@late);
ok(lh_wait_caught_up($node, 'wiki_latest', $topic), 'the latest stream catches up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki_latest'), '40',
	'start_from latest ingests only the 40 messages published after creation');

# --- Offsets lost or rolled back while stopped: the data is the second checkpoint.
ok(lh_wait_caught_up($node, 'wiki', $topic), 'wiki caught up before the offsets are damaged');
my $rows_before = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('wiki')");
$node->safe_psql('postgres', "DELETE FROM lakehouse.offsets WHERE stream = 'wiki' AND kafka_partition = 0");
$node->safe_psql('postgres', "UPDATE lakehouse.offsets SET next_offset = next_offset - 25 WHERE stream = 'wiki' AND kafka_partition = 1");
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('wiki')");
ok(lh_wait_caught_up($node, 'wiki', $topic), 'the stream recovers from lost and rolled-back offsets');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki'), $rows_before,
	'no row was inserted twice after the offsets were damaged');
is($node->safe_psql('postgres', q{
	SELECT string_agg(event || ':' || (detail->>'partition'), ',' ORDER BY event)
	  FROM lakehouse.stream_log WHERE stream = 'wiki' AND event IN ('offsets_restored_from_data', 'resumed_from_data')}),
	'offsets_restored_from_data:0,resumed_from_data:1', 'each recovery is recorded in stream_log');

# The whole offsets table truncated: one stream stopped, the other (wiki_latest) running,
# whose next commit then finds no checkpoint to compare with and must not write anything.
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('wiki')");
my $log_before = $node->safe_psql('postgres', 'SELECT max(id) FROM lakehouse.stream_log');
$node->safe_psql('postgres', 'TRUNCATE lakehouse.offsets');
lh_publish($brokers, $topic, [ map { [ $_ % $partitions, undef, lh_event('ingest-truncated', $seq++) ] } 1 .. 90 ]);
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('wiki')");
ok(lh_wait_caught_up($node, 'wiki', $topic) && lh_wait_caught_up($node, 'wiki_latest', $topic),
	'both streams recover from a truncated offsets table');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki'), $rows_before + 90,
	'wiki: exactly the 90 new messages were added, none twice');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki_latest'), 40 + 90,
	'wiki_latest (running during the truncate): exactly the 90 new messages were added, none twice');
is($node->safe_psql('postgres', qq{
	SELECT count(*) FROM lakehouse.stream_log
	 WHERE id > $log_before AND event = 'offsets_restored_from_data' AND stream IN ('wiki', 'wiki_latest')}),
	2 * $partitions, 'every partition of both streams was restored from its data, and logged');

# --- stop_stream and start_stream in the middle of a backlog.
my $pub = lh_publish_start($brokers, $topic, [ map { [ $_ % $partitions, undef, lh_event('ingest-mid', $seq++) ] } 1 .. 40000 ]);
my $rows_now = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
my $seen = lh_wait_beyond($node, 'SELECT count(*) FROM bronze.wiki', $rows_now);
$node->safe_psql('postgres', "SELECT lakehouse.stop_stream('wiki')");
my $at_stop = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki');
lh_publish_finish($pub);
if ($at_stop >= $rows_now + 40000)
{
	fail("inconclusive: stop_stream came after the whole backlog was committed");
}
else
{
	pass('stop_stream landed mid-backlog: ' . ($at_stop - $rows_now) . ' of 40000 committed ('
		  . ($seen - $rows_now) . ' when the stop was sent)');
}
$node->safe_psql('postgres', "SELECT lakehouse.start_stream('wiki')");
ok(lh_wait_caught_up($node, 'wiki', $topic), 'start_stream after a stop mid-backlog catches up');
lh_check_exactly_once($node, 'wiki', $topic, 'stop and start mid-backlog');

# --- lakehouse.commit_to_kafka: lag tools see the committed offsets in the consumer group.
$node->append_conf('postgresql.conf', "lakehouse.commit_to_kafka = on\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('lakehouse.commit_to_kafka') = 'on'");
lh_publish($brokers, $topic, [ map { [ $_ % $partitions, undef, lh_event('ingest-group', $seq++) ] } 1 .. 300 ]);
ok(lh_wait_caught_up($node, 'wiki', $topic), 'caught up with commit_to_kafka on');
my %pg_next = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
	"SELECT kafka_partition, next_offset FROM lakehouse.offsets WHERE stream = 'wiki'");
my %group;
for (1 .. 20)
{
	my $described = lh_kafka('tool', lh_kafka_dir(), 'org.apache.kafka.tools.consumer.group.ConsumerGroupCommand',
		'--bootstrap-server', $brokers, '--describe', '--group', 'lakehouse.postgres.wiki');
	%group = map { (split ' ')[ 2, 3 ] } grep { /^lakehouse\.postgres\.wiki\s+\Q$topic\E\s/ } split /\n/, $described;
	last if join(',', map { "$_=" . ($group{$_} // '') } sort keys %pg_next) eq join(',', map { "$_=$pg_next{$_}" } sort keys %pg_next);
	sleep 1;
}
is_deeply(\%group, \%pg_next, 'the consumer group shows the offsets committed in Postgres');

# --- SIGHUP: a running worker takes new batch bounds without a restart.
my $worker_before = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'wiki'");
my $last_batch = $node->safe_psql('postgres', "SELECT max(batch_id) FROM lakehouse.stream_progress WHERE stream = 'wiki'");
$node->append_conf('postgresql.conf', "lakehouse.max_batch_messages = 37\n");
$node->reload;
$node->poll_query_until('postgres', "SELECT current_setting('lakehouse.max_batch_messages') = '37'");
sleep 2;    # the worker applies the reload at its next wake-up (at most 1 s when idle)
lh_publish($brokers, $topic, [ map { [ $_ % $partitions, undef, lh_event('ingest-hup', $seq++) ] } 1 .. 400 ]);
ok(lh_wait_caught_up($node, 'wiki', $topic), 'caught up after the reload');
is($node->safe_psql('postgres', "SELECT max(messages) <= 37 AND count(*) >= 11 FROM lakehouse.stream_progress WHERE stream = 'wiki' AND batch_id > $last_batch"),
	't', 'batches after the reload respect the new max_batch_messages');
is($node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'wiki'"), $worker_before,
	'the same worker, without a restart');

# --- Operators: members of lakehouse_admin run the API; other roles cannot.
$node->safe_psql('postgres', 'CREATE ROLE ops LOGIN IN ROLE lakehouse_admin; CREATE ROLE nobody LOGIN');
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('ops_stream', '$topic', start_from => 'latest')",
	extra_params => [ '-U', 'ops' ]);
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_status() WHERE stream = 'ops_stream'",
		extra_params => [ '-U', 'ops' ]),
	$partitions, 'a lakehouse_admin member creates a stream and reads its status');
ok($node->poll_query_until('postgres', "SELECT worker_pid IS NOT NULL FROM lakehouse.streams WHERE name = 'ops_stream'"),
	'the new stream has a worker');
my $ops_pid = $node->safe_psql('postgres', "SELECT worker_pid FROM lakehouse.streams WHERE name = 'ops_stream'");
$node->safe_psql('postgres', "SELECT lakehouse.drop_stream('ops_stream', drop_data => true)", extra_params => [ '-U', 'ops' ]);
is($node->safe_psql('postgres', q{
	SELECT (SELECT count(*) FROM lakehouse.streams WHERE name = 'ops_stream') || ','
	    || (SELECT count(*) FROM lakehouse.offsets WHERE stream = 'ops_stream') || ','
	    || (to_regclass('bronze.ops_stream') IS NULL)}),
	'0,0,true', 'a lakehouse_admin member drops a stream: its row, its offsets and its bronze table are gone');
$gone = lh_wait_gone($ops_pid);
ok($gone, "the dropped stream's worker ($ops_pid) ended");
($rc, $out, $err) = $node->psql('postgres', "SELECT lakehouse.create_stream('x', '$topic')", extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied for function create_stream/, 'other roles cannot create streams');
($rc, $out, $err) = $node->psql('postgres', 'SELECT * FROM lakehouse.offsets', extra_params => [ '-U', 'nobody' ]);
like($err, qr/permission denied for table offsets/, 'other roles cannot read the checkpoint');

# --- An error that is not the data's fault (bronze table gone): the batch is not
# committed, stream_status shows why, the worker retries from its last commit with a
# backoff, and once the table is back the messages land, once. The backoff is the
# launcher's: a worker that fails within 10 s of its start is started again after 2 s,
# then 4 s, 8 s ... up to 60 s (the first failure, of a worker that ran long, is retried
# at once).
my $latest_rows = $node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki_latest');
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER TABLE bronze.wiki_latest RENAME TO wiki_latest_away');
my @away = map { [ $_ % $partitions, undef, lh_event('ingest-away', $seq++) ] } 1 .. 60;
lh_publish($brokers, $topic, \@away);
ok($node->poll_query_until('postgres',
		"SELECT bool_and(last_error LIKE '%wiki_latest%does not exist%') FROM lakehouse.stream_status() WHERE stream = 'wiki_latest'"),
	'a missing bronze table shows in stream_status as the error');
# The attempts, counted in the server log (each ends in an ERROR naming the table) over a
# window after the first: the sleep is the measurement, not a synchronisation.
my $window = 10;
sleep $window + 1;
my @attempts;
for my $line (split /\n/, slurp_file($node->logfile, $log_offset))
{
	next unless $line =~ /^(\d+)-(\d+)-(\d+) (\d+):(\d+):(\d+(?:\.\d+)?) \S+ \[\d+\] .*ERROR:.*wiki_latest.*does not exist/;
	push @attempts, timegm(0, $5, $4, $3, $2 - 1, $1) + $6;
}
@attempts = grep { $_ <= $attempts[0] + $window } @attempts if @attempts;
my @gaps = map { sprintf('%.1f', $attempts[$_] - $attempts[ $_ - 1 ]) } 1 .. $#attempts;
my $shown = join(' ', @gaps[ 0 .. ($#gaps < 7 ? $#gaps : 7) ]) . (@gaps > 8 ? ' ...' : '');
# With the schedule above: at 0, at once, 2 s and 4 s later (about 4 in 10 s). A worker
# started again at once spins (dozens), one every launcher wake-up (1 s) makes 10 or more.
cmp_ok(scalar(@attempts), '>=', 3, "the worker retries: " . scalar(@attempts) . " attempts in $window s (gaps in s: $shown)");
cmp_ok(scalar(@attempts), '<=', 5, "and backs off instead of spinning: at most 5 attempts in $window s");
cmp_ok($gaps[-1] // 0, '>=', 3, 'the wait between attempts grew to at least 3 s');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki_latest_away'), $latest_rows,
	'meanwhile nothing was written anywhere');
like($node->safe_psql('postgres', q{SELECT DISTINCT last_error FROM lakehouse.stream_status() WHERE stream = 'wiki_latest'}),
	qr/wiki_latest.*does not exist/, 'stream_status still shows the error after the retries');
ok($node->poll_query_until('postgres', q{SELECT bool_and(state = 'error') FROM lakehouse.stream_status() WHERE stream = 'wiki_latest'}),
	'and the state error while the worker waits to retry (not starting)');
$node->safe_psql('postgres', 'ALTER TABLE bronze.wiki_latest_away RENAME TO wiki_latest');
ok(lh_wait_caught_up($node, 'wiki_latest', $topic), 'with the table back the stream catches up');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.wiki_latest'), $latest_rows + 60,
	'exactly the 60 messages published during the outage were added');
is($node->safe_psql('postgres', q{
	SELECT count(*) || ',' || count(DISTINCT payload->>'seq') || ',' || count(DISTINCT (kafka_partition, kafka_offset))
	  FROM bronze.wiki_latest WHERE payload->>'tag' = 'ingest-away'}),
	join(',', (scalar(@away)) x 3), 'each of them once, at its own offset');
my $away_high = lh_broker_high_watermarks($brokers, $topic, $partitions);
is($node->safe_psql('postgres',
		"SELECT string_agg(kafka_partition || ':' || next_offset, ' ' ORDER BY kafka_partition) FROM lakehouse.offsets WHERE stream = 'wiki_latest'"),
	join(' ', map { "$_:$away_high->{$_}" } 0 .. $partitions - 1),
	'the checkpoint equals the broker\'s high watermark (kcat)');

# --- pg_dump keeps the registry and the checkpoint (pg_extension_config_dump).
my ($dump_ok, $dump_out, $dump_err) = ('', '', '');
$dump_ok = IPC::Run::run([ 'pg_dump', '-d', $node->connstr('postgres') ],
	'>', \$dump_out, '2>', \$dump_err);
ok($dump_ok, 'pg_dump runs') or diag($dump_err);
like($dump_out, qr/COPY lakehouse\.streams .*\n(?:.*\n)*?wiki_latest\t/, 'pg_dump includes the rows of lakehouse.streams');
like($dump_out, qr/COPY lakehouse\.offsets /, 'and of lakehouse.offsets');

# --- drop_stream keeps the data unless asked.
$node->safe_psql('postgres', "SELECT lakehouse.drop_stream('wiki_latest')");
is($node->safe_psql('postgres', "SELECT to_regclass('bronze.wiki_latest') IS NOT NULL"), 't',
	'drop_stream keeps bronze by default');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.streams WHERE name = 'wiki_latest'"), '0',
	'drop_stream unregisters the stream');
$node->safe_psql('postgres', 'DROP TABLE bronze.wiki_latest');
$node->safe_psql('postgres', "SELECT lakehouse.drop_stream('wiki', drop_data => true)");
is($node->safe_psql('postgres', "SELECT to_regclass('bronze.wiki') IS NULL AND NOT EXISTS (SELECT 1 FROM lakehouse.dead_letters WHERE stream = 'wiki')"),
	't', 'drop_stream(drop_data => true) removes bronze and dead letters');

# --- A stream created again under that name starts from its own history: the old stream's
# stream_progress rows go (they described batches of a bronze table that is gone).
my $old_batches = $node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.stream_progress WHERE stream = 'wiki'");
cmp_ok($old_batches, '>', 0, "the dropped stream left $old_batches stream_progress rows");
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('wiki', '$topic')");
ok(lh_wait_caught_up($node, 'wiki', $topic), 'the new stream of that name caught up');
my ($first_batch, $before_created) = split /\|/, $node->safe_psql('postgres', q{
	SELECT min(batch_id),
	       count(*) FILTER (WHERE started_at < (SELECT max(logged_at) FROM lakehouse.stream_log WHERE stream = 'wiki' AND event = 'created'))
	  FROM lakehouse.stream_progress WHERE stream = 'wiki'});
is($first_batch, '1', 'its batches are numbered from 1');
is($before_created, '0', 'and stream_progress holds none of the old stream\'s batches');
lh_check_exactly_once($node, 'wiki', $topic, 'created again');

done_testing();
