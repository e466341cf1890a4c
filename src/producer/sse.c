/*
 * sse.c: incremental server-sent-events parser (see sse.h for the interface).
 *
 * The input is cut into lines as it arrives; a line is parsed when its terminator is
 * seen and an empty line dispatches the frame. Only the current line and the current
 * frame's fields are ever buffered, each bounded by max_event_size.
 */
#include "sse.h"

#include <stdlib.h>
#include <string.h>

/* What the current line has turned out to be, decided by its first byte. */
enum
{
	LINE_START = 0,				/* nothing read yet: an end of line here is a blank line */
	LINE_FIELD,					/* a field line, buffered in p->line */
	LINE_COMMENT				/* starts with ':', skipped without buffering */
};

static const unsigned char utf8_bom[3] = {0xEF, 0xBB, 0xBF};

static void
buf_clear(sse_buf *b)
{
	b->len = 0;
	if (b->bytes)
		b->bytes[0] = '\0';
}

static void
buf_free(sse_buf *b)
{
	free(b->bytes);
	b->bytes = NULL;
	b->len = b->cap = 0;
}

/* Appends n bytes, keeping a NUL after them. Returns false when memory runs out. */
static bool
buf_append(sse_buf *b, const char *bytes, size_t n)
{
	if (b->len + n + 1 > b->cap)
	{
		size_t		cap = b->cap ? b->cap : 64;
		char	   *grown;

		while (cap < b->len + n + 1)
			cap *= 2;
		grown = realloc(b->bytes, cap);
		if (grown == NULL)
			return false;
		b->bytes = grown;
		b->cap = cap;
	}
	if (n > 0)
		memcpy(b->bytes + b->len, bytes, n);
	b->len += n;
	b->bytes[b->len] = '\0';
	return true;
}

static bool
buf_set(sse_buf *b, const char *bytes, size_t n)
{
	buf_clear(b);
	return buf_append(b, bytes, n);
}

void
sse_init(sse_parser *p, size_t max_event_size, sse_event_fn on_event, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->max_event_size = max_event_size ? max_event_size : SSE_DEFAULT_MAX_EVENT_SIZE;
	p->on_event = on_event;
	p->arg = arg;
	p->retry_ms = -1;
}

/* Forgets the current frame; the last event id is not part of it and stays. */
static void
reset_frame(sse_parser *p)
{
	buf_clear(&p->data);
	buf_clear(&p->type);
	p->frame_bytes = 0;
	p->oversized = false;
	p->frame_has_id = false;
}

static void
reset_line(sse_parser *p)
{
	buf_clear(&p->line);
	p->line_kind = LINE_START;
	p->line_overflow = false;
}

/*
 * Counts bytes against the frame's bound. Once the frame is over it, the data read
 * so far is dropped at once, so memory stays bounded however long the frame runs on.
 */
static void
count_frame_bytes(sse_parser *p, size_t n)
{
	p->frame_bytes = (p->frame_bytes > (size_t) -1 - n) ? (size_t) -1 : p->frame_bytes + n;
	if (p->frame_bytes > p->max_event_size && !p->oversized)
	{
		p->oversized = true;
		buf_clear(&p->data);
	}
}

/* The blank line that ends a frame: hand the event over, or drop an empty one. */
static int
dispatch(sse_parser *p)
{
	sse_event	ev;
	int			rc = 0;

	/* The id settles at every blank line, dispatched or not, as the rules say. */
	if (p->frame_has_id &&
		!buf_set(&p->settled_id, p->last_id.bytes ? p->last_id.bytes : "", p->last_id.len))
		return SSE_ERR_NOMEM;

	ev.type = p->type.len > 0 ? p->type.bytes : "message";
	ev.id = p->frame_has_id ? sse_last_id(p) : NULL;
	ev.last_id = sse_last_id(p);
	ev.frame_bytes = p->frame_bytes;
	ev.oversized = p->oversized;

	if (p->oversized)
	{
		/* Reported even if it held no data: the caller must learn something was lost. */
		ev.data = NULL;
		ev.data_len = 0;
		rc = p->on_event(&ev, p->arg);
	}
	else if (p->data.len > 0)
	{
		/*
		 * Every data line appended a "\n"; the last one is not part of the data. A
		 * frame whose only data line is "data:" thus dispatches "" while a frame with
		 * no data line dispatches nothing, as the SSE rules say.
		 */
		p->data.len--;
		p->data.bytes[p->data.len] = '\0';
		ev.data = p->data.bytes;
		ev.data_len = p->data.len;
		rc = p->on_event(&ev, p->arg);
	}
	reset_frame(p);
	return rc;
}

