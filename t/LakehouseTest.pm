# LakehouseTest: helpers shared by the TAP suites in t/. Nodes that preload lakehouse and
# point at the scratch Kafka that scripts/test started, and thin wrappers around
# scripts/kafka and kcat so that tests make their own scenario data on a real broker.
package LakehouseTest;

use strict;
use warnings;

use Exporter 'import';
use File::Temp ();
use Fcntl qw(O_CREAT O_EXCL O_WRONLY);
use IO::Socket::INET;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(
  lh_top lh_brokers lh_kafka_dir lh_node lh_kafka lh_create_topic lh_produce
  lh_unique_name lh_free_port_pair lh_watermarks lh_process_gone
  lh_check_exactly_once lh_wait_beyond lh_publish lh_publish_start lh_publish_finish lh_event lh_poison_kinds lh_wait_caught_up
  lh_seed lh_broker_high_watermarks lh_broker_watermarks lh_async_loss_conf lh_waits_on_ledger_sql
  lh_wait_recovered lh_set_conf lh_wait_gone
);

sub lh_top { return $ENV{LH_TOP} // die "LH_TOP is not set: run the suites through scripts/test\n"; }

sub lh_brokers
{
	return $ENV{LAKEHOUSE_TEST_BROKERS}
	  // die "LAKEHOUSE_TEST_BROKERS is not set: run the suites through scripts/test\n";
}

sub lh_kafka_dir { return $ENV{LAKEHOUSE_TEST_KAFKA_DIR} // die "LAKEHOUSE_TEST_KAFKA_DIR is not set\n"; }

# A started node that preloads lakehouse, with lakehouse.brokers set to the scratch Kafka.
# conf => extra postgresql.conf text; preload => 0 leaves lakehouse out; init => {...}
# options for PostgreSQL::Test::Cluster's init (allows_streaming => 1 for a primary).
sub lh_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%{ $opts{init} // {} });
	my $preload = $opts{preload} // 1;
	my $conf = '';
	$conf .= "shared_preload_libraries = 'lakehouse'\n" if $preload;
	$conf .= "lakehouse.brokers = '" . lh_brokers() . "'\n" if $preload;
	$conf .= $opts{conf} if defined $opts{conf};
	$node->append_conf('postgresql.conf', $conf);
	$node->start;
	return $node;
}

# Runs $sql (an ALTER SYSTEM) on $node and reloads the configuration.
sub lh_set_conf
{
	my ($node, $sql) = @_;
	$node->safe_psql('postgres', $sql);
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	return;
}

# Whether process $pid has exited within $seconds (default 30; polled every 0.1 s).
sub lh_wait_gone
{
	my ($pid, $seconds) = @_;
	my $deadline = time + ($seconds // 30);
	while (time < $deadline)
	{
		return 1 if lh_process_gone($pid);
		select(undef, undef, undef, 0.1);
	}
	return lh_process_gone($pid);
}

# Waits until the server answers queries again after a crash (a killed backend or worker
# makes the postmaster reset every process and recover). Not poll_query_until: it writes
# its query to psql's stdin, and a psql that the recovering server turns away at once can
# exit before reading it, which makes IPC::Run die of a broken pipe and ends the test
# script (seen in t/040 while another test file loaded the machine). Here the query is an
# argument. Returns whether the server answered within PG_TEST_TIMEOUT_DEFAULT.
sub lh_wait_recovered
{
	my ($node) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		my ($out, $err) = ('', '');
		# Bounded per try too: a connection that hangs must not outlast the deadline.
		eval {
			IPC::Run::run([ $node->installed_command('psql'), '-XAtq', '-d', $node->connstr('postgres') . ' connect_timeout=10',
					'-c', 'SELECT 1' ],
				'<', '/dev/null', '>', \$out, '2>', \$err, IPC::Run::timeout(30));
		};
		return 1 if $out =~ /^1$/m;
		select(undef, undef, undef, 0.1);
	}
	return 0;
}

# A query that is true while the backend $pid waits for a lock on the batch ledger
# (lakehouse.stream_progress), held by another session: a stream worker with a batch
# written, stopped at its ledger row (t/096, t/097).
sub lh_waits_on_ledger_sql
{
	my ($pid) = @_;
	return "SELECT EXISTS (SELECT FROM pg_locks WHERE pid = $pid AND NOT granted"
	  . " AND relation = 'lakehouse.stream_progress'::regclass AND mode = 'RowExclusiveLock')";
}

# postgresql.conf lines under which a server crash is likely to undo the newest
# asynchronous commits (t/072, t/096): their WAL stays in shared memory until the WAL
# writer writes it (a partly filled page every 10 s at the most here; full pages sooner)
# or something else does (a synchronous commit, a dirty page written out by the
# background writer, a checkpoint, a vacuum), and those are kept away. Likely, not
# certain: the tests try again, and fail as inconclusive when no commit was lost.
sub lh_async_loss_conf
{
	return join('', map { "$_\n" } "wal_writer_delay = 10000ms", "bgwriter_lru_maxpages = 0", "autovacuum = off",
		"checkpoint_timeout = 1h", "max_wal_size = 4GB");
}

# Runs scripts/kafka with the given arguments; dies with its output when it fails.
sub lh_kafka
{
	my @args = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ lh_top() . '/scripts/kafka', @args ], '>', \$stdout, '2>', \$stderr);
	die "scripts/kafka @args failed:\n$stdout\n$stderr" unless $ok;
	return $stdout;
}

