/*
 * fuzz_json_fast.c: a libFuzzer target for the fast JSON reader (src/producer/json_fast.c)
 * with jansson as the oracle: whatever the reader reads, json_loadb must read too, into
 * an equal value. Not part of `make check` (it runs until stopped); build and run with
 *
 *   make fuzz_json_fast && ./fuzz_json_fast -max_total_time=600 corpus/
 *
 * (needs clang and libclang-rt-14-dev). test_json_fast.c checks the same property on a
 * fixed set of mutants on every test run.
 */
#include <stdint.h>
#include <stdlib.h>

#include "json_fast.h"

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t	   *fast = jf_load_object((const char *) data, size);

	if (fast != NULL)
	{
		json_t	   *ref = json_loadb((const char *) data, size, JSON_DECODE_ANY, NULL);

		if (ref == NULL || !json_equal(fast, ref))
			abort();
		json_decref(ref);
	}
	json_decref(fast);
	return 0;
}
