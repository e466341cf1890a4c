# Runs scripts/prove-exactly-once, the crash proof users run by hand, against the suite's
# scratch Kafka: the real producer, SIGKILLs of the stream worker mid-backlog, of a
# silver pass mid-way and of the producer mid-stream, recovery, late events, and every layer compared with the broker
# and the scenario. Each line of its report becomes a test, so a mismatch names the
# layer; an inconclusive kill fails too (the script exits non-zero).
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $seed = lh_seed();
my $dir = "$PostgreSQL::Test::Utils::tmp_check/prove";
my @cmd = (
	lh_top() . '/scripts/prove-exactly-once', '--no-install',
	'--brokers', lh_brokers(), '--kafka-dir', lh_kafka_dir(),
	'--dir', $dir, '--seed', $seed,
	'--pg-port', PostgreSQL::Test::Cluster::get_free_port());
# Its scratch PostgreSQL is stopped even when this test dies (the script stops it itself
# on every way out but SIGKILL).
END { local $?; system(lh_top() . "/scripts/pg", 'stop', "$dir/pg") if -f "$dir/pg/data/postmaster.pid"; }
my ($out, $err) = ('', '');
my $ok = eval { IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(900)) };
diag("scripts/prove-exactly-once did not finish: $@") if $@;
note($out);
diag($err) if $err ne '';
ok($ok, 'scripts/prove-exactly-once exited with status 0');

# The report: "<layer>  <expected>  <found>  ok|MISMATCH".
my @layers = $out =~ /^(.+?)\s+(\d+)\s+(\d+)\s+(ok|MISMATCH)$/mg;
my $n = 0;
while (my ($layer, $expected, $found) = splice(@layers, 0, 4))
{
	is($found, $expected, "prove: $layer");
	$n++;
}
cmp_ok($n, '>=', 15, "the report compared every layer ($n lines)");
like($out, qr/^prove: kill \d+: stream worker \(pid \d+\) SIGKILLed with \d+ of \d+ messages committed/m,
	'a stream worker kill landed mid-backlog');
like($out, qr/^prove: kill \d+: silver pass \(pid \d+\) SIGKILLed/m, 'a silver pass kill landed before its commit');
like($out, qr/^prove: producer SIGKILLed with \d+ of \d+ live events in Kafka .* it resent [1-9]\d* /m,
	'the producer kill landed mid-stream and its restart resent events');
unlike($out . $err, qr/INCONCLUSIVE/, 'no kill was inconclusive');

done_testing();