sub lh_create_topic
{
	my ($kafka_dir, $topic, $partitions, @settings) = @_;
	lh_kafka('create-topic', $kafka_dir, $topic, $partitions, @settings);
	return;
}

# Publishes $count JSON messages to one partition with kcat and waits for delivery.
sub lh_produce
{
	my ($brokers, $topic, $partition, $count, $tag) = @_;
	return if $count == 0;
	my $tmp = File::Temp->new(DIR => $PostgreSQL::Test::Utils::tmp_check);
	for my $i (1 .. $count)
	{
		print $tmp qq({"tag":"$tag","partition":$partition,"seq":$i}\n);
	}
	close $tmp;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run(
		[
			'kcat', '-b', $brokers, '-t', $topic, '-p', $partition, '-P',
			'-X', 'acks=all', '-l', $tmp->filename
		],
		'>', \$stdout, '2>', \$stderr);
	die "kcat could not publish $count messages to $topic/$partition: $stderr" unless $ok;
	return;
}

# True when $pid no longer runs. An orphan whose new parent has not reaped it yet is a
# zombie: it has exited, so it counts as gone.
sub lh_process_gone
{
	my ($pid) = @_;
	return 1 unless kill(0, $pid);
	if (open my $fh, '<', "/proc/$pid/stat")
	{
		my $stat = <$fh>;
		close $fh;
		return 1 if defined $stat && $stat =~ /^\d+ \(.*\) Z /;
	}
	return 0;
}

# Publishes exact bytes with test/tools/produce_hex (kcat cannot send empty or null
# values): each record is [partition, key or undef, value or undef, optionally the message
# timestamp in milliseconds since the Unix epoch]. Returns the count.
sub lh_publish
{
	my ($brokers, $topic, $records, $transactional_id) = @_;
	return lh_publish_finish(lh_publish_start($brokers, $topic, $records, $transactional_id));
}

