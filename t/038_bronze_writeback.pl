# The pages a batch adds to bronze are handed to the kernel's writeback at once, not left
# dirty in the page cache for Linux's dirty_expire_centisecs (30 s by default) and then
# written in one burst that stalls every WAL flush behind it (src/writeback.c; seen in
# benchmarks/bench_silver as 1 to 2 s stalls of bronze and silver every 30 s at 10,000
# events/s). Observed with cachestat(2) (Linux 6.5 or later; skipped on older kernels):
# right after the stream has written some 20 MB of bronze, few of bronze's cached pages may
# still be dirty, while a file written the same way by this script moments earlier is still
# dirty (the kernel holds new pages here; otherwise the check proves nothing and the test
# fails as inconclusive).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();
use LakehouseTest;

# cachestat(2) on x86_64 and aarch64 (the same number on both): pages of $path cached,
# dirty and under writeback; undef when the kernel has no such call.
sub page_cache_state
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "cannot open $path: $!";
	my $range = pack('QQ', 0, 0);    # from the start to the end of the file
	my $state = "\0" x 40;
	my $rc = syscall(451, fileno($fh), $range, $state, 0);
	my ($err, $no_such_call) = ("$!", $!{ENOSYS});
	close $fh;
	if ($rc != 0)
	{
		return undef if $no_such_call;
		die "cachestat($path) failed: $err";
	}
	my ($cached, $dirty, $writeback) = unpack('Q3', $state);
	return { cached => $cached, dirty => $dirty, writeback => $writeback };
}

my $probe = "$PostgreSQL::Test::Utils::tmp_check/writeback_probe";
{
	open(my $fh, '>', $probe) or die "cannot write $probe: $!";
	print $fh "x" x 4096;
	close $fh;
}
plan skip_all => 'this kernel has no cachestat(2) (Linux 6.5 or later): dirty pages cannot be counted'
  unless defined page_cache_state($probe);

my $brokers = lh_brokers();
my $kafka_dir = lh_kafka_dir();
# fsync on: the test clusters run with it off, and PostgreSQL then skips every writeback
# request (pg_flush_data), this one included, as it would on such a server.
my $node = lh_node('writeback', conf => "fsync = on\n");
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');
my $topic = lh_unique_name('writeback');
lh_create_topic($kafka_dir, $topic, 1);
lh_create_topic($kafka_dir, "$topic.dlq", 1);
$node->safe_psql('postgres', qq{SELECT lakehouse.create_stream('writeback', '$topic')});
ok($node->poll_query_until('postgres', q{SELECT state = 'running' FROM lakehouse.streams WHERE name = 'writeback'}),
	'the stream worker runs');

# About 20 MB of events, published in four parts so that bronze grows over several batches.
my $events = 16_000;
my $t_start = Time::HiRes::time();
for my $part (0 .. 3)
{
	lh_publish($brokers, $topic, [ map { [ 0, undef, lh_event('wb', $_) ] } ($part * 4000 + 1) .. (($part + 1) * 4000) ]);
}
ok(lh_wait_caught_up($node, 'writeback', $topic), 'every event is in bronze');
is($node->safe_psql('postgres', 'SELECT count(*) FROM bronze.writeback'), $events, 'one row per event');
my $bronze_file = $node->data_dir . '/' . $node->safe_psql('postgres', q{SELECT pg_relation_filepath('bronze.writeback')});

# The control: a file of bronze's size written now, without fsync, in the same file system.
my $bronze_bytes = -s $bronze_file;
my $control = "$PostgreSQL::Test::Utils::tmp_check/writeback_control";
{
	open(my $fh, '>', $control) or die "cannot write $control: $!";
	my $block = 'y' x (1 << 20);
	print $fh $block for 1 .. int($bronze_bytes / (1 << 20)) + 1;
	close $fh;
}
# Writeback was started at each batch's end; give the disk a moment to take it.
Time::HiRes::sleep(1);
my $bronze = page_cache_state($bronze_file);
my $ctl = page_cache_state($control);
my $elapsed = Time::HiRes::time() - $t_start;
my $expire_s = PostgreSQL::Test::Utils::slurp_file('/proc/sys/vm/dirty_expire_centisecs') / 100;
note(sprintf('bronze: %d pages cached, %d dirty, %d under writeback; control: %d cached, %d dirty; %.1f s since the first event, dirty_expire %.0f s',
		$bronze->{cached}, $bronze->{dirty}, $bronze->{writeback}, $ctl->{cached}, $ctl->{dirty}, $elapsed, $expire_s));

# Preconditions, or the check below cannot tell the hint from the kernel's own writeback.
my $inconclusive;
$inconclusive = sprintf('the control file has %d of %d pages dirty: the kernel writes new pages out by itself here (vm.dirty_background_* set low?)', $ctl->{dirty}, $ctl->{cached})
  if $ctl->{dirty} < 0.5 * $ctl->{cached};
$inconclusive = sprintf('bronze took %.0f s to fill, longer than the kernel keeps pages dirty (%.0f s)', $elapsed, $expire_s)
  if !defined $inconclusive && $elapsed > 0.8 * $expire_s;
$inconclusive = sprintf('bronze has %d pages in the page cache (%d bytes on disk): too few to judge', $bronze->{cached}, $bronze_bytes)
  if !defined $inconclusive && $bronze->{cached} < 1000;
ok(!defined $inconclusive, 'the kernel holds freshly written pages dirty, so the check below means something')
  or diag("inconclusive: $inconclusive");

cmp_ok($bronze->{dirty}, '<', 0.1 * $bronze->{cached},
	sprintf('at most a tenth of bronze\'s %d cached pages still dirty (%d), the control file %d of %d',
		$bronze->{cached}, $bronze->{dirty}, $ctl->{dirty}, $ctl->{cached}));
unlink $control, $probe;

lh_check_exactly_once($node, 'writeback', $topic, 'after the writeback check');
$node->stop;
done_testing();
