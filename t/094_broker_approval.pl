# lakehouse.kafka_config may hold credentials (a SASL password), and operators
# (lakehouse_admin) name brokers in SQL calls. Only brokers a superuser approved
# (lakehouse.brokers, lakehouse.allowed_brokers) receive kafka_config, and only superusers
# may name other brokers at all (issue 10, item 5). Whether kafka_config was applied to a
# client is seen through a property whose value librdkafka refuses when it is applied:
# every client built with it fails at once, every client built without it works.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

my $brokers = lh_brokers();
lh_seed();
# The same broker under another name, which no setting lists.
my ($host, $port) = $brokers =~ /^([^:,]+):(\d+)$/ or die "expected one host:port in LAKEHOUSE_TEST_BROKERS, got $brokers";
my $alias = ($host eq 'localhost' ? '127.0.0.1' : 'localhost') . ":$port";
my $node = lh_node('approval');
$node->safe_psql('postgres', q{CREATE EXTENSION lakehouse;
	CREATE ROLE regress_operator LOGIN; GRANT lakehouse_admin TO regress_operator});
my $topic = lh_unique_name('approval');
lh_create_topic(lh_kafka_dir(), $topic, 2);
lh_produce($brokers, $topic, 0, 10, 'approval');

# Without kafka_config, the alias works for a superuser and is refused to an operator
# (who reaches the broker calls through create_stream(), SECURITY DEFINER: the check is
# on the caller, not on the function's owner).
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.kafka_watermarks('$topic', '$alias')"), '2',
	'a superuser may name any broker');
my ($ret, $out, $err) = $node->psql('postgres', "SET SESSION AUTHORIZATION regress_operator;
	SELECT lakehouse.create_stream('evil', '$topic', '$alias')");
like($err, qr/Kafka brokers "\Q$alias\E" are not approved/, 'an operator may not create a stream on a broker no setting lists');
($ret, $out, $err) = $node->psql('postgres', "SET SESSION AUTHORIZATION regress_operator;
	SELECT lakehouse.create_stream('evil', '$topic', '$alias', start_from => '2026-01-01 00:00+00')");
like($err, qr/Kafka brokers "\Q$alias\E" are not approved/, 'nor with a start time (the offsets-by-time call)');
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.streams"), '0', 'and no stream was created');
$node->safe_psql('postgres', "SET SESSION AUTHORIZATION regress_operator;
	SELECT lakehouse.create_stream('fine', '$topic'); SELECT lakehouse.drop_stream('fine', true)");
pass('an operator may create a stream on lakehouse.brokers');

# kafka_config with a value librdkafka refuses when it is applied.
$node->safe_psql('postgres', q{ALTER SYSTEM SET lakehouse.kafka_config = 'socket.timeout.ms=soon'});
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT current_setting('lakehouse.kafka_config') LIKE 'socket.timeout.ms=%'}),
	'kafka_config is set');
($ret, $out, $err) = $node->psql('postgres', "SELECT count(*) FROM lakehouse.kafka_watermarks('$topic')");
like($err, qr/invalid Kafka client property "socket.timeout.ms" in lakehouse.kafka_config/,
	'lakehouse.brokers receives kafka_config (the fault lands)');
my $log_offset = -s $node->logfile;
is($node->safe_psql('postgres', "SELECT count(*) FROM lakehouse.kafka_watermarks('$topic', '$alias')"), '2',
	'a broker no setting lists does not receive it');
ok($node->wait_for_log(qr/lakehouse.kafka_config is not applied to Kafka brokers "\Q$alias\E"/, $log_offset),
	'and the server log says so');

# A stream on the alias, created by a superuser, ingests without kafka_config.
$node->safe_psql('postgres', "SELECT lakehouse.create_stream('plain', '$topic', '$alias')");
ok(lh_wait_caught_up($node, 'plain', $topic, $alias), 'a stream on an unlisted broker ingests without kafka_config');

# Approved by a superuser, the alias receives kafka_config, and operators may name it.
$node->safe_psql('postgres', "ALTER SYSTEM SET lakehouse.allowed_brokers = ' $alias '");
$node->reload;
ok($node->poll_query_until('postgres', qq{SELECT current_setting('lakehouse.allowed_brokers') = ' $alias '}),
	'allowed_brokers is set');
($ret, $out, $err) = $node->psql('postgres', "SET SESSION AUTHORIZATION regress_operator;
	SELECT lakehouse.create_stream('evil', '$topic', '$alias')");
like($err, qr/invalid Kafka client property "socket.timeout.ms"/, 'an approved broker receives kafka_config');
unlike($err, qr/not approved/, 'and an operator may name it');
is($node->safe_psql('postgres', "SELECT count(*) FROM pg_settings WHERE name = 'lakehouse.allowed_brokers' AND context = 'superuser'"), '1',
	'allowed_brokers is a superuser setting');
($ret, $out, $err) = $node->psql('postgres', "SET SESSION AUTHORIZATION regress_operator; SET lakehouse.allowed_brokers = 'x:1'");
like($err, qr/permission denied to set parameter "lakehouse.allowed_brokers"/, 'which an operator cannot change');

$node->stop;
done_testing();
