# lakehouse-producer end to end, on the scratch Kafka: a generated recording replayed as a
# scenario (loops, a resent loop, violations, late events, a canary and a non-JSON line)
# lands exactly as the scenario says, violations in the DLQ with their reason header; in
# live mode against a local EventStreams stand-in (429 once, a connection dropped
# mid-frame) every event arrives, resumes use Last-Event-ID, the state file survives a
# stop by --limit and by SIGTERM; permanent HTTP errors and a dead broker end clearly.
use strict;
use warnings;

use IPC::Run ();
use JSON::PP ();
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
	my ($topic) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(
		[
			'kcat', '-C', '-b', $brokers, '-t', $topic, '-o', 'beginning', '-e', '-q',
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
	--message-timeout-ms --generate --out))
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

# --- Live mode against the local stand-in.
my $live_events = 100 + int(rand(50));
my $live_file = "$tmp/live.jsonl";
run_producer('--generate', $live_events, '--out', $live_file, '--seed', 7) == 0 or die 'generate failed';
my $drop_after = 20 + int(rand(30));
my $server_log = "$tmp/sse_server.log";
my $server_out = '';
my $server = IPC::Run::start(
	[
		'python3', $server_script, '--file', $live_file, '--fail-429', '--drop-after', $drop_after,
		'--log', $server_log
	],
	'>', \$server_out, '2>', "$tmp/sse_server.err", IPC::Run::timeout(300));
$server->pump until $server_out =~ /^(\d+)\n/;
my $url = "http://127.0.0.1:$1/v2/stream/recentchange";

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

# The recording of run 1 is an SSE file: replaying it detects the format.
my $rec_topic = lh_unique_name('producer_rec');
lh_create_topic($kafka_dir, $rec_topic, 1);
lh_create_topic($kafka_dir, "$rec_topic.dlq", 1);
my $frames = () = slurp("$tmp/live.sse") =~ /^data: /mg;
is($frames, $first, "--record wrote the $first frames received");
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', $rec_topic, '--file', "$tmp/live.sse", '--quiet');
is(summary($out)->{sent}, $first, 'a recorded SSE file replays frame by frame');

# --- Permanent errors.
$server_out = '';
$server = IPC::Run::start([ 'python3', $server_script, '--file', $live_file, '--status', 404 ],
	'>', \$server_out, '2>', "$tmp/sse_server404.err", IPC::Run::timeout(60));
$server->pump until $server_out =~ /^(\d+)\n/;
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', $live_topic,
	'--url', "http://127.0.0.1:$1/v2/stream/nosuch", '--backoff-min-ms', 100);
is($rc, 1, 'HTTP 404 ends the run with exit 1');
like($err, qr/answered HTTP 404, which retrying cannot fix/, 'with a clear message');
($rc, $out, $err) = run_producer('--brokers', $brokers, '--topic', $live_topic,
	'--url', "http://127.0.0.1:$1/v2/stream/nosuch", '--user-agent', 'curl/8.0');
like($err, qr/HTTP 403.*\n.*User-Agent/, 'a generic User-Agent gets 403 and a hint');
$server->kill_kill;

# --- A broker that is down: a clear message, nothing counted as sent, exit 1, no hang.
my $dead_port = lh_free_port_pair();
my $t0 = time;
($rc, $out, $err) = run_producer('--brokers', "127.0.0.1:$dead_port", '--topic', 'nowhere',
	'--file', $recording, '--limit', 5, '--message-timeout-ms', 3000);
is($rc, 1, 'a dead broker: exit 1');
like($err, qr/cannot reach Kafka at 127\.0\.0\.1:$dead_port/, 'the start names the unreachable broker');
is(summary($out)->{failed}, 5, 'every event is counted as failed, none as sent');
ok(time - $t0 < 60, 'and it gives up after message.timeout.ms, not never');

done_testing();
