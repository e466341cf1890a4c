# The harness's Kafka node survives what later crash tests do to it: SIGKILL and a clean
# stop, each followed by a start on the same log folder, keep every message; while it is
# down lakehouse reports it as unreachable.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $node = lh_node('harness');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

# A node of our own, so that killing it does not disturb the shared one.
my $dir = PostgreSQL::Test::Utils::tempdir('kafka');
my $port = lh_free_port_pair();
my $brokers = (split /\n/, lh_kafka('start', $dir, '--port', $port))[-1];
is($brokers, "127.0.0.1:$port", 'start prints the bootstrap address');

my $topic = lh_unique_name('harness');
my $partitions = 1 + int(rand(3));
lh_create_topic($dir, $topic, $partitions);

sub publish_round
{
	my ($tag) = @_;
	my %n;
	for my $p (0 .. $partitions - 1)
	{
		$n{$p} = 1 + int(rand(40));
		lh_produce($brokers, $topic, $p, $n{$p}, $tag);
	}
	return \%n;
}

sub highs
{
	my $wm = lh_watermarks($node, $topic, $brokers);
	return { map { $_ => $wm->{$_}[1] } keys %$wm };
}

my %expected;
my $round = publish_round('before-kill');
$expected{$_} += $round->{$_} for keys %$round;
is_deeply(highs(), \%expected, 'watermarks match what was published');

# --- kill -9: the node is gone, lakehouse says so, and a start on the same log recovers.
lh_kafka('kill', $dir);
my ($stdout, $stderr);
my $status_ok = IPC::Run::run([ lh_top() . '/scripts/kafka', 'status', $dir ], '>', \$stdout, '2>', \$stderr);
ok(!$status_ok, 'status reports the killed node as not running');
my ($rc, $out, $err) = $node->psql('postgres',
	"SET lakehouse.request_timeout = '2s'; SELECT * FROM lakehouse.kafka_watermarks('$topic', '$brokers')");
like($err, qr/could not get metadata from Kafka brokers/, 'a killed broker is reported as unreachable');

lh_kafka('start', $dir);
is_deeply(highs(), \%expected, 'after kill -9 and start on the same log: every message is still there');

$round = publish_round('after-kill');
$expected{$_} += $round->{$_} for keys %$round;
is_deeply(highs(), \%expected, 'the restarted node takes new messages at the right offsets');

# --- Clean stop and start.
lh_kafka('stop', $dir);
$status_ok = IPC::Run::run([ lh_top() . '/scripts/kafka', 'status', $dir ], '>', \$stdout, '2>', \$stderr);
ok(!$status_ok, 'status reports the stopped node as not running');
lh_kafka('start', $dir);
is_deeply(highs(), \%expected, 'after a clean stop and start: every message is still there');

lh_kafka('remove', $dir);
ok(!-e "$dir/server.properties", 'remove deletes the node folder');

done_testing();
