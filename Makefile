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
	src/writeback.o \
	src/worker_tx.o \
	src/stream_catalog.o \
	src/batch_ledger.o \
	src/stream_worker.o \
	src/silver_worker.o \
	src/silver_rights.o

# Install and upgrade scripts are picked up by name, so a new version needs no edit here.
DATA = $(wildcard sql/$(EXTENSION)--*.sql)

PG_CPPFLAGS = -I$(srcdir)/src
# -Wextra on top of the server's flags; PostgreSQL's own headers trip these three.
PG_CFLAGS = -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers
ifeq ($(WERROR),1)
PG_CFLAGS += -Werror
endif
SHLIB_LINK = -lrdkafka

REGRESS = extension gucs kafka_errors upgrade silver gold checks streams crash
# scripts/test passes its own config (with the scratch broker's address) and output folder.
REGRESS_CONF ?= $(CURDIR)/test/regress.conf
REGRESS_OUTDIR ?= $(CURDIR)/results-regress
REGRESS_OPTS = --temp-config=$(REGRESS_CONF) --temp-instance=$(REGRESS_OUTDIR)/tmp_instance \
	--outputdir=$(REGRESS_OUTDIR) --inputdir=$(CURDIR)

# Isolation tests (specs/*.spec): what two sessions can do at once, on their own instance.
ISOLATION = silver_concurrent pipeline_concurrent
ISOLATION_OPTS = --temp-config=$(REGRESS_CONF) --temp-instance=$(REGRESS_OUTDIR)/tmp_instance_isolation \
	--outputdir=$(REGRESS_OUTDIR)/isolation --inputdir=$(CURDIR)

EXTRA_CLEAN = results-regress

# --- lakehouse-producer (begin)
# The command-line producer (src/producer/): a plain C99 program, not part of the
# server module. `all` is named first so it stays the default goal. make install puts
# the binary into pg_config's bindir through SCRIPTS_built.
PRODUCER = src/producer/lakehouse-producer
PRODUCER_SRCS = $(filter-out %/test_%,$(wildcard src/producer/*.c))
PRODUCER_HDRS = $(wildcard src/producer/*.h)
PRODUCER_CFLAGS = -std=c99 -Wall -Wextra -O2 -D_POSIX_C_SOURCE=200809L
ifeq ($(WERROR),1)
PRODUCER_CFLAGS += -Werror
endif
PRODUCER_LIBS = -lrdkafka -lcurl -ljansson -lpthread
# Packagers' flags (scripts/package passes dpkg-buildflags' hardening flags here); CFLAGS
# itself is the server's, from PGXS.
PRODUCER_EXTRA_CFLAGS ?=
PRODUCER_LDFLAGS ?=

all: $(PRODUCER)

$(PRODUCER): $(PRODUCER_SRCS) $(PRODUCER_HDRS)
	$(CC) $(PRODUCER_CFLAGS) $(PRODUCER_EXTRA_CFLAGS) -o $@ $(PRODUCER_SRCS) $(PRODUCER_LDFLAGS) $(PRODUCER_LIBS)

SCRIPTS_built = $(PRODUCER)
EXTRA_CLEAN += $(PRODUCER)

# pg_config's bindir (/usr/lib/postgresql/15/bin on Debian) is not on a user's PATH, so
# make install also links the producer into PRODUCER_LINK_DIR. A file there that is not a
# link is somebody else's and is left alone (with a warning). Packagers, who put the
# binary in /usr/bin themselves, turn the link off with PRODUCER_LINK_DIR= (empty).
PRODUCER_LINK_DIR ?= /usr/local/bin
PRODUCER_LINK = $(DESTDIR)$(PRODUCER_LINK_DIR)/lakehouse-producer

install: install-producer-link
uninstall: uninstall-producer-link
.PHONY: install-producer-link uninstall-producer-link

install-producer-link:
ifneq ($(PRODUCER_LINK_DIR),)
	@if [ -e '$(PRODUCER_LINK)' ] && [ ! -L '$(PRODUCER_LINK)' ]; then \
	  echo "warning: $(PRODUCER_LINK) exists and is not a link: left as it is; run lakehouse-producer as $(bindir)/lakehouse-producer" >&2; \
	else \
	  $(MKDIR_P) '$(DESTDIR)$(PRODUCER_LINK_DIR)' && \
	  ln -sfn '$(bindir)/lakehouse-producer' '$(PRODUCER_LINK)'; \
	fi
endif

uninstall-producer-link:
ifneq ($(PRODUCER_LINK_DIR),)
	@if [ -L '$(PRODUCER_LINK)' ] && [ "$$(readlink '$(PRODUCER_LINK)')" = '$(bindir)/lakehouse-producer' ]; then \
	  rm -f '$(PRODUCER_LINK)'; \
	fi
endif
# --- lakehouse-producer (end)

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS (Debian: autodepend off) does not know which headers an object reads: any header
# change rebuilds every object, so that no two objects disagree on a struct's layout.
$(OBJS) $(OBJS:.o=.bc): $(wildcard $(srcdir)/src/*.h)
