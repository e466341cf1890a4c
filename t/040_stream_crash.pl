# The crash proof for Kafka to bronze: the stream worker is SIGKILLed at random points
# while a backlog of realistic events (with resends and poison messages) keeps arriving,
# and the whole server is crashed once. Each kill must land mid-backlog (some rows of its
# chunk committed, fewer than the broker held at the kill), or the test says
# "inconclusive" and fails. Afterwards every offset
# the broker holds is in bronze or dead letters exactly once, and the checkpoint equals the
# broker's high watermark.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();    # the kill points below; LAKEHOUSE_TEST_SEED replays a run
# The worker must still be busy with a chunk when it is killed. It keeps pace with a
# publisher (a batch closes as soon as librdkafka's queue runs dry), so racing one is a tie
# that a descheduled test process loses: a kill chunk's backlog is published while the
# worker is held back (below), and the worker works through it in small batches.
# Batches of 20 messages (LAKEHOUSE_TEST_CRASH_BATCH_MESSAGES, 1 to 100, sets another size),
# so that the backlog lasts: with 100 the server crash, which lists the server's processes
# before it kills, now and then came after the worker had taken the whole backlog
# ("inconclusive": on PostgreSQL 18 in about half the runs, on 15 in a CI run of
# 2026-12-02). Kills landed 960 to 8,400 messages into a backlog of 11,000 (100 or 20 a
# batch), so kill chunks are 24,000 messages (a backlog of 23,000).
my $batch_messages = $ENV{LAKEHOUSE_TEST_CRASH_BATCH_MESSAGES} // 20;
die "LAKEHOUSE_TEST_CRASH_BATCH_MESSAGES must be a whole number from 1 to 100\n"
  unless $batch_messages =~ /^\d+$/ && $batch_messages >= 1 && $batch_messages <= 100;