# The same, in the background: returns a handle for lh_publish_finish. With a transactional
# id, through Kafka transactions: an element 'COMMIT' or 'ABORT' ends the one under way.
sub lh_publish_start
{
	my ($brokers, $topic, $records, $transactional_id) = @_;
	my $hex = sub {
		my ($b) = @_;
		return '-' unless defined $b;
		return '=' if $b eq '';
		return unpack('H*', $b);
	};
	# From a file, so the child reads at its own pace while this process does other work.
	my $input = File::Temp->new(DIR => $PostgreSQL::Test::Utils::tmp_check);
	print $input map { ref $_ ? "$_->[0]\t" . $hex->($_->[1]) . "\t" . $hex->($_->[2]) . (defined $_->[3] ? "\t$_->[3]" : '') . "\n" : "$_\n" } @$records;
	close $input;
	my %h = (count => scalar(grep { ref $_ } @$records), stdout => '', stderr => '', input => $input);
	$h{run} = IPC::Run::start([ lh_top() . '/test/tools/produce_hex',
			(defined $transactional_id ? ('--transactional', $transactional_id) : ()), $brokers, $topic ],
		'<', $input->filename, '>', \$h{stdout}, '2>', \$h{stderr},
		# A publisher that hangs fails the test instead of holding it until CI's limit.
		IPC::Run::timeout(3 * $PostgreSQL::Test::Utils::timeout_default));
	return \%h;
}

sub lh_publish_finish
{
	my ($h) = @_;
	my $ok = eval { $h->{run}->finish };
	die "produce_hex did not finish: $@" unless defined $ok;
	die "produce_hex failed: $h->{stderr}" unless $ok;
	chomp(my $sent = $h->{stdout});
	die "produce_hex published $sent of $h->{count}\n" unless $sent == $h->{count};
	return $sent;
}

# A recentchange-shaped event of about 1.2 KB with a unique id built from $tag and $i.
sub lh_event
{
	my ($tag, $i) = @_;
	my $id = sprintf('%08x-%04x-4%03x-8%03x-%012x', $i, length($tag), $i % 4096, $i % 4096, $i);
	my $title = "Page " . ($i % 97) . " \x{e9}t\x{e9}";
	utf8::encode($title);
	my $comment = "edit $i of $tag: " . ('lorem ipsum dolor sit amet ' x 36);
	return sprintf(
		'{"$schema":"/mediawiki/recentchange/1.0.0","meta":{"uri":"https://en.wikipedia.org/wiki/P%d",'
		  . '"id":"%s","dt":"2026-11-29T08:%02d:%02dZ","domain":"en.wikipedia.org","stream":"mediawiki.recentchange"},'
		  . '"id":%d,"type":"edit","namespace":0,"title":"%s","comment":"%s","timestamp":%d,'
		  . '"user":"User%d","bot":false,"minor":false,"length":{"old":%d,"new":%d},'
		  . '"revision":{"old":%d,"new":%d},"server_name":"en.wikipedia.org","wiki":"enwiki","tag":"%s","seq":%d}',
		$i, $id, ($i / 60) % 60, $i % 60, 1_000_000 + $i, $title, $comment, 1_795_900_000 + $i,
		$i % 50, 1000 + $i, 1100 + $i, 4_000_000_000 + $i, 4_000_000_001 + $i, $tag, $i);
}

# Every kind of message that must become a dead letter: name => [key, value, reason regex].
sub lh_poison_kinds
{
	return {
		not_json => [ undef, 'this is not json {', qr/not valid JSON/ ],
		empty => [ undef, '', qr/empty value/ ],
		null => [ undef, undef, qr/null value/ ],
		too_large => [ undef, '{"x":"' . ('a' x 70000) . '"}', qr/exceeds lakehouse\.max_message_bytes/ ],
		bad_utf8 => [ undef, qq({"t":"\xff\xfe"}), qr/not valid UTF-8/ ],
		nul_byte => [ undef, qq({"t":"a\x00b"}), qr/NUL byte/ ],
		nul_escape => [ undef, '{"t":"\\u0000"}', qr/not valid JSON/ ],
		too_deep => [ undef, ('[' x 600) . (']' x 600), qr/nested deeper/ ],
		bad_key => [ "\xff\xfe", '{"ok":true}', qr/key is not valid UTF-8/ ],
		# Valid JSON that jsonb cannot store: found only by COPY, then isolated by splitting.
		huge_number => [ undef, '{"n":1e999999}', qr/refused by bronze: .*numeric/ ],
	};
}

