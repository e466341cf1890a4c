/*
 * worker_tx.h: one transaction at a time for lakehouse's background workers, and the SPI
 * calls made inside it (see worker_tx.c).
 */
#ifndef LAKEHOUSE_WORKER_TX_H
#define LAKEHOUSE_WORKER_TX_H

extern void lh_tx_begin(const char *activity);
extern void lh_tx_commit(void);

/* Runs a statement with parameters; raises on SPI failure. nulls uses ' ' and 'n'. */
extern uint64 lh_spi_run(const char *sql, int nargs, Oid *types, Datum *values, const char *nulls);
extern int64 lh_spi_int64(int row, int col, bool *isnull);
/* A column of the last result as text, copied into TopMemoryContext (NULL for NULL). */
extern char *lh_spi_text_top(int row, int col);
extern Datum lh_bytea_datum(const char *bytes, size_t len);

#endif
