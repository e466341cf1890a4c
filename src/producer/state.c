/*
 * state.c: the state file of the live mode. Format: one line, "last_event_id=" then
 * the SSE id verbatim (EventStreams ids are one-line JSON), then "\n". A key name
 * rather than a bare id so the format can grow without guessing.
 */
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATE_KEY "last_event_id="
#define STATE_MAX (64 * 1024)

char *
state_load(const char *path, int *missing, char *err, size_t errlen)
{
	FILE	   *f = fopen(path, "rb");
	char	   *buf;
	size_t		n;
	char	   *nl;

	*missing = 0;
	if (f == NULL)
	{
		if (errno == ENOENT)
			*missing = 1;
		else
			snprintf(err, errlen, "cannot open state file %s: %s", path, strerror(errno));
		return NULL;
	}
	buf = malloc(STATE_MAX + 1);
	n = fread(buf, 1, STATE_MAX, f);
	fclose(f);
	buf[n] = '\0';
	nl = strchr(buf, '\n');
	if (strncmp(buf, STATE_KEY, strlen(STATE_KEY)) != 0 || nl == NULL ||
		memchr(buf, '\0', n) != NULL || memchr(buf, '\r', n) != NULL)
	{
		snprintf(err, errlen, "state file %s is not a lakehouse-producer state file "
				 "(expected one line \"%s<id>\")", path, STATE_KEY);
		free(buf);
		return NULL;
	}
	*nl = '\0';
	memmove(buf, buf + strlen(STATE_KEY), strlen(buf + strlen(STATE_KEY)) + 1);
	return buf;
}

/* fsync of the folder makes the rename itself durable. */
static int
fsync_dir_of(const char *path)
{
	char	   *copy = strdup(path);
	int			fd = open(dirname(copy), O_RDONLY);
	int			rc = 0;

	free(copy);
	if (fd < 0)
		return -1;
	if (fsync(fd) != 0 && errno != EINVAL)
		rc = -1;
	close(fd);
	return rc;
}

int
state_save(const char *path, const char *id, char *err, size_t errlen)
{
	size_t		tmplen = strlen(path) + 5;
	char	   *tmp = malloc(tmplen);
	int			fd;
	FILE	   *f;
	int			rc = -1;

	if (strchr(id, '\n') || strchr(id, '\r'))
	{
		snprintf(err, errlen, "an SSE id with a line break cannot be saved");
		free(tmp);
		return -1;
	}
	snprintf(tmp, tmplen, "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
	{
		snprintf(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		free(tmp);
		return -1;
	}
	f = fdopen(fd, "wb");
	if (fprintf(f, "%s%s\n", STATE_KEY, id) < 0 || fflush(f) != 0 || fsync(fd) != 0)
		snprintf(err, errlen, "cannot write %s: %s", tmp, strerror(errno));
	else if (fclose(f) != 0)
	{
		f = NULL;
		snprintf(err, errlen, "cannot close %s: %s", tmp, strerror(errno));
	}
	else
	{
		f = NULL;
		if (rename(tmp, path) != 0)
			snprintf(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		else if (fsync_dir_of(path) != 0)
			snprintf(err, errlen, "cannot fsync the folder of %s: %s", path, strerror(errno));
		else
			rc = 0;
	}
	if (f)
		fclose(f);
	if (rc != 0)
		unlink(tmp);
	free(tmp);
	return rc;
}
