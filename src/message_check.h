/*
 * message_check.h: decides whether a Kafka message can become a bronze row, and if not,
 * why (the reason stored with it in lakehouse.dead_letters).
 */
#ifndef LAKEHOUSE_MESSAGE_CHECK_H
#define LAKEHOUSE_MESSAGE_CHECK_H

/* Deepest JSON nesting accepted; deeper input would exhaust the parser's stack. */
#define LH_MAX_JSON_DEPTH 512

/*
 * NULL when the value and key pass the cheap checks; otherwise a palloc'd, human-readable
 * reason. max_bytes bounds the value size.
 */
extern char *lh_message_problem(const char *value, size_t value_len,
								const char *key, size_t key_len, size_t max_bytes);

/* NULL when the value is JSON that jsonb accepts; otherwise the parser's reason. */
extern char *lh_json_problem(const char *value, size_t value_len);

#endif