/* Only digits, as the rules require; anything else (or an overflow) is ignored. */
static void
set_retry(sse_parser *p, const char *value, size_t len)
{
	long long	ms = 0;
	size_t		i;

	if (len == 0)
		return;
	for (i = 0; i < len; i++)
	{
		if (value[i] < '0' || value[i] > '9')
			return;
		if (ms > (9223372036854775807LL - 9) / 10)
			return;
		ms = ms * 10 + (value[i] - '0');
	}
	p->retry_ms = ms;
}

static bool
field_is(const char *name, size_t name_len, const char *literal)
{
	return name_len == strlen(literal) && memcmp(name, literal, name_len) == 0;
}

/* Parses one complete field line (no terminator) into the frame's buffers. */
static int
process_field(sse_parser *p, const char *line, size_t len)
{
	const char *colon = memchr(line, ':', len);
	const char *value;
	size_t		name_len;
	size_t		value_len;

	if (colon)
	{
		name_len = (size_t) (colon - line);
		value = colon + 1;
		value_len = len - name_len - 1;
		if (value_len > 0 && value[0] == ' ')
		{
			value++;
			value_len--;
		}
	}
	else
	{
		/* A field name alone means the field with an empty value. */
		name_len = len;
		value = "";
		value_len = 0;
	}

	if (field_is(line, name_len, "data"))
	{
		if (p->oversized)
			return 0;
		if (!buf_append(&p->data, value, value_len) || !buf_append(&p->data, "\n", 1))
			return SSE_ERR_NOMEM;
	}
	else if (field_is(line, name_len, "event"))
	{
		if (!buf_set(&p->type, value, value_len))
			return SSE_ERR_NOMEM;
	}
	else if (field_is(line, name_len, "id"))
	{
		/* An id holding NUL could not be sent back in a header, so the rules ignore it. */
		if (memchr(value, '\0', value_len) != NULL)
			return 0;
		if (!buf_set(&p->last_id, value, value_len))
			return SSE_ERR_NOMEM;
		p->frame_has_id = true;
	}
	else if (field_is(line, name_len, "retry"))
		set_retry(p, value, value_len);
	/* Any other field is ignored, as the rules say. */
	return 0;
}

/* A line terminator was read (CR, LF, or the CR of a CRLF). */
static int
end_line(sse_parser *p)
{
	int			rc = 0;

	switch (p->line_kind)
	{
		case LINE_START:
			rc = dispatch(p);
			break;
		case LINE_FIELD:
			count_frame_bytes(p, 1);
			/* A line cut short at the bound is incomplete: parsing it could mislead. */
			if (!p->line_overflow)
				rc = process_field(p, p->line.bytes, p->line.len);
			break;
		case LINE_COMMENT:
			break;
	}
	reset_line(p);
	return rc;
}

/* A run of bytes holding no CR or LF, part of the current line. */
static int
take_line_bytes(sse_parser *p, const char *bytes, size_t n)
{
	if (p->line_kind == LINE_START)
		p->line_kind = (bytes[0] == ':') ? LINE_COMMENT : LINE_FIELD;
	if (p->line_kind == LINE_COMMENT)
		return 0;

	count_frame_bytes(p, n);
	if (p->line_overflow)
		return 0;
	if (p->line.len + n > p->max_event_size)
	{
		p->line_overflow = true;
		buf_clear(&p->line);
		return 0;
	}
	return buf_append(&p->line, bytes, n) ? 0 : SSE_ERR_NOMEM;
}

