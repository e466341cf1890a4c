/*
 * sse.h: incremental parser for a server-sent-events (text/event-stream) body.
 *
 * lakehouse-producer feeds it whatever chunks libcurl hands over (or a recorded SSE
 * file); the parser calls back once per dispatched event. It follows the WHATWG
 * "Interpreting an event stream" rules: LF, CRLF and lone CR line endings, comment
 * lines, one optional space after the colon, fields without a colon, `retry:`, and a
 * last event id that persists across frames (the value to send as Last-Event-ID on
 * reconnect). Memory is bounded by max_event_size: an event that grows past it is
 * skipped and reported with the oversized flag set, never buffered whole.
 *
 * Bytes are passed through as they came; the parser does no UTF-8 decoding (the
 * contract check on the data rejects invalid UTF-8 later).
 */
#ifndef LAKEHOUSE_SSE_H
#define LAKEHOUSE_SSE_H

#include <stdbool.h>
#include <stddef.h>

/* Default bound on one event, 1 MiB: Kafka's default message.max.bytes is about that. */
#define SSE_DEFAULT_MAX_EVENT_SIZE ((size_t) 1 << 20)

/* sse_feed's return value when memory runs out; callbacks must not return it. */
#define SSE_ERR_NOMEM (-1)

/* One dispatched event. Pointers stay valid only for the duration of the callback. */
typedef struct sse_event
{
	const char *type;			/* event type, "message" when the frame had no `event:` */
	const char *id;				/* this frame's own id, NULL when it had no `id:` line */
	const char *last_id;		/* the parser's last event id after this frame; "" if none */
	const char *data;			/* `data:` lines joined by "\n", NUL-terminated; NULL when
								 * oversized */
	size_t		data_len;		/* bytes in data (data may itself contain NUL bytes) */
	bool		oversized;		/* the frame passed max_event_size and its data was dropped */
	size_t		frame_bytes;	/* bytes the frame's field lines took, one per line end */
} sse_event;

/*
 * Called per event. Return 0 to go on; any positive value stops sse_feed, which
 * returns it. The rest of that chunk is then not parsed: call sse_finish before
 * feeding the parser again.
 */
typedef int (*sse_event_fn) (const sse_event *event, void *arg);

/* A growable byte buffer, always NUL-terminated once allocated. Internal to sse.c. */
typedef struct sse_buf
{
	char	   *bytes;
	size_t		len;
	size_t		cap;
} sse_buf;

/*
 * Parser state, owned by the caller (on the stack or embedded in a bigger struct).
 * Fields are private: use the functions below.
 */
typedef struct sse_parser
{
	size_t		max_event_size;
	sse_event_fn on_event;
	void	   *arg;

	sse_buf		line;			/* the line being read, without its terminator */
	sse_buf		data;			/* data buffer of the current frame */
	sse_buf		type;			/* event type buffer of the current frame */
	sse_buf		last_id;		/* last event id buffer; survives frames */
	sse_buf		settled_id;		/* its value at the last blank line: what a reconnect sends */
	long long	retry_ms;		/* last valid `retry:` value, -1 if none was seen */

	size_t		frame_bytes;	/* bytes of field lines in the current frame */
	unsigned char line_kind;	/* start of line, field line or comment line */
	unsigned char bom_matched;	/* bytes of a leading UTF-8 BOM matched so far */
	bool		bom_done;		/* past the point where a BOM may appear */
	bool		after_cr;		/* last byte was CR: a following LF belongs to it */
	bool		line_overflow;	/* the current line passed max_event_size */
	bool		oversized;		/* the current frame passed max_event_size */
	bool		frame_has_id;	/* the current frame had a valid `id:` line */
} sse_parser;

/*
 * Prepares p. max_event_size 0 means SSE_DEFAULT_MAX_EVENT_SIZE. Allocates nothing
 * until bytes arrive, so it cannot fail.
 */
void		sse_init(sse_parser *p, size_t max_event_size, sse_event_fn on_event, void *arg);

/*
 * Parses len bytes. Returns 0, SSE_ERR_NOMEM, or the nonzero value a callback
 * returned. Chunks may split the stream anywhere, including between CR and LF.
 */
int			sse_feed(sse_parser *p, const char *bytes, size_t len);

/*
 * Ends the current stream (connection closed, file read to the end). As the SSE
 * rules say, an unfinished frame is discarded, not dispatched, its id included; the
 * return value is the number of its bytes that were discarded, so the caller can
 * warn. The last event id as of the last blank line and the retry value are kept, so
 * the parser is ready for the next connection's body.
 */
size_t		sse_finish(sse_parser *p);

/* Frees the buffers; p may be passed to sse_init again afterwards. */
void		sse_free(sse_parser *p);

/*
 * The last event id ("" when none). Within a frame it is the spec's "last event ID
 * buffer", set as soon as an id: line is read. sse_finish() sets it back to its value
 * at the last blank line (the spec's "last event ID string", which a reconnect sends as
 * Last-Event-ID), so the id of a frame cut off by a disconnect is forgotten with the
 * frame: resuming from it would skip that frame.
 */
const char *sse_last_id(const sse_parser *p);

/*
 * Sets the last event id, e.g. restored from a state file before the first
 * connection. Returns false (and changes nothing) when id holds a NUL byte, is too
 * long for max_event_size, or memory runs out.
 */
bool		sse_set_last_id(sse_parser *p, const char *id, size_t len);

/* The last valid `retry:` value in milliseconds, or -1 if the server sent none. */
long long	sse_retry_ms(const sse_parser *p);

#endif							/* LAKEHOUSE_SSE_H */
