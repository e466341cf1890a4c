/*
 * guc.h: the lakehouse.* settings, defined once in guc.c and read everywhere else.
 */
#ifndef LAKEHOUSE_GUC_H
#define LAKEHOUSE_GUC_H

extern char *lakehouse_brokers;
extern char *lakehouse_database;
extern char *lakehouse_allowed_brokers;
extern int	lakehouse_max_batch_messages;
extern int	lakehouse_max_batch_ms;
extern int	lakehouse_batch_linger_ms;
extern int	lakehouse_max_batch_bytes_kb;
extern char *lakehouse_kafka_config;
extern int	lakehouse_watermark_s;
extern int	lakehouse_session_gap_s;
extern int	lakehouse_request_timeout_ms;
extern int	lakehouse_max_message_bytes;
extern bool lakehouse_commit_to_kafka;
extern int	lakehouse_prefetch_memory_kb;
extern int	lakehouse_silver_naptime_ms;
extern bool lakehouse_silver_synchronous_commit;
extern bool lakehouse_bronze_writeback;

/* lakehouse.test_fault: faults the crash tests place on purpose (never set in production). */
typedef enum LhTestFault
{
	LH_FAULT_NONE,
	LH_FAULT_PAUSE_BEFORE_COMMIT,
	LH_FAULT_IGNORE_DATA_CHECKPOINT
} LhTestFault;

extern int	lakehouse_test_fault;

extern void lakehouse_define_gucs(void);

#endif
