/*
 * test_generate.c: unit tests for the synthetic recording (src/producer/generate.c),
 * printed as TAP. Every generated event must pass the contract, since tests count on
 * the generator for valid traffic, and the recording must look like the real stream:
 * field presence by type, the type mix, both time precisions, big integers,
 * non-ASCII titles, HTML, about 1 KB per event. Same seed, same bytes.
 */
#include <stdlib.h>

#include "contract.h"
#include "generate.h"
#include "tap.h"

#define N 5000

static bool
has(const json_t *ev, const char *a, const char *b)
{
	const json_t *v = json_object_get(ev, a);

	return b ? json_object_get(v, b) != NULL : v != NULL;
}

int
main(void)
{
	gen_state	g,
				g2;
	long		invalid = 0,
				shape_errors = 0,
				canaries = 0;
	long		types[4] = {0, 0, 0, 0};	/* edit, new, log, categorize */
	long		ms_dt = 0,
				s_dt = 0,
				big = 0,
				non_ascii = 0,
				html = 0,
				same = 0,
				shared_request = 0,
				no_rcid = 0;
	size_t		bytes = 0;
	char		first_reason[RC_REASON_MAX] = "";
	char		prev_request[64] = "";
	json_t	   *ids = json_object();

	gen_init(&g, 42);
	gen_init(&g2, 42);
	for (int i = 0; i < N; i++)
	{
		char	   *text = gen_event(&g);
		char	   *text2 = gen_event(&g2);
		rc_verdict	v;
		json_t	   *ev = json_loads(text, 0, NULL);
		const char *type = json_string_value(json_object_get(ev, "type"));
		const char *dt = json_string_value(json_object_get(json_object_get(ev, "meta"), "dt"));
		const char *req = json_string_value(json_object_get(json_object_get(ev, "meta"), "request_id"));

		same += strcmp(text, text2) == 0;
		bytes += strlen(text);
		if (!rc_validate(text, strlen(text), &v))
		{
			if (invalid++ == 0)
				snprintf(first_reason, sizeof(first_reason), "%s", v.reason);
		}
		canaries += v.canary;
		json_object_set_new(ids, json_string_value(json_object_get(json_object_get(ev, "meta"), "id")), json_true());
		if (strlen(dt) == 24)
			ms_dt++;
		else if (strlen(dt) == 20)
			s_dt++;
		if (json_object_get(ev, "id") == NULL)
			no_rcid++;
		else if (json_integer_value(json_object_get(ev, "id")) > 2147483647LL)
			big++;
		for (const unsigned char *p = (const unsigned char *) json_string_value(json_object_get(ev, "title")); *p; p++)
			if (*p >= 0x80)
			{
				non_ascii++;
				break;
			}
		if (strstr(json_string_value(json_object_get(ev, "parsedcomment")), "<a href="))
			html++;

		if (strcmp(type, "edit") == 0)
		{
			types[0]++;
			shape_errors += !(has(ev, "length", "old") && has(ev, "length", "new") &&
							  has(ev, "revision", "old") && has(ev, "revision", "new") &&
							  has(ev, "minor", NULL) && has(ev, "notify_url", NULL));
		}
		else if (strcmp(type, "new") == 0)
		{
			types[1]++;
			shape_errors += !(!has(ev, "length", "old") && has(ev, "length", "new") &&
							  !has(ev, "revision", "old") && has(ev, "revision", "new"));
		}
		else if (strcmp(type, "log") == 0)
		{
			types[2]++;
			shape_errors += !(has(ev, "log_id", NULL) && has(ev, "log_type", NULL) &&
							  has(ev, "log_action", NULL) && has(ev, "log_params", NULL) &&
							  has(ev, "log_action_comment", NULL) && !has(ev, "length", NULL) &&
							  !has(ev, "revision", NULL) && !has(ev, "minor", NULL) &&
							  !has(ev, "notify_url", NULL));
		}
		else if (strcmp(type, "categorize") == 0)
		{
			types[3]++;
			shape_errors += !(!has(ev, "length", NULL) && !has(ev, "revision", NULL) &&
							  !has(ev, "minor", NULL) && has(ev, "notify_url", NULL) &&
							  json_integer_value(json_object_get(ev, "namespace")) == 14);
			if (strcmp(prev_request, req) == 0)
				shared_request++;
		}
		else
			shape_errors++;
		snprintf(prev_request, sizeof(prev_request), "%s", req);
		json_decref(ev);
		free(text);
		free(text2);
	}

	if (!tap_is_int(invalid, 0, "every generated event passes rc_validate"))
		tap_diag("first failure: %s", first_reason);
	tap_is_int(canaries, 0, "no generated event is a canary");
	tap_is_int((long long) json_object_size(ids), N, "meta.id is unique per event");
	tap_is_int(same, N, "the same seed gives the same events, byte for byte");
	tap_is_int(shape_errors, 0, "field presence follows the event type");
	tap_ok(types[0] > N * 35 / 100 && types[0] < N * 55 / 100, "edit is about 45%% (%ld)", types[0]);
	tap_ok(types[3] > N * 35 / 100 && types[3] < N * 55 / 100, "categorize is about 45%% (%ld)", types[3]);
	tap_ok(types[2] > N * 3 / 100 && types[2] < N * 10 / 100, "log is about 6%% (%ld)", types[2]);
	tap_ok(types[1] > N * 2 / 100 && types[1] < N * 7 / 100, "new is about 4%% (%ld)", types[1]);
	tap_ok(shared_request > 0, "some categorize events share the request_id of the event before (%ld)", shared_request);
	tap_ok(ms_dt > 0 && s_dt > 0, "meta.dt has both millisecond (%ld) and second (%ld) precision", ms_dt, s_dt);
	tap_is_int(big, N - no_rcid, "rcids are past int32, as real ones are");
	tap_ok(no_rcid > 0 && no_rcid < types[2], "some log events have no rcid, as in the real stream (%ld)", no_rcid);
	tap_ok(non_ascii > N / 2, "most titles are not plain ASCII (%ld)", non_ascii);
	tap_ok(html > N / 2, "parsedcomment carries HTML (%ld)", html);
	tap_ok(bytes / N > 700 && bytes / N < 1600, "about 1 KB per event (%zu bytes on average)", bytes / N);

	gen_init(&g, 43);
	gen_init(&g2, 42);
	{
		char	   *a = gen_event(&g);
		char	   *b = gen_event(&g2);

		tap_ok(strcmp(a, b) != 0, "another seed gives other events");
		free(a);
		free(b);
	}
	json_decref(ids);
	return tap_done();
}
