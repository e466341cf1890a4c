# lakehouse-producer end to end, on the scratch Kafka: a generated recording replayed as a
# scenario (loops, a resent loop, violations, late events, a canary and a non-JSON line)
# lands exactly as the scenario says, violations in the DLQ with their reason header;
# acknowledgements lost on the way back from the broker (test/producer/lost_acks.so) make
# librdkafka send stored batches again, and the idempotent producer adds no copy. In
# live mode against a local EventStreams stand-in (429 once, a connection dropped
# mid-frame) every event arrives exactly once, resumes use Last-Event-ID, the state file
# survives a stop by --limit and by SIGTERM; a scripted stand-in then makes the producer
# reconnect after a read timeout, a 429 with Retry-After, a torn frame and three 5xx, each
# time with the last id received and after at least the wait the README promises (and
# growing); a 4xx ends the run at once, and a dead broker ends it clearly.
# Crashes: kill -9 mid-stream and a restart on the same state file lose nothing and resend
# no more than the unacknowledged window; on a broker of the test's own, Kafka down at the
# start (a clear message, no busy loop) and killed -9 mid-stream lose nothing either.
use strict;
use warnings;

use IPC::Run ();
use JSON::PP ();
use POSIX ();
use Time::HiRes ();
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $top = lh_top();
my $producer = "$top/src/producer/lakehouse-producer";
my $server_script = "$top/test/producer/sse_server.py";
my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();
my $tmp = $PostgreSQL::Test::Utils::tmp_check;
my $json = JSON::PP->new->utf8;

# Runs the producer; returns (exit code, stdout, stderr).
sub run_producer
{
	my (@args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $producer, @args ], '>', \$out, '2>', \$err, IPC::Run::timeout(180));
	return ($? >> 8, $out, $err);
}

sub summary
{
	my ($out) = @_;
	my ($line) = grep { /^events=/ } split /\n/, $out;
	return { map { split /=/ } split / /, ($line // '') };
}

# Every message of a topic as [key, value, headers], read with kcat to the end.
sub consume
{
	my ($topic, $from) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'kcat', '-C', '-b', $from // $brokers, '-t', $topic, '-o', 'beginning', '-e', '-q',
			'-f', '%k\t%h\t%s\n'
		],
		'>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "kcat could not read $topic: $err";
	return [ map { [ split /\t/, $_, 3 ] } split /\n/, $out ];
}

sub meta_id
{
	my ($value) = @_;
	my $ev = eval { $json->decode($value) };
	return $ev ? $ev->{meta}{id} : undef;
}

sub slurp
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	my $s = <$fh>;
	close $fh;
	return $s;
}

# --- Usage.
my ($rc, $out, $err) = run_producer('--help');
is($rc, 0, '--help exits 0');
for my $opt (qw(--brokers --topic --dlq-topic --url --file --state --limit --rate --quiet --help
	--loops --resend-loop --violations --late --late-minutes --restamp --record --user-agent
	--message-timeout-ms --generate --out --threads --json-reader))
{
	like($out, qr/\Q$opt\E\b/, "--help lists $opt");
}
($rc, $out, $err) = run_producer('--no-such-flag');
is($rc, 2, 'an unknown flag exits 2');
like($err, qr/unknown option "--no-such-flag"/, 'and names the flag');
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', 'x', '--file', '/dev/null', '--limit', 'ten');
is($rc, 2, 'a bad number exits 2');
like($err, qr/invalid value "ten" for --limit/, 'and says which option');

# --- Replay scenario.
my $events = 250 + int(rand(100));
my $recording = "$tmp/recording.jsonl";
($rc, $out, $err) = run_producer('--generate', $events, '--out', $recording, '--seed', int(rand(1000)));
is($rc, 0, "--generate writes $events events") or diag($err);
# A canary (dropped) and a line that is not JSON (a dead letter) ride along in every loop.
my @lines = split /\n/, slurp($recording);
is(scalar(@lines), $events, 'the recording has one line per event');
my $canary = $json->decode($lines[0]);
$canary->{meta}{domain} = 'canary';
open my $fh, '>>', $recording or die $!;
print $fh $json->encode($canary), "\n", "<html>502 Bad Gateway</html>\n";
close $fh;

my ($loops, $resend, $violations, $late) = (2 + int(rand(3)), 1, 3 + int(rand(8)), 2 + int(rand(5)));
my $topic = lh_unique_name('producer');
lh_create_topic($kafka_dir, $topic, 3);
lh_create_topic($kafka_dir, "$topic.dlq", 1);
($rc, $out, $err) = run_producer(
	'--brokers', $brokers, '--topic', $topic, '--file', $recording, '--loops', $loops,
	'--resend-loop', $resend, '--violations', $violations, '--late', $late,
	'--late-minutes', 30, '--quiet');
is($rc, 0, "replay of $loops loops, loop $resend resent, $violations violations, $late late events exits 0")
  or diag($err);

my $sends = $loops + 1;    # the resent loop goes out twice
my %expect = (
	sent => $sends * $events + $late,
	dlq => $sends * 1 + $violations,
	canary => $sends,
	failed => 0,
	events => $sends * ($events + 2) + $violations + $late);
my $sum = summary($out);
is($sum->{$_}, $expect{$_}, "summary: $_=$expect{$_}") for sort keys %expect;

