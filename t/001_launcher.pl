# The module refuses to run unless preloaded, and its launcher is a well-behaved background
# worker: visible in pg_stat_activity, reloads on SIGHUP, restarts after SIGTERM, lets the
# server stop, and exits when the postmaster dies.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use LakehouseTest;

# --- Not preloaded: CREATE EXTENSION fails and says how to fix it.
my $plain = lh_node('not_preloaded', preload => 0);
my ($rc, $out, $err) = $plain->psql('postgres', 'CREATE EXTENSION lakehouse');
isnt($rc, 0, 'CREATE EXTENSION fails when lakehouse is not preloaded');
like($err, qr/lakehouse must be loaded via shared_preload_libraries/, 'error names the cause');
like($err, qr/HINT:\s+Add lakehouse to shared_preload_libraries/, 'hint says what to do');
is($plain->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'lakehouse'"),
	'0', 'nothing was installed');
$plain->stop;

# --- Preloaded: the launcher runs and is named.
my $node = lh_node('preloaded');
my $launcher_q =
  "SELECT pid FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher'";
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher'"),
	'launcher shows in pg_stat_activity as "lakehouse launcher"');
my $pid1 = $node->safe_psql('postgres', $launcher_q);
ok($node->log_contains('lakehouse launcher started'), 'launcher logs its start');
is($node->safe_psql('postgres',
		"SELECT wait_event FROM pg_stat_activity WHERE pid = $pid1"),
	'Extension', 'launcher idles on its latch');

$node->safe_psql('postgres', 'CREATE EXTENSION lakehouse');

# --- SIGHUP: reloads settings.
my $offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "lakehouse.max_batch_messages = 777\n");
$node->reload;
$node->wait_for_log(qr/lakehouse launcher reloaded its configuration/, $offset);
pass('launcher reloads its configuration on SIGHUP');
is($node->safe_psql('postgres', 'SHOW lakehouse.max_batch_messages'), '777',
	'reloaded setting is in force');

# --- SIGTERM: the launcher ends, and the postmaster starts a new one.
$node->safe_psql('postgres', "SELECT pg_terminate_backend($pid1)");
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher' AND pid <> $pid1"),
	'a terminated launcher is restarted');
my $pid2 = $node->safe_psql('postgres', $launcher_q);
ok(lh_process_gone($pid1), 'the terminated launcher process is gone');

# --- A fast shutdown is not held up by the launcher; the launcher comes back on start.
$offset = -s $node->logfile;
ok($node->stop('fast', fail_ok => 1), 'server stops in fast mode with the launcher running');
ok(lh_process_gone($pid2), 'launcher ended with the server');
$node->start;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'lakehouse launcher'"),
	'launcher starts again with the server');

# --- Postmaster death: the launcher notices and exits by itself.
my $pid3 = $node->safe_psql('postgres', $launcher_q);
$node->kill9;
ok(lh_wait_gone($pid3), 'launcher exits when the postmaster dies');

done_testing();
