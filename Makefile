# Builds and installs the lakehouse extension with PGXS; `make installcheck` runs the
# pg_regress suite on a temporary instance that preloads lakehouse (see test/regress.conf).
EXTENSION = lakehouse
EXTVERSION = $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = lakehouse
OBJS = \
	src/lakehouse.o \
	src/guc.o \
	src/launcher.o \
	src/kafka_client.o \
	src/kafka_queries.o \
	src/message_check.o \
	src/sink.o \
	src/batch_writer.o \
	src/offsets.o \
	src/stream_worker.o

# Install and upgrade scripts are picked up by name, so a new version needs no edit here.
DATA = $(wildcard sql/$(EXTENSION)--*.sql)

PG_CPPFLAGS = -I$(srcdir)/src
# -Wextra on top of the server's flags; PostgreSQL's own headers trip these three.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers
ifeq ($(WERROR),1)
PG_CFLAGS += -Werror
endif
SHLIB_LINK = -lrdkafka

REGRESS = extension gucs kafka_errors upgrade
# scripts/test passes its own config (with the scratch broker's address) and output folder.
REGRESS_CONF ?= $(CURDIR)/test/regress.conf
REGRESS_OUTDIR ?= $(CURDIR)/results-regress
REGRESS_OPTS = --temp-config=$(REGRESS_CONF) --temp-instance=$(REGRESS_OUTDIR)/tmp_instance \
	--outputdir=$(REGRESS_OUTDIR) --inputdir=$(CURDIR)

EXTRA_CLEAN = results-regress

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