my $msgs = consume($topic);
is(scalar(@$msgs), $expect{sent}, "the topic holds exactly $expect{sent} messages");
my %ids;
$ids{ meta_id($_->[2]) // 'none' }++ for @$msgs;
is(scalar(keys %ids), $loops * $events + $late,
	'distinct meta.ids == loops x events + late: ids unique per loop, the resent loop repeats its ids');
is(scalar(grep { $_ == 2 } values %ids), $events, 'exactly one loop appears twice');
my $keyed = grep { my $ev = $json->decode($_->[2]); defined $ev->{wiki} && $_->[0] eq $ev->{wiki} } @$msgs;
is($keyed, scalar(@$msgs), 'every message is keyed by its wiki');
my $late_seen = grep { substr(meta_id($_->[2]), 24, 4) eq 'fffe' } @$msgs;
is($late_seen, $late, 'the late events are there with their reserved ids');

my $dead = consume("$topic.dlq");
is(scalar(@$dead), $expect{dlq}, "the DLQ holds exactly $expect{dlq} messages");
my %reasons;
for my $m (@$dead)
{
	my ($reason) = $m->[1] =~ /lakehouse\.reason=([^,\t]+)/;
	$reasons{ $reason // 'no header' }++;
}
my @kinds = ('not_json', 'missing_field:meta.id', 'bad_type:namespace', 'bad_time:meta.dt', 'bad_enum:type');
my %want_reasons = (not_json => $sends);
$want_reasons{ $kinds[ $_ % 5 ] }++ for 0 .. $violations - 1;
is_deeply(\%reasons, \%want_reasons, 'every dead letter carries lakehouse.reason, as the scenario predicts');

# --- Validation threads change nothing: the same scenario validated in the main thread
# (--threads 0) and in several threads leaves every partition, and the DLQ, with the same
# messages in the same order (Kafka keeps order per partition; a wiki's events must too).
sub by_partition
{
	my ($t) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'kcat', '-C', '-b', $brokers, '-t', $t, '-o', 'beginning', '-e', '-q', '-f', '%p\t%k\t%h\t%s\n' ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(60))
	  or die "kcat could not read $t: $err";
	my %parts;
	for my $line (split /\n/, $out)
	{
		my ($p, $rest) = split /\t/, $line, 2;
		push @{ $parts{$p} }, $rest;
	}
	return \%parts;
}
# The JSON reader changes nothing either: jansson for every event (the reference), and the
# fast reader in one thread and in three. The recording gets two more valid events the
# fast reader leaves to jansson (a real number, a 19-digit integer), so both paths run.
my $mixed = "$tmp/mixed.jsonl";
{
	my $extra = $json->decode($lines[1]);
	$extra->{x_ratio} = 0.5;
	my $big = $json->decode($lines[2]);
	$big->{x_big} = 1234567890123456789;
	open my $mfh, '>', $mixed or die $!;
	print $mfh slurp($recording), $json->encode($extra), "\n", $json->encode($big), "\n";
	close $mfh;
}
my %threaded;
my %runs = (
	jansson0 => [ '--threads', 0, '--json-reader', 'jansson' ],
	fast0 => [ '--threads', 0 ],
	fast3 => [ '--threads', 3 ]);
for my $run (sort keys %runs)
{
	my $t = lh_unique_name($run);
	lh_create_topic($kafka_dir, $t, 3);
	lh_create_topic($kafka_dir, "$t.dlq", 1);
	($rc, $out, $err) = run_producer(
		'--brokers', $brokers, '--topic', $t, '--file', $mixed, '--loops', 2,
		'--violations', $violations, '--late', $late, @{ $runs{$run} }, '--quiet');
	is($rc, 0, "the scenario with @{ $runs{$run} } exits 0") or diag($err);
	$threaded{$run} = { summary => summary($out), topic => by_partition($t), dlq => by_partition("$t.dlq") };
}
my $in_topic = 0;
$in_topic += scalar(@$_) for values %{ $threaded{jansson0}{topic} };
is($in_topic, $threaded{jansson0}{summary}{sent}, "the reference run's topic holds its $in_topic sent events");
is($threaded{jansson0}{summary}{sent}, 2 * ($events + 2) + $late,
	'the two events with a real number and a 19-digit integer are sent in each loop');
for my $run ('fast0', 'fast3')
{
	is_deeply($threaded{$run}{summary}, $threaded{jansson0}{summary}, "$run: the same summary as with jansson alone");
	is_deeply($threaded{$run}{topic}, $threaded{jansson0}{topic},
		"$run: every partition holds the same messages in the same order");
	is_deeply($threaded{$run}{dlq}, $threaded{jansson0}{dlq}, "$run: and so does the DLQ, headers included");
}
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', 'x', '--file', $recording, '--json-reader', 'simd');
is($rc, 2, 'an unknown --json-reader exits 2');
like($err, qr/invalid value "simd" for --json-reader: expected fast or jansson/, 'and says so');
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', 'x', '--file', $recording, '--threads', 65);
is($rc, 2, 'too many --threads exits 2');
like($err, qr/invalid value "65" for --threads/, 'and says so');

# --- librdkafka's own retries add no copies. The README's reason is the idempotent
# producer (enable.idempotence=true, acks=all): the broker recognises a resent batch by its
# producer id and sequence numbers. A copy can only appear when the broker stored a batch
# and the client never heard so; test/producer/lost_acks.so, loaded by the unchanged
# producer through --kafka-config plugin.library.paths, makes exactly that happen: it
# proxies the broker connections, swallows the acknowledgement of every second
# ProduceRequest (three times) and closes the connection, and librdkafka sends the
# batch again. (librdkafka's mock cluster cannot stand in for the broker here: it checks
# sequence numbers only for transactional producers and stores every resent batch.)
# Publishes 2,000 to 3,000 events through the plugin with the extra librdkafka settings
# $extra; returns whether the fault landed, the exit code, the summary, the count sent
# and the broker's message count and ids.
sub publish_losing_acks
{
	my ($plugin, $lost, $tag, $extra) = @_;
	my $la_file = "$tmp/lost_acks_$tag.jsonl";
	my @la_ids = generate_ids(2000 + int(rand(1000)), $la_file);
	my $la_topic = lh_unique_name("producer_lost_acks_$tag");
	lh_create_topic($kafka_dir, $la_topic, 3);
	lh_create_topic($kafka_dir, "$la_topic.dlq", 1);
	my $la_log = "$tmp/lost_acks_$tag.log";
	unlink $la_log;
	my ($la_rc, $la_out, $la_err);
	{
		local $ENV{LAKEHOUSE_LOST_ACKS} = $lost;
		local $ENV{LAKEHOUSE_LOST_ACKS_LOG} = $la_log;
		# --rate spreads the events over a few seconds, so the lost acknowledgements
		# fall among many ProduceRequests, not on the first batch and its retries only.
		($la_rc, $la_out, $la_err) = run_producer(
			'--brokers', $brokers, '--topic', $la_topic, '--file', $la_file, '--rate', 1000,
			'--kafka-config', join(',', "plugin.library.paths=$plugin", @$extra), '--quiet');
	}
	# The fault must have landed on batches the broker had stored (no error, a base
	# offset): otherwise nothing was resent and the counts prove nothing.
	my @dropped = -e $la_log ? grep { /^lost ack: / } split /\n/, slurp($la_log) : ();
	my @stored = grep { /error=0 base_offset=\d+$/ } @dropped;
	ok(@dropped == $lost && @stored == $lost,
		"$tag: the fault landed: $lost acknowledgements of batches the broker had stored were lost")
	  or diag('inconclusive: ' . scalar(@dropped) . " lost, " . scalar(@stored)
		  . " of them for stored batches:\n" . join("\n", @dropped));
	note(join("\n", @dropped));
	return ($la_rc, $la_err, summary($la_out), \@la_ids, topic_end($la_topic, 3), count_ids($la_topic));
}

{
	my $plugin = "$top/test/producer/lost_acks.so";
	if (ok(-r $plugin, 'the lost-acknowledgement plugin is built (make -C test/producer all)'))
	{
		my $lost = 3;
		my ($la_rc, $la_err, $la_sum, $la_ids, $la_end, $la_seen) = publish_losing_acks($plugin, $lost, 'idempotent', []);
		is($la_rc, 0, 'the producer rides out the lost acknowledgements and exits 0') or diag($la_err);
		my $la_n = scalar(@$la_ids);
		is("$la_sum->{sent}/$la_sum->{failed}", "$la_n/0", "summary: sent=$la_n failed=0");
		is($la_end, $la_n, "the broker holds exactly $la_n messages: the resent batches added none");
		is(scalar(grep { ($la_seen->{$_} // 0) == 1 } @$la_ids), $la_n, "each of the $la_n events is there exactly once")
		  or diag('events twice: ' . scalar(grep { ($la_seen->{$_} // 0) > 1 } @$la_ids)
			  . ', missing: ' . scalar(grep { !$la_seen->{$_} } @$la_ids));

		# The control: the same fault with idempotence off stores the resent batches again,
		# so the counts above are the producer's doing, not the plugin's.
		my ($c_rc, $c_err, $c_sum, $c_ids, $c_end) =
		  publish_losing_acks($plugin, $lost, 'control', [ 'enable.idempotence=false' ]);
		cmp_ok($c_end, '>', scalar(@$c_ids),
			"control: with enable.idempotence=false the same fault leaves copies ($c_end messages for " . scalar(@$c_ids) . ' events)');
	}
}

# --- Live mode against the local stand-in.
my $live_events = 100 + int(rand(50));
my $live_file = "$tmp/live.jsonl";
run_producer('--generate', $live_events, '--out', $live_file, '--seed', 7) == 0 or die 'generate failed';
my $drop_after = 20 + int(rand(30));
my $server_log = "$tmp/sse_server.log";
my ($server, $url) = start_stand_in($live_file, $server_log, '--fail-429', '--drop-after', $drop_after);

my $live_topic = lh_unique_name('producer_live');
lh_create_topic($kafka_dir, $live_topic, 3);
lh_create_topic($kafka_dir, "$live_topic.dlq", 1);
my $state = "$tmp/producer.state";
my $first = $drop_after + 10 + int(rand(20));
($rc, $out, $err) = run_producer(
	'--brokers', $brokers, '--topic', $live_topic, '--url', $url, '--state', $state,
	'--limit', $first, '--backoff-min-ms', 100, '--record', "$tmp/live.sse");
is($rc, 0, "live run 1 stops after --limit $first") or diag($err);
$sum = summary($out);
is($sum->{sent}, $first, "run 1 published $first events");
is($sum->{reconnects}, 2, 'run 1 reconnected twice (after the 429 and after the drop)');
like($err, qr/HTTP 429/, 'the 429 is reported');
like(slurp($state), qr/"offset":@{[ $first - 1 ]}\}/, 'the state file holds the id of the last acknowledged event');

my @requests = map { $json->decode($_) } split /\n/, slurp($server_log);
is($requests[0]{status}, 429, 'first request: 429');
ok(!defined $requests[1]{last_event_id}, 'second request starts from the beginning');
like($requests[2]{last_event_id} // '', qr/"offset":@{[ $drop_after - 1 ]}\}/,
	'after the drop, Last-Event-ID names the last complete event, not the torn one');
like($requests[0]{user_agent}, qr{^lakehouse-producer/\S+ \(.*@.*\)}, 'a descriptive User-Agent with contact');
is($requests[0]{accept}, 'text/event-stream', 'Accept: text/event-stream');

# Run 2 resumes from the state file and is stopped by SIGTERM once everything is in.
my ($out2, $err2) = ('', '');
my $run2 = IPC::Run::start(
	[
		$producer, '--brokers', $brokers, '--topic', $live_topic, '--url', $url, '--state', $state,
		'--backoff-min-ms', 100
	],
	'>', \$out2, '2>', \$err2, IPC::Run::timeout(120));
my %live_ids;
for (1 .. 300)
{
	%live_ids = ();
	$live_ids{ meta_id($_->[2]) }++ for @{ consume($live_topic) };
	last if keys(%live_ids) >= $live_events;
	select(undef, undef, undef, 0.2);
}
$run2->signal('TERM');
$run2->finish;
is($? >> 8, 0, 'run 2 exits 0 after SIGTERM') or diag($err2);
is(scalar(keys %live_ids), $live_events, "every one of the $live_events events arrived at least once");
$sum = summary($out2);
is($sum->{sent}, $live_events - $first, 'run 2 published exactly the rest: the resume skipped and repeated nothing');
like(slurp($state), qr/"offset":@{[ $live_events - 1 ]}\}/, 'after SIGTERM the state file holds the last event');
@requests = map { $json->decode($_) } split /\n/, slurp($server_log);
like($requests[-1]{last_event_id} // '', qr/"offset":@{[ $first - 1 ]}\}/, 'run 2 resumed with Last-Event-ID from the state file');
$server->kill_kill;
# At least once above; exactly once here: the reconnects after the 429 and the torn frame,
# and the resume from the state file, neither repeated nor skipped an event.
my @live_ids_in_order = map { meta_id($_) } split /\n/, slurp($live_file);
my $live_final = count_ids($live_topic);
is(topic_end($live_topic, 3), $live_events, "the live topic holds exactly $live_events messages");
is(scalar(grep { ($live_final->{$_} // 0) == 1 } @live_ids_in_order), $live_events,
	'each event exactly once across the 429, the torn frame and the resume');

# The recording of run 1 is an SSE file: replaying it detects the format.
my $rec_topic = lh_unique_name('producer_rec');
lh_create_topic($kafka_dir, $rec_topic, 1);
lh_create_topic($kafka_dir, "$rec_topic.dlq", 1);
my $frames = () = slurp("$tmp/live.sse") =~ /^data: /mg;
is($frames, $first, "--record wrote the $first frames received");
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', $rec_topic, '--file', "$tmp/live.sse", '--quiet');
is(summary($out)->{sent}, $first, 'a recorded SSE file replays frame by frame');

# --- Live mode: every reconnect the README names, one connection after another. The
# stand-in follows a script: a stall that only the read timeout can end, HTTP 429 with
# Retry-After, a connection dropped mid-frame, three 5xx in a row, then the rest. For each
# the stand-in's log must show the producer back with Last-Event-ID equal to the id of the
# last complete event it was sent, after at least the wait the README promises, measured
# on the stand-in's clock between its requests (lower bounds only: this machine is shared
# and at times slow, so nothing here says how fast); the topic must hold every event once.

# Starts the stand-in; returns the harness and the stream URL.
sub start_stand_in
{
	my ($file, $log, @opts) = @_;
	my $sout = '';
	unlink $log;
	my $h = IPC::Run::start([ 'python3', $server_script, '--file', $file, '--log', $log, @opts ],
		'>', \$sout, '2>', "$log.err", IPC::Run::timeout(300));
	$h->pump until $sout =~ /^(\d+)\n/;
	return ($h, "http://127.0.0.1:$1/v2/stream/recentchange");
}

# The stand-in's log: the requests in order, and the end of each scripted connection by
# request number.
sub stand_in_log
{
	my ($log) = @_;
	my @rows = map { $json->decode($_) } split /\n/, slurp($log);
	my @req = sort { $a->{n} <=> $b->{n} } grep { !exists $_->{end} } @rows;
	my %end = map { $_->{n} => $_ } grep { exists $_->{end} } @rows;
	return (\@req, \%end);
}

# Runs the producer for at most $secs; a producer that never reconnects is a failure
# here, not a test script that dies and takes the rest of the file with it.
sub run_producer_bounded
{
	my ($secs, @args) = @_;
	my ($pout, $perr) = ('', '');
	my $h = IPC::Run::start([ $producer, @args ], '>', \$pout, '2>', \$perr, IPC::Run::timeout($secs));
	my $finished = eval { $h->finish; 1 };
	if (!$finished)
	{
		$h->kill_kill;
		return (-1, $pout, $perr . "\n(killed after $secs s)");
	}
	return ($? >> 8, $pout, $perr);
}

{
	my $rc_file = "$tmp/reconnect.jsonl";
	my @rc_ids = generate_ids(60 + int(rand(40)), $rc_file);
	my $rc_n = scalar(@rc_ids);
	my ($k_stall, $k_drop) = (5 + int(rand(10)), 5 + int(rand(10)));
	my ($read_timeout, $retry_after, $backoff_min_ms) = (2, 2, 300);
	my $rc_log = "$tmp/sse_reconnect.log";
	my ($rc_server, $rc_url) = start_stand_in($rc_file, $rc_log, '--script',
		"stall:$k_stall,429:$retry_after,drop:$k_drop,503,500,502,ok");
	my $rc_topic = lh_unique_name('producer_reconnect');
	lh_create_topic($kafka_dir, $rc_topic, 3);
	lh_create_topic($kafka_dir, "$rc_topic.dlq", 1);
	my ($prc, $pout, $perr) = run_producer_bounded(
		120, '--brokers', $brokers, '--topic', $rc_topic, '--url', $rc_url, '--limit', $rc_n,
		'--read-timeout', $read_timeout, '--backoff-min-ms', $backoff_min_ms);
	$rc_server->kill_kill;
	is($prc, 0, "the producer reconnects through the script and stops at --limit $rc_n") or diag($perr);
	my $psum = summary($pout);
	is("$psum->{sent}/$psum->{reconnects}", "$rc_n/6", "summary: sent=$rc_n reconnects=6");
	my ($req, $end) = stand_in_log($rc_log);
	is_deeply([ map { "$_->{action}:$_->{status}" } @$req ],
		[ 'stall:200', '429:429', 'drop:200', '503:503', '500:500', '502:502', 'ok:200' ],
		'the stand-in saw seven requests: a new connection after each of the six failures');
	# Guards: the faults happened after events, so there was an id to resume from.
	is($end->{1}{sent} // -1, $k_stall, "the stall came after $k_stall events");
	is($end->{3}{sent} // -1, $k_drop, "the torn frame came after $k_drop more events");
	my $after_stall = $end->{1}{last_id} // 'none';
	my $after_drop = $end->{3}{last_id} // 'none';

	# (b) The read timeout.
	is($req->[1]{last_event_id}, $after_stall, 'read timeout: Last-Event-ID is the id of the last event received');
	my $silence = $req->[1]{t} - ($end->{1}{t} // 0);
	ok($silence >= $read_timeout,
		sprintf('read timeout: the producer reconnected after %.1f s of silence, at least --read-timeout %d s',
			$silence, $read_timeout));
	# (c) HTTP 429 with Retry-After. The backoff at this point is at most twice
	# --backoff-min-ms (0.6 s), well below Retry-After: only Retry-After explains the wait.
	is($req->[2]{last_event_id}, $after_stall, '429: Last-Event-ID still names the last event received');
	my $waited = $req->[2]{t} - $req->[1]{t};
	ok($waited >= $retry_after,
		sprintf('429: the next request came %.2f s later, at least Retry-After: %d', $waited, $retry_after));
	# (a) The disconnect mid-frame: the torn frame's id line must not count.
	is($req->[3]{last_event_id}, $after_drop, 'disconnect: Last-Event-ID is the last complete event, not the torn one');
	# (d) 5xx: the same id each time, and a wait that doubles per failure (--help: "first
	# reconnect delay, doubled per failure"). The k-th failure in a row waits at least
	# --backoff-min-ms x 2^(k-1); a backoff that does not grow stays near the minimum.
	my @gaps;
	for my $i (3 .. 5)
	{
		my $status = $req->[$i]{status};
		is($req->[$i + 1]{last_event_id}, $after_drop, "HTTP $status: Last-Event-ID still names the last event received");
		push @gaps, $req->[$i + 1]{t} - $req->[$i]{t};
	}
	for my $k (1 .. 3)
	{
		my $floor = $backoff_min_ms * 2**($k - 1) / 1000;
		ok($gaps[ $k - 1 ] >= $floor,
			sprintf('5xx: failure %d in a row was followed by a wait of %.2f s, at least %.1f s', $k, $gaps[ $k - 1 ], $floor));
	}
	# The floors above also pass for a backoff stuck at a larger constant; this does not.
	# Each wait should be twice the one before (0.6, 1.2, 2.4 s): the third must be longer
	# than the first by at least --backoff-min-ms, which one late wake-up on the first wait
	# (the producer polls Kafka in 0.1 s steps while it waits) does not undo.
	ok($gaps[2] - $gaps[0] >= $backoff_min_ms / 1000,
		sprintf('5xx: the waits grow (%.2f s, %.2f s, %.2f s)', @gaps));
	# No event lost or repeated across any of the six reconnects.
	is(topic_end($rc_topic, 3), $rc_n, "the topic holds exactly $rc_n messages");
	my $rc_seen = count_ids($rc_topic);
	is(scalar(grep { ($rc_seen->{$_} // 0) == 1 } @rc_ids), $rc_n, "each of the $rc_n events is there exactly once")
	  or diag('events twice: ' . scalar(grep { ($rc_seen->{$_} // 0) > 1 } @rc_ids)
		  . ', missing: ' . scalar(grep { !$rc_seen->{$_} } @rc_ids));
}

# --- Permanent errors: another 4xx ends the run at once, with no retry.
my $perm_log = "$tmp/sse_server404.log";
($server, my $perm_url) = start_stand_in($live_file, $perm_log, '--status', 404);
$perm_url =~ s{/recentchange$}{/nosuch};
($rc, $out, $err) = run_producer_bounded(60, '--brokers', $brokers, '--topic', $live_topic,
	'--url', $perm_url, '--backoff-min-ms', 100);
is($rc, 1, 'HTTP 404 ends the run with exit 1');
like($err, qr/answered HTTP 404, which retrying cannot fix/, 'with a clear message');
my ($perm_req) = stand_in_log($perm_log);
is(scalar(@$perm_req), 1, 'and without a second request');
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', $live_topic,
	'--url', $perm_url, '--user-agent', 'curl/8.0');
like($err, qr/HTTP 403.*\n.*User-Agent/, 'a generic User-Agent gets 403 and a hint');
$server->kill_kill;
# A 4xx on a reconnect, after events (400 is what EventStreams answers to a Last-Event-ID
# it cannot use): the run ends there too, the events before it delivered.
{
	my $k = 5 + int(rand(10));
	my $bad_log = "$tmp/sse_server400.log";
	my ($bad_server, $bad_url) = start_stand_in($live_file, $bad_log, '--script', "close:$k,400");
	my $bad_topic = lh_unique_name('producer_400');
	lh_create_topic($kafka_dir, $bad_topic, 3);
	lh_create_topic($kafka_dir, "$bad_topic.dlq", 1);
	my ($brc, $bout, $berr) = run_producer_bounded(60, '--brokers', $brokers, '--topic', $bad_topic,
		'--url', $bad_url, '--backoff-min-ms', 100);
	$bad_server->kill_kill;
	is($brc, 1, 'HTTP 400 on a reconnect ends the run with exit 1');
	like($berr, qr/answered HTTP 400, which retrying cannot fix: \{"status": 400/,
		'with a clear message that quotes the answer');
	my ($breq, $bend) = stand_in_log($bad_log);
	is(scalar(@$breq), 2, 'after the 400 there is no further request');
	is($breq->[1]{last_event_id}, $bend->{1}{last_id} // 'none', 'the reconnect before it sent the last id received');
	is(summary($bout)->{sent}, $k, "the $k events before it are delivered");
}

# --- A broker that is down: a clear message, nothing counted as sent, exit 1, no hang.
my $dead_port = lh_free_port_pair();
my $t0 = time;
($rc, $out, $err) = run_producer('--brokers', "127.0.0.1:$dead_port", '--topic', 'nowhere',
	'--file', $recording, '--limit', 5, '--message-timeout-ms', 3000);
is($rc, 1, 'a dead broker: exit 1');
like($err, qr/cannot reach Kafka at 127\.0\.0\.1:$dead_port/, 'the start names the unreachable broker');
is(summary($out)->{failed}, 5, 'every event is counted as failed, none as sent');
ok(time - $t0 < 60, 'and it gives up after message.timeout.ms, not never');
my $many = 20 + int(rand(30));
($rc, $out, $err) = run_producer('--brokers', "127.0.0.1:$dead_port", '--topic', 'nowhere',
	'--file', $recording, '--limit', $many, '--message-timeout-ms', 2000, '--quiet');
is(summary($out)->{failed}, $many, "a dead broker with $many events: all counted as failed");
my $failure_lines = () = $err =~ /delivery to nowhere failed/g;
is($failure_lines, 5, 'only the first five failures are named, not one line per event');
like($err, qr/more deliveries failed; the summary counts them all/, 'and the rest are announced once');

# --- kill -9 mid-stream, then a restart on the same state file.
# The state file may lag what Kafka holds by at most the events acknowledged since its last
# save; those are resent after a restart. The bound comes from the producer's own settings:
# it saves at most once per STATE_SAVE_INTERVAL_MS, after the acknowledgement, which
# librdkafka sends for a batch after linger.ms.
my ($save_ms) = slurp("$top/src/producer/live.c") =~ /#define\s+STATE_SAVE_INTERVAL_MS\s+(\d+)/
  or die 'STATE_SAVE_INTERVAL_MS not found in src/producer/live.c';
my ($linger_ms) = slurp("$top/src/producer/kafka_out.c") =~ /"linger\.ms",\s*"(\d+)"/
  or die 'linger.ms not found in src/producer/kafka_out.c';

# Runs a command in the background, stdout to a scalar, stderr to a file; returns the
# harness, its pid and a reference to stdout.
sub start_bg
{
	my ($cmd, $errfile) = @_;
	my $out = '';
	my $h = IPC::Run::start($cmd, '>', \$out, '2>', $errfile, IPC::Run::timeout(240));
	return ($h, $h->{KIDS}[0]{PID}, \$out);
}

# Ids of a generated recording, in order (their position is the stand-in's SSE offset).
sub generate_ids
{
	my ($n, $file) = @_;
	my ($grc, undef, $gerr) = run_producer('--generate', $n, '--out', $file, '--seed', 1 + int(rand(100000)));
	die "generate failed: $gerr" if $grc != 0;
	my @ids = map { meta_id($_) } split /\n/, slurp($file);
	my %seen;
	die "generated ids are not unique" if grep { !defined $_ || $seen{$_}++ } @ids;
	return @ids;
}

# Messages in a fresh topic: the sum of its partitions' end offsets (kcat -Q). Cheap
# enough to poll while the topic is written, which consume() with -e is not.
sub topic_end
{
	my ($topic, $partitions, $from) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'kcat', '-Q', '-b', $from // $brokers, map { ('-t', "$topic:$_:-1") } 0 .. $partitions - 1 ],
		'>', \$out, '2>', \$err, IPC::Run::timeout(30))
	  or return 0;    # a broker that is starting up
	my $n = 0;
	$n += $1 while $out =~ /\[\d+\] offset (\d+)/g;
	return $n;
}

sub count_ids
{
	my ($topic, $from) = @_;
	my %n;
	$n{ meta_id($_->[2]) // 'not an event' }++ for @{ consume($topic, $from) };
	return \%n;
}

my $pace = 1000 + int(rand(300));    # events per second the stand-in sends
my $crash_file = "$tmp/crash.jsonl";
my @crash_ids = generate_ids(4000 + int(rand(1000)), $crash_file);
my $crash_events = @crash_ids;
my %offset_of;
@offset_of{@crash_ids} = 0 .. $#crash_ids;

($server, my $crash_url) = start_stand_in($crash_file, "$tmp/sse_crash.log", '--rate', $pace);
my $crash_topic = lh_unique_name('producer_crash');
lh_create_topic($kafka_dir, $crash_topic, 3);
my $crash_state = "$tmp/crash.state";
my @crash_cmd = (
	$producer, '--brokers', $brokers, '--topic', $crash_topic, '--url', $crash_url,
	'--state', $crash_state, '--backoff-min-ms', 100);

# The kill lands after a few state saves, at a random point of the save cycle.
my $kill_at = int($pace * (2 + rand()) * $save_ms / 1000);
die "the recording is too short for a kill after $kill_at events" if $kill_at >= $crash_events;
my ($crash_run, $crash_pid) = start_bg(\@crash_cmd, "$tmp/crash1.err");
for (1 .. 600)
{
	last if topic_end($crash_topic, 3) >= $kill_at;
	Time::HiRes::sleep(0.05);
}
$crash_run->signal('KILL');
$crash_run->finish;
my $kill_status = $?;
my $at_kill = count_ids($crash_topic);
my $held = scalar(keys %$at_kill);
my ($saved_offset) = (-e $crash_state ? slurp($crash_state) : '') =~ /"offset":(\d+)\}\]\n\z/;
unless (($kill_status & 127) == 9 && lh_process_gone($crash_pid) && $held > 0 && $held < $crash_events
	&& defined $saved_offset)
{
	fail("inconclusive: SIGKILL did not land mid-stream (status $kill_status, $held of $crash_events "
		  . 'events in the topic, state file ' . ($saved_offset // 'missing') . ')');
	$server->kill_kill;
	done_testing();
	exit 1;
}
pass("the producer was killed -9 mid-stream: $held of $crash_events events in the topic, "
	  . "the state file at offset $saved_offset");
is(scalar(grep { $at_kill->{ $crash_ids[$_] } } 0 .. $saved_offset), $saved_offset + 1,
	'every event up to the saved id was in Kafka at the kill: the state never runs ahead of the acks');

my ($resume_run, undef, $resume_out) = start_bg(\@crash_cmd, "$tmp/crash2.err");
my $final = {};
for (1 .. 600)
{
	next if topic_end($crash_topic, 3) < $crash_events;    # cheap; only then read the topic
	$final = count_ids($crash_topic);
	last if scalar(grep { $final->{$_} } @crash_ids) >= $crash_events;
}
continue
{
	Time::HiRes::sleep(0.1);
}
$resume_run->signal('TERM');
$resume_run->finish;
is($? >> 8, 0, 'the restarted producer exits 0 after SIGTERM') or diag(slurp("$tmp/crash2.err"));
like(slurp("$tmp/crash2.err"), qr/resuming after the id saved in \Q$crash_state\E/, 'it resumed from the state file');
is(summary($$resume_out)->{sent}, $crash_events - $saved_offset - 1,
	'the restart published exactly the events after the saved id');
my @missing = grep { !$final->{$_} } @crash_ids;
is(scalar(@missing), 0, "every one of the $crash_events event ids is in the topic at least once")
  or diag("missing offsets: @offset_of{@missing[0 .. ($#missing < 9 ? $#missing : 9)]}");
is($final->{'not an event'}, undef, 'the topic holds nothing but the events');
my @resent = grep { $final->{$_} > 1 } @crash_ids;
is(scalar(grep { $final->{$_} > 2 } @crash_ids), 0, 'no event is there more than twice');
is(scalar(grep { $offset_of{$_} <= $saved_offset } @resent), 0, 'nothing at or before the saved id was resent');
my @window = grep { $offset_of{$_} > $saved_offset } keys %$at_kill;
is(scalar(grep { $final->{$_} < 2 } @window), 0,
	'the resent events are exactly those Kafka held past the saved id at the kill');
my $chunk = $pace >= 200 ? int($pace / 100) : 1;    # the stand-in sends chunks of rate/100
my $bound = POSIX::ceil($pace * (2 * $save_ms + $linger_ms) / 1000) + $chunk;
note("resend window after kill -9: " . scalar(@resent) . " event(s) resent (saved offset $saved_offset, "
	  . "$held held at the kill, stream at $pace events/s; bound $bound = events in 2 x $save_ms ms "
	  . "between state saves + $linger_ms ms linger + one $chunk-event chunk)");
ok(@resent <= $bound, 'resent ' . scalar(@resent) . " events, at most the unacknowledged window of $bound");
like(slurp($crash_state), qr/"offset":@{[ $crash_events - 1 ]}\}/, 'the state file ends at the last event');
$server->kill_kill;

# --- Kafka down, on a broker of our own (killing the shared one would disturb the rest).
my $kdir = PostgreSQL::Test::Utils::tempdir('kafka');
my $kport = lh_free_port_pair();
my $own = (split /\n/, lh_kafka('start', $kdir, '--port', $kport))[-1];
my $fault_file = "$tmp/faults.jsonl";
my @fault_ids = generate_ids(1500 + int(rand(500)), $fault_file);
my $fault_events = @fault_ids;
my $mid_topic = lh_unique_name('producer_kafka_kill');
my $down_topic = lh_unique_name('producer_kafka_down');
lh_create_topic($kdir, $mid_topic, 3);
lh_create_topic($kdir, $down_topic, 3);

sub own_kafka_up
{
	my ($o, $e);
	return IPC::Run::run([ "$top/scripts/kafka", 'status', $kdir ], '>', \$o, '2>', \$e);
}

# user + system CPU time of a process, in seconds.
sub cpu_seconds
{
	my ($pid) = @_;
	my $stat = slurp("/proc/$pid/stat");
	my @f = split ' ', substr($stat, rindex($stat, ')') + 2);
	return ($f[11] + $f[12]) / POSIX::sysconf(POSIX::_SC_CLK_TCK());
}

# (b) The broker is killed -9 while the producer publishes at a steady rate, and restarted.
my $rate = 400 + int(rand(200));
my ($mid_run, $mid_pid, $mid_out) = start_bg(
	[
		$producer, '--brokers', $own, '--topic', $mid_topic, '--file', $fault_file,
		'--rate', $rate
	],
	"$tmp/kafka_kill.err");
my $before_kill = 0;
for (1 .. 600)
{
	$before_kill = topic_end($mid_topic, 3, $own);
	last if $before_kill >= $fault_events / 5;
	Time::HiRes::sleep(0.05);
}
lh_kafka('kill', $kdir);
my $mid_alive = !lh_process_gone($mid_pid);
unless ($before_kill > 0 && $before_kill < $fault_events && $mid_alive && !own_kafka_up())
{
	fail("inconclusive: the broker was not killed mid-stream ($before_kill of $fault_events "
		  . 'events in before the kill, producer ' . ($mid_alive ? 'running' : 'gone') . ')');
	$mid_run->kill_kill;
	lh_kafka('remove', $kdir);
	done_testing();
	exit 1;
}
pass("the broker was killed -9 mid-stream: $before_kill of $fault_events events in, the producer still publishing");
Time::HiRes::sleep(1 + rand(2));
lh_kafka('start', $kdir);
$mid_run->finish;
is($? >> 8, 0, 'the producer rides out the broker kill and exits 0') or diag(slurp("$tmp/kafka_kill.err"));
like(slurp("$tmp/kafka_kill.err"), qr/Kafka: .*messages stay queued/, 'it said that the broker went away');
my $sum_mid = summary($$mid_out);
is("$sum_mid->{sent}/$sum_mid->{failed}", "$fault_events/0", "summary: sent=$fault_events failed=0");
my $mid_ids = count_ids($mid_topic, $own);
is(scalar(grep { $mid_ids->{$_} } @fault_ids), $fault_events, "every one of the $fault_events event ids is in the topic");
note('duplicates after the broker kill: ' . scalar(grep { $mid_ids->{$_} > 1 } @fault_ids));

# (a) The broker is down when the producer starts.
lh_kafka('kill', $kdir);
ok(!own_kafka_up(), 'the broker is down before the producer starts');
my ($down_run, $down_pid, $down_out) = start_bg(
	[ $producer, '--brokers', $own, '--topic', $down_topic, '--file', $fault_file ],
	"$tmp/kafka_down.err");
for (1 .. 300)
{
	last if slurp("$tmp/kafka_down.err") =~ /cannot reach Kafka/;
	Time::HiRes::sleep(0.1);
}
like(slurp("$tmp/kafka_down.err"), qr/cannot reach Kafka at \Q$own\E yet .*events are queued and retried/,
	'the producer says it cannot reach the broker, and that it keeps the events queued');
Time::HiRes::sleep(0.5);    # past reading the file
my ($cpu0, $w0) = (cpu_seconds($down_pid), Time::HiRes::time());
Time::HiRes::sleep(3);
my ($cpu1, $w1) = (cpu_seconds($down_pid), Time::HiRes::time());
ok(!lh_process_gone($down_pid), 'it keeps waiting for the broker');
my $busy = ($cpu1 - $cpu0) / ($w1 - $w0);
note(sprintf('CPU while the broker is down: %.2f s in %.1f s', $cpu1 - $cpu0, $w1 - $w0));
ok($busy < 0.1, sprintf('and does not busy-loop meanwhile (%.0f%% of a core)', 100 * $busy));
lh_kafka('start', $kdir);
$down_run->finish;
is($? >> 8, 0, 'once the broker is up, the producer delivers and exits 0') or diag(slurp("$tmp/kafka_down.err"));
my $sum_down = summary($$down_out);
is("$sum_down->{sent}/$sum_down->{failed}", "$fault_events/0", "summary: sent=$fault_events failed=0");
my $down_ids = count_ids($down_topic, $own);
is(scalar(grep { $down_ids->{$_} } @fault_ids), $fault_events, "every one of the $fault_events event ids is in the topic");
lh_kafka('remove', $kdir);

# --- Progress: a status line on a terminal, nothing extra when not on one.
{
	my $ptopic = lh_unique_name('progress');
	lh_create_topic($kafka_dir, $ptopic, 1);
	lh_create_topic($kafka_dir, "$ptopic.dlq", 1);
	my $pfile = "$tmp/progress.jsonl";
	my $pn = 3000 + int(rand(1000));
	run_producer('--generate', $pn, '--out', $pfile) == 0 or die 'generate failed';
	# script(1) gives the producer a pseudo-terminal, as a person's shell would.
	my ($tty_out, $tty_err) = ('', '');
	IPC::Run::run([ 'script', '-qec',
			"$producer --brokers $brokers --topic $ptopic --file $pfile --rate 2000", '/dev/null' ],
		'>', \$tty_out, '2>', \$tty_err, IPC::Run::timeout(120));
	like($tty_out, qr/\r\d+ events, \d+\/s, \d+ acknowledged, \d+ dead-lettered/,
		'on a terminal the producer redraws a progress line');
	like($tty_out, qr/\b$pn events, \d+\/s, $pn acknowledged/, 'the last progress line counts every event');
	my ($prc, $pout, $perr) = run_producer('--brokers', $brokers, '--topic', $ptopic, '--file', $pfile);
	is($prc, 0, 'the same run without a terminal succeeds');
	unlike($perr . $pout, qr/acknowledged, \d+ dead-lettered/, 'without a terminal no progress line is drawn');
}

done_testing();
