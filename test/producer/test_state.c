/*
 * test_state.c: unit tests for the live mode's state file (src/producer/state.c),
 * printed as TAP: round trip, a first run without a file, a file that is not ours,
 * replacement leaving no temporary file behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "state.h"
#include "tap.h"

int
main(void)
{
	char		dir[] = "/tmp/lakehouse-state-XXXXXX";
	char		path[256],
				tmp[300];
	char		err[512];
	int			missing;
	char	   *id;
	const char *eventstreams_id =
		"[{\"topic\":\"eqiad.mediawiki.recentchange\",\"partition\":0,\"offset\":-1},"
		"{\"topic\":\"codfw.mediawiki.recentchange\",\"partition\":0,\"timestamp\":1772536525049}]";
	FILE	   *f;

	if (mkdtemp(dir) == NULL)
	{
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/state", dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);

	id = state_load(path, &missing, err, sizeof(err));
	tap_ok(id == NULL && missing, "no file: a first run, not an error");

	tap_is_int(state_save(path, eventstreams_id, err, sizeof(err)), 0, "saves an EventStreams id");
	id = state_load(path, &missing, err, sizeof(err));
	tap_is_str(id, eventstreams_id, "loads it back verbatim");
	free(id);
	tap_ok(access(tmp, F_OK) != 0, "no temporary file is left");

	tap_is_int(state_save(path, "second", err, sizeof(err)), 0, "replaces it");
	id = state_load(path, &missing, err, sizeof(err));
	tap_is_str(id, "second", "the new id is there");
	free(id);

	tap_is_int(state_save(path, "two\nlines", err, sizeof(err)), -1, "an id with a line break is refused");
	id = state_load(path, &missing, err, sizeof(err));
	tap_is_str(id, "second", "and the old state stays");
	free(id);

	f = fopen(path, "w");
	fputs("something else\n", f);
	fclose(f);
	id = state_load(path, &missing, err, sizeof(err));
	tap_ok(id == NULL && !missing, "a file that is not a state file is an error");
	tap_ok(strstr(err, "not a lakehouse-producer state file") != NULL, "with a clear message");

	snprintf(tmp, sizeof(tmp), "%s/nodir/state", dir);
	tap_is_int(state_save(tmp, "x", err, sizeof(err)), -1, "a missing folder is an error");

	unlink(path);
	rmdir(dir);
	return tap_done();
}