/* The line splitter, for input past any leading BOM. */
static int
feed_lines(sse_parser *p, const char *bytes, size_t len)
{
	size_t		i = 0;

	while (i < len)
	{
		char		c = bytes[i];
		size_t		j;
		int			rc;

		if (p->after_cr)
		{
			/* The LF of a CRLF, maybe in the next chunk: that line has already ended. */
			p->after_cr = false;
			if (c == '\n')
			{
				i++;
				continue;
			}
		}
		if (c == '\r' || c == '\n')
		{
			p->after_cr = (c == '\r');
			i++;
			rc = end_line(p);
			if (rc != 0)
				return rc;
			continue;
		}
		for (j = i; j < len && bytes[j] != '\r' && bytes[j] != '\n'; j++)
			;
		rc = take_line_bytes(p, bytes + i, j - i);
		if (rc != 0)
			return rc;
		i = j;
	}
	return 0;
}

int
sse_feed(sse_parser *p, const char *bytes, size_t len)
{
	size_t		i = 0;

	/* One UTF-8 BOM at the very start of a stream is skipped, even if split. */
	while (!p->bom_done && i < len)
	{
		if ((unsigned char) bytes[i] == utf8_bom[p->bom_matched])
		{
			i++;
			if (++p->bom_matched == sizeof(utf8_bom))
				p->bom_done = true;
			continue;
		}
		p->bom_done = true;
		if (p->bom_matched > 0)
		{
			/* Not a BOM after all: the bytes held back are ordinary input. */
			int			rc = feed_lines(p, (const char *) utf8_bom, p->bom_matched);

			if (rc != 0)
				return rc;
		}
	}
	return feed_lines(p, bytes + i, len - i);
}

size_t
sse_finish(sse_parser *p)
{
	size_t		discarded = p->frame_bytes;

	/* A BOM prefix never completed is input that was never parsed either. */
	if (!p->bom_done)
		discarded += p->bom_matched;
	reset_line(p);
	reset_frame(p);
	/*
	 * A cut-off frame's id goes with the frame. buf_set cannot fail here: the settled
	 * value was copied from last_id's buffer, whose capacity never shrinks.
	 */
	if (p->last_id.len != p->settled_id.len ||
		(p->last_id.len > 0 && memcmp(p->last_id.bytes, p->settled_id.bytes, p->last_id.len) != 0))
		buf_set(&p->last_id, p->settled_id.bytes ? p->settled_id.bytes : "", p->settled_id.len);
	p->after_cr = false;
	p->bom_matched = 0;
	p->bom_done = false;
	return discarded;
}

void
sse_free(sse_parser *p)
{
	buf_free(&p->line);
	buf_free(&p->data);
	buf_free(&p->type);
	buf_free(&p->last_id);
	buf_free(&p->settled_id);
}

const char *
sse_last_id(const sse_parser *p)
{
	return p->last_id.bytes ? p->last_id.bytes : "";
}

bool
sse_set_last_id(sse_parser *p, const char *id, size_t len)
{
	sse_buf		copy = {NULL, 0, 0};
	sse_buf		settled = {NULL, 0, 0};

	if (len > p->max_event_size || memchr(id, '\0', len) != NULL)
		return false;
	/* Build the copies first so a failed allocation leaves the old id in place. */
	if (!buf_append(&copy, id, len) || !buf_append(&settled, id, len))
	{
		buf_free(&copy);
		buf_free(&settled);
		return false;
	}
	buf_free(&p->last_id);
	buf_free(&p->settled_id);
	p->last_id = copy;
	p->settled_id = settled;
	return true;
}

long long
sse_retry_ms(const sse_parser *p)
{
	return p->retry_ms;
}