my $node = lh_node('crash', conf => "lakehouse.max_batch_messages = $batch_messages\n"
	  . "lakehouse.max_message_bytes = '64kB'\nrestart_after_crash = on\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

my $topic = lh_unique_name('crash');
my $partitions = 4;
# The broker stamps each record with the time it appended it, so that the guards below can
# ask it what it held at the moment of a kill.
lh_create_topic(lh_kafka_dir(), $topic, $partitions, 'message.timestamp.type=LogAppendTime');
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('wiki', '$topic')");

# --- The scenario: chunks of events, one chunk resent (a producer resume), poison spread in.
my $chunks = 24;
my $per_chunk = 1000;
# Kill chunks are larger, so that the worker is still busy with them when it is killed:
# all but the last $live_tail of their messages wait for the worker as a backlog.
my $kill_chunk_size = 24000;
my $live_tail = 1000;
my $poison = lh_poison_kinds();
my @poison_kinds = sort keys %$poison;
my (%times_published, %published, $n_dead);

# Kill points: six distinct chunks (not the first, not the last); one of them crashes the
# whole server instead of the worker.
my @candidates = (2 .. $chunks - 2);
my %kill_after;
while (keys %kill_after < 6)
{
	$kill_after{ $candidates[ int(rand(@candidates)) ] } = 1;
}
my @kill_chunks = sort { $a <=> $b } keys %kill_after;
my $server_crash_chunk = $kill_chunks[ int(rand(@kill_chunks)) ];

my @plan;
my $seq = 0;
for my $c (1 .. $chunks)
{
	my $size = $kill_after{$c} ? $kill_chunk_size : $per_chunk;
	my @records = map { [ $_ % $partitions, undef, lh_event('crash', $seq++) ] } 1 .. $size;
	# Chunk 5 is sent again inside chunk 6, as a producer that lost its acknowledgements would.
	push @records, @{ $plan[4] } if $c == 6;
	if ($c % 3 == 0)
	{
		my $kind = $poison_kinds[ ($c / 3) % @poison_kinds ];
		push @records, [ $c % $partitions, @{ $poison->{$kind} }[ 0, 1 ] ];
		$n_dead++;
	}
	push @plan, \@records;
}
my $total = 0;
$total += @$_ for @plan;
note("backlog: $total messages in $chunks chunks; kills after chunks @kill_chunks"
	  . " (server crash after $server_crash_chunk)");

sub committed_rows_sql
{
	return "SELECT (SELECT count(*) FROM bronze.wiki) + (SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'wiki')";
}

sub committed_rows
{
	return $node->safe_psql('postgres', committed_rows_sql());
}

sub worker_pid
{
	my $pid = '';
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'")
	  or return undef;
	$pid = $node->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse stream'");
	return $pid;
}

my $kills = 0;
for my $c (1 .. $chunks)
{
	my $records = $plan[ $c - 1 ];
	my ($pid, $pm_pid, $pm_start, $hold, @children);
	my $before = 0;
	my @live = @$records;
	if ($kill_after{$c})
	{
		# A kill chunk: wait until the worker has caught up, note its pid, then publish the
		# chunk and kill as soon as the first of its batches has committed.
		ok(lh_wait_caught_up($node, 'wiki', $topic), "before chunk $c the stream caught up")
		  or die "the stream did not catch up before chunk $c\n";
		$pid = worker_pid() // die "no stream worker before chunk $c";
		$before = committed_rows();
		$pm_start = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
		open my $fh, '<', $node->data_dir . '/postmaster.pid' or die "no postmaster.pid: $!";
		chomp($pm_pid = <$fh>);
		close $fh;
		# The backlog: a session locks bronze so that the worker's next batch waits for it,
		# the chunk's first messages are published meanwhile, and the lock goes.
		$hold = $node->background_psql('postgres');
		$hold->set_query_timer_restart;
		$hold->query_safe('BEGIN; LOCK TABLE bronze.wiki IN SHARE MODE');
		my @backlog = splice(@live, 0, @live - $live_tail);
		lh_publish($brokers, $topic, \@backlog);
		ok($node->poll_query_until('postgres', "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND NOT granted)"),
			"chunk $c: the worker waits with a backlog of " . scalar(@backlog) . " messages behind it")
		  or die "the worker did not wait for the lock on bronze.wiki before chunk $c\n";
		$hold->query_safe('COMMIT');
	}
	# The rest is published while the worker ingests; a kill lands while both are busy.
	my $publishing = lh_publish_start($brokers, $topic, \@live);
	lh_publish_finish($publishing) unless $kill_after{$c};
	for my $r (@$records)
	{
		$published{ $r->[0] }++;
		$times_published{$1}++ if defined $r->[2] && $r->[2] =~ /"tag":"crash","seq":(\d+)\}$/;
	}
	next unless $kill_after{$c};

	# The kill follows the chunk's first commit as closely as polling allows: through the
	# session already open (a new connection would take longer than a few batches).
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	until ($hold->query_safe('SELECT (' . committed_rows_sql() . ") > $before") eq 't')
	{
		die "no batch of chunk $c committed within $PostgreSQL::Test::Utils::timeout_default s\n" if time > $deadline;
	}
	my $offset = -s $node->logfile;
	# The server's processes, for a server crash, listed just before the clock is read (a
	# process started earlier in the chunk, such as an autovacuum worker, is among them).
	@children = grep { /^\d+$/ } map { s/\s+//gr } split /\n/, `ps -o pid= --ppid $pm_pid`
	  if $c == $server_crash_chunk;
	# Just before the kill, so what the broker held then is at most what it held at the kill.
	my $kill_ms = int(Time::HiRes::time() * 1000);
	if ($c == $server_crash_chunk)
	{
		# The whole server: postmaster and every backend at once, as a power cut would (a
		# backend left alone would go on until it noticed the postmaster's death).
		kill 'KILL', @children;
		$node->kill9;
		ok(lh_wait_gone($pm_pid), "server crash after chunk $c: postmaster $pm_pid died of SIGKILL");
		# A killed postmaster may linger as a zombie (its new parent may never reap it), and
		# its pid file would then make a new postmaster refuse to start: it is dead, so the
		# file goes. Backends notice the death on their own; start once they are gone.
		unlink $node->data_dir . '/postmaster.pid';
		my $started = 0;
		for (1 .. 60)
		{
			if ($node->start(fail_ok => 1)) { $started = 1; last; }
			unlink $node->data_dir . '/postmaster.pid' unless $node->{_pid} && !lh_process_gone($node->{_pid});
			$node->{_pid} = undef;
			sleep 1;
		}
		ok($started && $node->safe_psql('postgres', "SELECT pg_postmaster_start_time() > '$pm_start'"),
			"server crash after chunk $c: a new postmaster recovered the data");
	}
	else
	{
		kill 'KILL', $pid;
		$node->wait_for_log(qr/background worker "lakehouse stream" \(PID $pid\) was terminated by signal 9/, $offset);
		ok(1, "kill after chunk $c: worker $pid died of SIGKILL");
		# The postmaster resets every backend after a worker dies of a signal: wait until it
		# accepts connections again (on a busy machine recovery can take a moment).
		lh_wait_recovered($node)
		  or die "the server did not accept connections again after the kill";
	}
	$kills++;
	eval { $hold->quit };    # its backend died with the others
	# What the killed worker had committed: every batch whose transaction began before the
	# worker that runs now was started, after the kill (the restarted worker has gone on since).
	my $pid_after = worker_pid() // die "no stream worker after the kill after chunk $c";
	my $at_kill = $node->safe_psql('postgres', qq{
		SELECT coalesce(sum(messages), 0) FROM lakehouse.stream_progress
		 WHERE stream = 'wiki' AND committed_at < (SELECT backend_start FROM pg_stat_activity WHERE pid = $pid_after)});
	# What the broker held at the kill: the offsets it had appended before that moment.
	my $high = lh_broker_high_watermarks($brokers, $topic, $partitions, $kill_ms);
	my $held = 0;
	$held += $_ for values %$high;
	lh_publish_finish($publishing);
	# The fault must land mid-backlog: part of this chunk committed, not all the broker held.
	if ($at_kill <= $before)
	{
		fail("inconclusive: the kill after chunk $c found $at_kill committed, no more than before the chunk"
			  . " ($before); it did not land mid-backlog");
		done_testing();
		exit 1;
	}
	if ($at_kill >= $held)
	{
		fail("inconclusive: the kill after chunk $c found $at_kill committed, all the broker held"
			  . " ($held); it did not land mid-backlog");
		done_testing();
		exit 1;
	}
	pass("kill after chunk $c landed mid-backlog: $at_kill committed, more than $before before the chunk"
		  . " and fewer than the $held the broker held");
}
is($kills, 6, 'five worker kills and one server crash happened');

ok(lh_wait_caught_up($node, 'wiki', $topic), 'the stream catches up after every crash');

# --- Per partition: every offset once, as a row or a dead letter; the checkpoint is exact.
my $wm = lh_check_exactly_once($node, 'wiki', $topic, 'after the crashes');
for my $p (0 .. $partitions - 1)
{
	is($wm->{$p}[1] - $wm->{$p}[0], $published{$p}, "partition $p: the broker holds what was published ($published{$p})");
}
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.dead_letters WHERE stream = 'wiki'"),
	$n_dead, "dead letters == poison messages published ($n_dead)");

# Every event in bronze as often as it was published (the resent chunk twice), no more.
my %in_bronze = map { split /\|/ } split /\n/, $node->safe_psql('postgres',
	"SELECT payload->>'seq', count(*) FROM bronze.wiki GROUP BY 1");
is_deeply(\%in_bronze, \%times_published, 'each event is in bronze exactly as many times as it was published');

# Batch bookkeeping survived the crashes: progress rows account for every message.
is($node->safe_psql('postgres', "SELECT sum(messages) FROM lakehouse.stream_progress WHERE stream = 'wiki'"),
	$total, 'stream_progress accounts for every message exactly once');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT batch_id FROM bronze.wiki EXCEPT SELECT batch_id FROM lakehouse.stream_progress WHERE stream = 'wiki') x}),
	'0', 'every bronze row belongs to a committed batch');

done_testing();