# The exactly-once check of Kafka to bronze, per partition, against the broker itself:
# of the offsets the broker still holds (low to high), bronze rows + dead letters ==
# high - low, distinct offsets == rows, no offset both a row and a dead letter; and
# next_offset == high watermark. Rows below low were ingested before the broker deleted
# their records (retention), so they are outside what the broker can vouch for. Returns
# the watermarks.
# {partition => [low, high]} of every partition of $topic, from Kafka itself with kcat
# (metadata for the partitions, then the oldest and the next offset of each), never
# through lakehouse's own kafka_watermarks(), the code under test. A broker that has just
# restarted may not know the topic for a few seconds: asked again for up to a minute.
sub lh_broker_watermarks
{
	my ($brokers, $topic) = @_;
	my ($stdout, $stderr, @parts);
	for my $try (1 .. 120)
	{
		($stdout, $stderr) = ('', '');
		IPC::Run::run([ 'kcat', '-b', $brokers, '-L', '-t', $topic ], '>', \$stdout, '2>', \$stderr);
		@parts = sort { $a <=> $b } map { /^\s+partition (\d+),/ ? $1 : () } split /\n/, $stdout;
		last if @parts;
		select(undef, undef, undef, 0.5);
	}
	die "kcat lists no partition of $topic:\n$stdout$stderr" unless @parts;
	my ($low, $high) = (kcat_offsets($brokers, $topic, -2, @parts), kcat_offsets($brokers, $topic, -1, @parts));
	my %wm = map { $_ => [ $low->{$_}, $high->{$_} ] } @parts;
	return \%wm;
}

# Every partition of $topic: bronze rows + dead letters (+ ranges passed without a message,
# which only a $transactional topic may have) == the broker's high - low, each offset once,
# next_offset == high. The offsets come from Kafka (kcat), not from
# lakehouse.kafka_watermarks(); the brokers are the stream's own (its row, or the node's
# lakehouse.brokers).
sub lh_check_exactly_once
{
	my ($node, $stream, $topic, $label, $transactional) = @_;
	my $brokers = $node->safe_psql('postgres',
		"SELECT coalesce(brokers, current_setting('lakehouse.brokers')) FROM lakehouse.streams WHERE name = '$stream'");
	$brokers = $node->safe_psql('postgres', "SELECT current_setting('lakehouse.brokers')") if $brokers eq '';
	my $wm = lh_broker_watermarks($brokers, $topic);
	# An empty list would make the loop below check nothing and pass.
	cmp_ok(scalar(keys %$wm), '>', 0, "$label: the broker reports partitions of $topic to check");
	for my $p (sort { $a <=> $b } keys %$wm)
	{
		my ($low, $high) = @{ $wm->{$p} };
		# Offsets passed without a message (a transactional producer's markers and aborted
		# records) count where they lie in [low, high); a row inside one is counted apart.
		my ($rows, $distinct, $dead, $next, $overlap, $passed, $inside) = split /\|/, $node->safe_psql('postgres', qq{
			SELECT (SELECT count(*) FROM bronze.$stream WHERE kafka_partition = $p AND kafka_offset >= $low),
			       (SELECT count(DISTINCT kafka_offset) FROM bronze.$stream WHERE kafka_partition = $p AND kafka_offset >= $low),
			       (SELECT count(*) FROM lakehouse.dead_letters WHERE stream = '$stream' AND kafka_partition = $p AND kafka_offset >= $low),
			       (SELECT next_offset FROM lakehouse.offsets WHERE stream = '$stream' AND kafka_partition = $p),
			       (SELECT count(*) FROM bronze.$stream b JOIN lakehouse.dead_letters d
			           ON d.stream = '$stream' AND d.kafka_partition = b.kafka_partition AND d.kafka_offset = b.kafka_offset
			         WHERE b.kafka_partition = $p),
			       (SELECT coalesce(sum(least(k.to_offset, $high) - greatest(k.from_offset, $low)), 0)
			          FROM lakehouse.skipped_offsets k
			         WHERE k.stream = '$stream' AND k.kafka_partition = $p AND k.to_offset > $low AND k.from_offset < $high),
			       (SELECT count(*) FROM lakehouse.skipped_offsets k
			          JOIN (SELECT kafka_partition, kafka_offset FROM bronze.$stream
			                UNION ALL SELECT kafka_partition, kafka_offset FROM lakehouse.dead_letters WHERE stream = '$stream') x
			            ON x.kafka_partition = k.kafka_partition AND x.kafka_offset >= k.from_offset AND x.kafka_offset < k.to_offset
			         WHERE k.stream = '$stream' AND k.kafka_partition = $p)});
		is($rows + $dead + $passed, $high - $low,
			"$label, partition $p: bronze rows + dead letters + offsets passed without a message == high - low (" . ($high - $low) . ")");
		is($distinct, $rows, "$label, partition $p: distinct offsets == rows");
		is($overlap, 0, "$label, partition $p: no offset is both a row and a dead letter");
		is($inside, 0, "$label, partition $p: no row or dead letter lies in a range passed without a message");
		# Only transaction markers and aborted records may be passed: on a topic without
		# transactions a range would be a message lost without a word.
		is($passed, 0, "$label, partition $p: no offset passed without a message (no transactions on this topic)")
		  unless $transactional;
		is($next, $high, "$label, partition $p: next_offset == high watermark ($high)");
	}
	return $wm;
}

