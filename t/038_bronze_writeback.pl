# The pages a batch adds to bronze are handed to the kernel's writeback at once, not left
# dirty in the page cache for Linux's dirty_expire_centisecs (30 s by default) and then
# written in one burst that stalls the WAL flushes queued behind it (src/writeback.c;
# benchmarks/results.md, 2026-12-02). Observed with cachestat(2) (Linux 6.5 or later;
# skipped on older kernels, in containers that refuse the call, on tmpfs, and where the
# page cache cannot be seen): two streams write about 20 MB of bronze each, the first with
# lakehouse.bronze_writeback off (the control: its pages must still be dirty, or the kernel
# writes new pages out by itself here and the check proves nothing, and the test fails as
# inconclusive), the second, later, with it on: few of its pages may still be dirty. The kernel's own writeback takes the
# oldest dirty pages first, so it cannot clean the second stream's bronze and leave the
# first's dirty.
use strict;
use warnings;

use POSIX ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakehouseTest;

# cachestat(2), the same number on x86_64 and aarch64: pages of $path cached, dirty and
# under writeback; undef when the kernel has no such call or refuses it.
sub page_cache_state
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot open $path: $!";
	my $range = pack('QQ', 0, 0);    # from the start to the end of the file
	my $state = "\0" x 40;
	my $rc = syscall(451, fileno($fh), $range, $state, 0);
	my ($err, $refused) = ("$!", $!{ENOSYS} || $!{EPERM});
	close $fh;
	if ($rc != 0)
	{
		return undef if $refused;
		die "cachestat($path) failed: $err";
	}
	my ($cached, $dirty, $writeback) = unpack('Q3', $state);
	return { cached => $cached, dirty => $dirty, writeback => $writeback };
}

my $page_bytes = POSIX::sysconf(POSIX::_SC_PAGESIZE()) || 4096;
my $probe = "$PostgreSQL::Test::Utils::tmp_check/writeback_probe";
{
	open(my $fh, '>', $probe) or die "cannot write $probe: $!";
	print $fh "x" x 4096;
	close $fh;
}
my $probe_state = page_cache_state($probe);
plan skip_all => 'this kernel has no cachestat(2) (Linux 6.5 or later), or refuses it: dirty pages cannot be counted'
  unless defined $probe_state;
plan skip_all => 'cachestat(2) sees no page of a file just written here: the page cache cannot be observed'
  unless $probe_state->{cached} > 0;
chomp(my $fs = `stat -f -c %T $probe`);
unlink $probe;
plan skip_all => "the test's folder is on $fs: its pages are never written back"
  if $fs eq 'tmpfs' || $fs eq 'ramfs';

my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();
# fsync on: the test clusters run with it off, and PostgreSQL then skips every writeback
# request (pg_flush_data), this one included, as it would on such a server.
my $node = lh_node('writeback', conf => "fsync = on\nlakehouse.bronze_writeback = off\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

# Publishes about 20 MB of events to a new stream's topic and waits until bronze has them
# all. Returns the topic and bronze's file.
my $events = 12_000;
sub fill_stream
{
	my ($stream) = @_;
	my $topic = lh_unique_name($stream);
	lh_create_topic($kafka_dir, $topic, 1);
	lh_create_topic($kafka_dir, "$topic.dlq", 1);
	$node->safe_psql('postgres', qq{SELECT lakehouse.create_stream('$stream', '$topic')});
	ok($node->poll_query_until('postgres', qq{SELECT state = 'running' FROM lakehouse.streams WHERE name = '$stream'}),
		"$stream: the stream worker runs");
	for my $part (0 .. 2)
	{
		lh_publish($brokers, $topic,
			[ map { [ 0, undef, lh_event($stream, $_) ] } ($part * $events / 3 + 1) .. (($part + 1) * $events / 3) ]);
	}
	# Waits on the offsets: bronze itself is not read before its pages are counted.
	ok(lh_wait_caught_up($node, $stream, $topic), "$stream: every event is in bronze");
	return ($topic, $node->data_dir . '/' . $node->safe_psql('postgres', qq{SELECT pg_relation_filepath('bronze.$stream')}));
}

my ($topic_off, $file_off) = fill_stream('wb_off');
lh_set_conf($node, 'ALTER SYSTEM SET lakehouse.bronze_writeback = on');
ok($node->poll_query_until('postgres', q{SELECT current_setting('lakehouse.bronze_writeback') = 'on'}),
	'lakehouse.bronze_writeback is on for new processes');
my ($topic_on, $file_on) = fill_stream('wb_on');

# Writeback was asked for at each batch's end; give the disk a moment to take it.
Time::HiRes::sleep(1);
my $off = page_cache_state($file_off);
my $on = page_cache_state($file_on);
note(sprintf('writeback off: %d pages cached, %d dirty, %d under writeback; on: %d, %d, %d; pages of %d bytes',
		$off->{cached}, $off->{dirty}, $off->{writeback}, $on->{cached}, $on->{dirty}, $on->{writeback}, $page_bytes));

# Preconditions, or the check below cannot tell the request from the kernel's own writeback.
# (No bound on the time taken: the kernel writes the oldest dirty pages first, so while
# the first stream's pages are still dirty the second stream's were not written by it.)
my $inconclusive;
$inconclusive = sprintf('bronze has %d of its pages in the page cache (%d bytes each): too few to judge', $on->{cached}, $page_bytes)
  if $on->{cached} * $page_bytes < 8 << 20 || $off->{cached} * $page_bytes < 8 << 20;
$inconclusive = sprintf('with lakehouse.bronze_writeback off, %d of bronze\'s %d cached pages are dirty: either the kernel writes new pages out by itself here (vm.dirty_background_* set low?) or the setting did not reach the stream worker', $off->{dirty}, $off->{cached})
  if !defined $inconclusive && $off->{dirty} < 0.5 * $off->{cached};
ok(!defined $inconclusive, 'with the setting off, bronze\'s new pages stay dirty (the control)')
  or diag("inconclusive: $inconclusive");

cmp_ok($on->{dirty}, '<', 0.1 * $on->{cached},
	sprintf('with it on (the default), at most a tenth of bronze\'s %d cached pages still dirty (%d; with it off %d of %d)',
		$on->{cached}, $on->{dirty}, $off->{dirty}, $off->{cached}));

is($node->safe_psql('postgres', 'SELECT (SELECT count(*) FROM bronze.wb_off) + (SELECT count(*) FROM bronze.wb_on)'),
	2 * $events, 'one row per event in each stream');
lh_check_exactly_once($node, 'wb_off', $topic_off, 'writeback off');
lh_check_exactly_once($node, 'wb_on', $topic_on, 'writeback on');
$node->stop;
done_testing();
