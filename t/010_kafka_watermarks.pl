# lakehouse.kafka_watermarks() reads a real Apache Kafka: per partition the low and high
# watermarks match what this test published and deleted; settings from
# lakehouse.kafka_config reach the client without leaking; a dead broker gives a bounded,
# cancellable error.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();    # partitions, messages and the cut below; LAKEHOUSE_TEST_SEED replays a run
my $node = lh_node('watermarks');
$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

# --- Scenario: a topic with a random number of partitions and messages per partition.
my $topic = lh_unique_name('wm');
my $partitions = 2 + int(rand(3));
lh_create_topic(lh_kafka_dir(), $topic, $partitions);
my %published;
for my $p (0 .. $partitions - 1)
{
	$published{$p} = int(rand(60));
	lh_produce($brokers, $topic, $p, $published{$p}, 'wm');
}
note("published per partition: "
	  . join(', ', map { "$_=$published{$_}" } sort keys %published));

my ($rc, $out, $err);
my $wm = lh_watermarks($node, $topic);
is(scalar(keys %$wm), $partitions, "one row per partition ($partitions)");
for my $p (0 .. $partitions - 1)
{
	is_deeply($wm->{$p}, [ 0, $published{$p} ],
		"partition $p: low 0, high $published{$p} (messages published)");
}

# The brokers argument overrides lakehouse.brokers.
$node->safe_psql('postgres', "ALTER SYSTEM SET lakehouse.brokers = '127.0.0.1:1'");
$node->reload;
ok($node->poll_query_until('postgres', "SELECT current_setting('lakehouse.brokers') = '127.0.0.1:1'"),
	'the reload set lakehouse.brokers to a dead broker');
($rc, $out, $err) = $node->psql('postgres',
	"SET lakehouse.request_timeout = '1s'; SELECT * FROM lakehouse.kafka_watermarks('$topic')");
like($err, qr/could not get metadata from Kafka brokers "127\.0\.0\.1:1"/,
	'without the argument the call goes to the dead broker of the setting');
is_deeply(lh_watermarks($node, $topic, $brokers), $wm, 'explicit brokers argument wins over the setting');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET lakehouse.brokers');
$node->reload;
ok($node->poll_query_until('postgres', "SELECT current_setting('lakehouse.brokers') = '$brokers'"),
	'the reset brought lakehouse.brokers back to the test broker');

# --- Deleting records moves the low watermark, and only on that partition.
my ($busy) = sort { $published{$b} <=> $published{$a} } keys %published;
$busy //= 0;
if ($published{$busy} == 0)
{
	lh_produce($brokers, $topic, $busy, 10, 'wm-extra');
	$published{$busy} = 10;
}
my $cut = 1 + int(rand($published{$busy}));
lh_kafka('delete-records', lh_kafka_dir(), $topic, $busy, $cut);
$wm = lh_watermarks($node, $topic);
is_deeply($wm->{$busy}, [ $cut, $published{$busy} ],
	"partition $busy after delete-records to $cut: low $cut, high $published{$busy}");
for my $p (grep { $_ != $busy } 0 .. $partitions - 1)
{
	is($wm->{$p}[0], 0, "partition $p: low watermark untouched");
}

# --- lakehouse.kafka_config reaches the client; a bad property is named, a secret is not.
$node->safe_psql('postgres',
	"ALTER SYSTEM SET lakehouse.kafka_config = 'sasl.password=hunter2-secret; no.such.property=1'");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT current_setting('lakehouse.kafka_config') LIKE '%no.such.property%'"),
	'the reload set the bad lakehouse.kafka_config');
($rc, $out, $err) =
  $node->psql('postgres', "SELECT * FROM lakehouse.kafka_watermarks('$topic')");
isnt($rc, 0, 'an unknown librdkafka property fails the call');
like($err, qr/invalid Kafka client property "no\.such\.property" in lakehouse\.kafka_config/,
	'error names the bad property');
unlike($err, qr/hunter2/, 'error does not show secret values');

$node->safe_psql('postgres',
	"ALTER SYSTEM SET lakehouse.kafka_config = ' socket.timeout.ms = 15000 ;client.rack=rack-a; '");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT current_setting('lakehouse.kafka_config') LIKE '%rack-a%'"),
	'the reload replaced the bad lakehouse.kafka_config with valid properties');
is_deeply(lh_watermarks($node, $topic), $wm, 'valid extra properties are accepted and the call works');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET lakehouse.kafka_config');
$node->reload;
ok($node->poll_query_until('postgres', "SELECT current_setting('lakehouse.kafka_config') = ''"),
	'lakehouse.kafka_config is reset');

# --- Granted non-superusers may read watermarks.
$node->safe_psql('postgres', q{
	CREATE ROLE wm_reader LOGIN;
	GRANT USAGE ON SCHEMA lakehouse TO wm_reader;
	GRANT EXECUTE ON FUNCTION lakehouse.kafka_watermarks(text, text) TO wm_reader;
});
my $as_reader = $node->safe_psql('postgres',
	"SET ROLE wm_reader; SELECT sum(high) FROM lakehouse.kafka_watermarks('$topic')");
my $total = 0;
$total += $published{$_} for keys %published;
is($as_reader, $total, 'granted role reads the same watermarks');

# --- A dead broker: an error within lakehouse.request_timeout, never a hang.
($rc, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '60s'; SET lakehouse.request_timeout = '1s';"
	  . " SELECT * FROM lakehouse.kafka_watermarks('$topic', '127.0.0.1:1')");
like($err, qr/could not get metadata from Kafka brokers "127\.0\.0\.1:1" within 1000 ms/,
	'unreachable broker: our error, not the statement timeout');
like($err, qr/HINT:\s+Check that the brokers are running/, 'unreachable broker: hint says what to check');

# Cancel works while the call waits on a dead broker.
($rc, $out, $err) = $node->psql('postgres',
	"SET lakehouse.request_timeout = '10min'; SET statement_timeout = '1s';"
	  . " SELECT * FROM lakehouse.kafka_watermarks('$topic', '127.0.0.1:1')");
like($err, qr/canceling statement due to statement timeout/,
	'a waiting call is cancellable (statement_timeout fires)');

# --- A topic the broker does not know.
($rc, $out, $err) = $node->psql('postgres',
	"SELECT * FROM lakehouse.kafka_watermarks('" . lh_unique_name('missing') . "')");
like($err, qr/ERROR:\s+Kafka topic "missing_\w+" does not exist/, 'unknown topic is a clear error');

# Nothing leaked: the backend still answers after all those errors.
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'backend healthy after errors');

done_testing();