# Polls $count_sql through one open session until it returns more than $beyond, and
# returns what it saw and the server's clock at that moment. A new psql per poll (poll_query_until) is too slow to catch a fast
# worker in the middle of a backlog, which the fault tests need. Fails the test and dies
# when the count has not gone beyond $beyond within PG_TEST_TIMEOUT_DEFAULT (180 s): a fault
# injected after a wait that never ended would prove nothing.
sub lh_wait_beyond
{
	my ($node, $count_sql, $beyond) = @_;
	my $bg = $node->background_psql('postgres');
	$bg->set_query_timer_restart;    # the deadline below bounds the wait, not the session's timer
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	my ($seen, $at);
	for (;;)
	{
		($seen, $at) = split /\|/, $bg->query_safe("SELECT ($count_sql), clock_timestamp()");
		last if $seen > $beyond;
		if (time > $deadline)
		{
			$bg->quit;
			fail("lh_wait_beyond: ($count_sql) still returned $seen, not more than $beyond, after "
				  . "$PostgreSQL::Test::Utils::timeout_default s");
			die "lh_wait_beyond timed out\n";
		}
		select(undef, undef, undef, 0.001);
	}
	$bg->quit;
	return wantarray ? ($seen, $at) : $seen;
}

# {partition => offset} for @parts of $topic at $ts, straight from the broker (kcat -Q):
# $ts in milliseconds since the epoch, or Kafka's -1 (the end) and -2 (the beginning).
sub kcat_offsets
{
	my ($brokers, $topic, $ts, @parts) = @_;
	my ($stdout, $stderr);
	my $ok = IPC::Run::run([ 'kcat', '-b', $brokers, '-Q', map { ('-t', "$topic:$_:$ts") } @parts ],
		'>', \$stdout, '2>', \$stderr);
	die "kcat could not query the offsets of $topic at $ts: $stderr" unless $ok;
	my %off = map { /^\Q$topic\E \[(\d+)\] offset (-?\d+)$/ ? ($1 => $2) : () } split /\n/, $stdout;
	die "kcat gave offsets for " . scalar(keys %off) . " of " . scalar(@parts) . " partitions of $topic:\n$stdout$stderr"
	  unless keys %off == @parts;
	return \%off;
}

# {partition => high watermark} for partitions 0 .. $partitions - 1, straight from the
# broker with kcat, not through the code under test. With $at_ms (milliseconds since the
# epoch) and a topic created with message.timestamp.type=LogAppendTime: the high watermark
# the broker had at that moment, that is the first offset appended at or after it (the
# current end when nothing was appended since). Messages appended within that very
# millisecond count as later.
sub lh_broker_high_watermarks
{
	my ($brokers, $topic, $partitions, $at_ms) = @_;
	my $high = kcat_offsets($brokers, $topic, $at_ms // -1, 0 .. $partitions - 1);
	my @none_since = grep { $high->{$_} < 0 } keys %$high;
	if (@none_since)
	{
		my $end = kcat_offsets($brokers, $topic, -1, @none_since);
		$high->{$_} = $end->{$_} for @none_since;
	}
	return $high;
}

# Seeds Perl's rand for a random scenario, from LAKEHOUSE_TEST_SEED when it is set, and
# prints the seed either way (again at the end of a failed run, on a "# Failed" line that
# scripts/test shows), so that a failing interleaving can be run again:
#   LAKEHOUSE_TEST_SEED=<seed> scripts/test --tap-only t/<file>.pl
my $lh_seed;

END
{
	diag("Failed with random seed $lh_seed: run this scenario again with LAKEHOUSE_TEST_SEED=$lh_seed")
	  if defined $lh_seed && ($? != 0 || !Test::More->builder->is_passing);
}

sub lh_seed
{
	my $seed = $ENV{LAKEHOUSE_TEST_SEED};
	if (defined $seed && $seed ne '')
	{
		die "LAKEHOUSE_TEST_SEED must be a non-negative integer, not '$seed'\n" unless $seed =~ /^\d+$/;
	}
	else
	{
		$seed = (time ^ ($$ << 16)) & 0x7fffffff;
	}
	srand($seed);
	$lh_seed = $seed;
	diag("random seed $seed (run this scenario again with LAKEHOUSE_TEST_SEED=$seed)");
	return $seed;
}

# Waits until every partition's committed next_offset equals the broker's high watermark.
sub lh_wait_caught_up
{
	my ($node, $stream, $topic, $brokers) = @_;
	my $arg = defined $brokers ? "'$brokers'" : 'NULL';
	return $node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM lakehouse.kafka_watermarks('$topic', $arg) w
		  LEFT JOIN lakehouse.offsets o ON o.stream = '$stream' AND o.kafka_partition = w.partition
		 WHERE o.next_offset IS DISTINCT FROM w.high});
}

sub lh_unique_name
{
	my ($base) = @_;
	return sprintf('%s_%d_%06d', $base, time, int(rand(1_000_000)));
}

# Two consecutive free loopback ports (a Kafka node uses port and port+1).
sub lh_free_port_pair
{
	for (1 .. 200)
	{
		# Below Linux's ephemeral range (32768-60999): a port picked there can be taken by
		# any outgoing connection between this check and the broker's bind. scripts/test's
		# own broker counts up from 20000.
		my $port = 22000 + 2 * int(rand(5000));
		my $ok = 1;
		for my $p ($port, $port + 1)
		{
			my $sock = IO::Socket::INET->new(
				LocalAddr => '127.0.0.1',
				LocalPort => $p,
				Proto => 'tcp',
				ReuseAddr => 1,
				Listen => 1);
			if ($sock) { close $sock; }
			else { $ok = 0; last; }
		}
		next unless $ok;
		# Reserved for this run: a test file in the other lane of scripts/test may have
		# found the same pair free a moment ago and not bound it yet.
		my $locks = "$PostgreSQL::Test::Utils::tmp_check/lh_port_locks";
		mkdir $locks;
		return $port if sysopen(my $lock, "$locks/$port", O_CREAT | O_EXCL | O_WRONLY);
	}
	die "no free port pair found\n";
}

# {partition => [low, high]} from lakehouse.kafka_watermarks on $node.
sub lh_watermarks
{
	my ($node, $topic, $brokers) = @_;
	my $arg = defined $brokers ? ", '$brokers'" : '';
	my $out = $node->safe_psql('postgres',
		"SELECT partition, low, high FROM lakehouse.kafka_watermarks('$topic'$arg) ORDER BY 1");
	my %wm;
	for my $line (split /\n/, $out)
	{
		my ($p, $low, $high) = split /\|/, $line;
		$wm{$p} = [ $low, $high ];
	}
	return \%wm;
}

1;
