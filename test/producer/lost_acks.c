/*
 * lost_acks.c: a librdkafka plugin that loses Kafka's acknowledgements on purpose, so
 * t/060_producer.pl can check the README's claim that the idempotent producer's own
 * retries add no copies, on the real broker and with the producer binary unchanged:
 *
 *   LAKEHOUSE_LOST_ACKS=3 lakehouse-producer ... \
 *       --kafka-config plugin.library.paths=test/producer/lost_acks.so
 *
 * The copy that matters is the one the broker has already written when the client
 * sends the batch again, and only a lost acknowledgement makes that happen: after a
 * refused request (an injected error) there is nothing to duplicate. librdkafka's mock
 * cluster cannot show it either: it checks sequence numbers only for producers with a
 * transactional.id and stores a resent batch again, enable.idempotence or not.
 *
 * How: librdkafka calls conf_init when plugin.library.paths names this file; it
 * installs a connect callback that routes every broker connection through a small
 * proxy (two threads per connection, one per direction). The proxy forwards Kafka
 * frames unchanged, except that it swallows the response to every
 * LAKEHOUSE_LOST_ACKS_EVERY-th ProduceRequest (default 2), LAKEHOUSE_LOST_ACKS times
 * in all, and closes the connection instead: the broker stored the batch, the client
 * never hears so and sends it again. With LAKEHOUSE_LOST_ACKS_LOG=FILE each swallowed
 * response is written down (topic, partition, the broker's error code and base
 * offset): the test's proof that the fault landed on a batch the broker had stored.
 *
 * Built as a shared object by the Makefile; not a test by itself.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <librdkafka/rdkafka.h>

#define API_PRODUCE 0
#define MAX_FRAME (256 * 1024 * 1024)
#define MAX_PENDING 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool configured;
static long produce_responses;	/* over every connection of the process */
static long drops_left;
static long drop_every = 2;
static char log_path[1024];

/* One proxied connection: our end of librdkafka's socket and the broker's socket. */
typedef struct proxy
{
	int			listener;
	int			client;
	int			broker;
	struct sockaddr_storage target;
	socklen_t	target_len;
	int			threads_left;	/* the last thread to end closes the sockets */
	int32_t		produce_ids[MAX_PENDING];	/* ProduceRequests awaiting a response */
	int			nproduce;
} proxy;

/* Kafka's protocol is big-endian. */
static uint16_t
get16(const unsigned char *p)
{
	return (uint16_t) ((p[0] << 8) | p[1]);
}

static uint32_t
get32(const unsigned char *p)
{
	return ((uint32_t) p[0] << 24) | ((uint32_t) p[1] << 16) | ((uint32_t) p[2] << 8) | p[3];
}

static bool
read_full(int fd, unsigned char *buf, size_t n)
{
	while (n > 0)
	{
		ssize_t		r = read(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		buf += r;
		n -= (size_t) r;
	}
	return true;
}

static bool
write_full(int fd, const unsigned char *buf, size_t n)
{
	while (n > 0)
	{
		ssize_t		r = write(fd, buf, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		buf += r;
		n -= (size_t) r;
	}
	return true;
}

/* One Kafka frame (the 4-byte size, then the body); NULL at the end of the stream. */
static unsigned char *
read_frame(int fd, size_t *len)
{
	unsigned char size[4];
	unsigned char *frame;
	uint32_t	n;

	if (!read_full(fd, size, 4))
		return NULL;
	n = get32(size);
	if (n < 4 || n > MAX_FRAME || (frame = malloc(n + 4)) == NULL)
		return NULL;
	memcpy(frame, size, 4);
	if (!read_full(fd, frame + 4, n))
	{
		free(frame);
		return NULL;
	}
	*len = n + 4;
	return frame;
}

static void
end_thread(proxy *p)
{
	bool		last;

	/* Wakes the other direction's thread out of its read. */
	shutdown(p->client, SHUT_RDWR);
	shutdown(p->broker, SHUT_RDWR);
	pthread_mutex_lock(&lock);
	last = --p->threads_left == 0;
	pthread_mutex_unlock(&lock);
	if (last)
	{
		close(p->client);
		close(p->broker);
		free(p);
	}
}

/*
 * A ProduceResponse (v3 to v8, what librdkafka 2.0 sends) starts with the correlation
 * id, then the first topic's name, its first partition, error code and base offset.
 */
static void
log_dropped(const unsigned char *f, size_t len, int32_t corr)
{
	const unsigned char *p = f + 8;
	const unsigned char *end = f + len;
	char		topic[256] = "?";
	int			partition = -1;
	int			error = -1;
	long long	base = -1;
	FILE	   *out;

	if (p + 6 <= end && get32(p) >= 1)
	{
		size_t		tlen = get16(p + 4);

		p += 6;
		if (tlen < sizeof(topic) && p + tlen + 18 <= end)
		{
			memcpy(topic, p, tlen);
			topic[tlen] = '\0';
			p += tlen;
			if (get32(p) >= 1)
			{
				partition = (int) get32(p + 4);
				error = (int16_t) get16(p + 8);
				base = (long long) (((uint64_t) get32(p + 10) << 32) | get32(p + 14));
			}
		}
	}
	if (log_path[0] == '\0' || (out = fopen(log_path, "a")) == NULL)
		return;
	fprintf(out, "lost ack: correlation_id=%d topic=%s partition=%d error=%d base_offset=%lld\n",
			(int) corr, topic, partition, error, base);
	fclose(out);
}

/* Broker to client: the responses, one of which may be swallowed. */
static void *
responses(void *arg)
{
	proxy	   *p = arg;
	unsigned char *f;
	size_t		len;

	while ((f = read_frame(p->broker, &len)) != NULL)
	{
		int32_t		corr = (int32_t) get32(f + 4);
		bool		produce = false;
		bool		drop = false;

		pthread_mutex_lock(&lock);
		for (int i = 0; i < p->nproduce; i++)
		{
			if (p->produce_ids[i] == corr)
			{
				p->produce_ids[i] = p->produce_ids[--p->nproduce];
				produce = true;
				break;
			}
		}
		if (produce && ++produce_responses % drop_every == 0 && drops_left > 0)
		{
			drops_left--;
			drop = true;
			log_dropped(f, len, corr);
		}
		pthread_mutex_unlock(&lock);
		if (drop || !write_full(p->client, f, len))
		{
			free(f);
			break;
		}
		free(f);
	}
	end_thread(p);
	return NULL;
}

/* Client to broker: the requests, noting which are ProduceRequests that expect an answer. */
static void *
requests(void *arg)
{
	proxy	   *p = arg;
	unsigned char *f;
	size_t		len;

	while ((f = read_frame(p->client, &len)) != NULL)
	{
		/* Header: api_key, api_version, correlation_id, client_id (a string). */
		if (len >= 14 && (int16_t) get16(f + 4) == API_PRODUCE)
		{
			int16_t		version = (int16_t) get16(f + 6);
			size_t		client_len = get16(f + 12);
			size_t		at = 14 + (client_len == 0xffff ? 0 : client_len);
			int16_t		acks = -1;

			if (version >= 3 && at + 2 <= len)
			{
				size_t		tid_len = get16(f + at);

				at += 2 + (tid_len == 0xffff ? 0 : tid_len);
			}
			if (at + 2 <= len)
				acks = (int16_t) get16(f + at);
			pthread_mutex_lock(&lock);
			if (acks != 0 && p->nproduce < MAX_PENDING)
				p->produce_ids[p->nproduce++] = (int32_t) get32(f + 8);
			pthread_mutex_unlock(&lock);
		}
		if (!write_full(p->broker, f, len))
		{
			free(f);
			break;
		}
		free(f);
	}
	end_thread(p);
	return NULL;
}

/* Takes librdkafka's connection on the listener, then connects to the real broker. */
static void *
accept_one(void *arg)
{
	proxy	   *p = arg;
	pthread_t	t;

	p->client = accept(p->listener, NULL, NULL);
	close(p->listener);
	p->broker = socket(p->target.ss_family, SOCK_STREAM, 0);
	if (p->client < 0 || p->broker < 0 ||
		connect(p->broker, (struct sockaddr *) &p->target, p->target_len) != 0 ||
		pthread_create(&t, NULL, responses, p) != 0)
	{
		/* librdkafka sees a closed connection and tries again. */
		if (p->client >= 0)
			close(p->client);
		if (p->broker >= 0)
			close(p->broker);
		free(p);
		return NULL;
	}
	pthread_detach(t);
	return requests(p);
}

static int
proxy_connect(int sockfd, const struct sockaddr *addr, int addrlen, const char *id, void *opaque)
{
	proxy	   *p = calloc(1, sizeof(*p));
	struct sockaddr_in local;
	socklen_t	local_len = sizeof(local);
	pthread_t	t;
	struct pollfd pfd;
	int			err = 0;
	socklen_t	err_len = sizeof(err);

	(void) id;
	(void) opaque;
	if (p == NULL || (size_t) addrlen > sizeof(p->target))
	{
		free(p);
		return ENOMEM;
	}
	memcpy(&p->target, addr, (size_t) addrlen);
	p->target_len = (socklen_t) addrlen;
	p->threads_left = 2;
	memset(&local, 0, sizeof(local));
	local.sin_family = AF_INET;
	local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->listener = socket(AF_INET, SOCK_STREAM, 0);
	if (p->listener < 0 ||
		bind(p->listener, (struct sockaddr *) &local, sizeof(local)) != 0 ||
		listen(p->listener, 1) != 0 ||
		getsockname(p->listener, (struct sockaddr *) &local, &local_len) != 0)
	{
		err = errno ? errno : EIO;
		if (p->listener >= 0)
			close(p->listener);
		free(p);
		return err;
	}
	/* pthread_create returns its error; it does not set errno. */
	err = pthread_create(&t, NULL, accept_one, p);
	if (err != 0)
	{
		close(p->listener);
		free(p);
		return err;
	}
	pthread_detach(t);

	/* librdkafka's socket is non-blocking, and the callback must return it connected. */
	if (connect(sockfd, (struct sockaddr *) &local, sizeof(local)) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return errno;
	pfd.fd = sockfd;
	pfd.events = POLLOUT;
	if (poll(&pfd, 1, 10000) != 1)
		return ETIMEDOUT;
	if (getsockopt(sockfd, SOL_SOCKET, SO_ERROR, &err, &err_len) != 0)
		return errno;
	return err;
}

rd_kafka_resp_err_t conf_init(rd_kafka_conf_t *conf, void **plug_opaquep,
							  char *errstr, size_t errstr_size);

rd_kafka_resp_err_t
conf_init(rd_kafka_conf_t *conf, void **plug_opaquep, char *errstr, size_t errstr_size)
{
	const char *v;

	(void) plug_opaquep;
	(void) errstr;
	(void) errstr_size;
	pthread_mutex_lock(&lock);
	if (!configured)
	{
		configured = true;
		if ((v = getenv("LAKEHOUSE_LOST_ACKS")) != NULL)
			drops_left = atol(v);
		if ((v = getenv("LAKEHOUSE_LOST_ACKS_EVERY")) != NULL && atol(v) > 0)
			drop_every = atol(v);
		if ((v = getenv("LAKEHOUSE_LOST_ACKS_LOG")) != NULL)
			snprintf(log_path, sizeof(log_path), "%s", v);
	}
	pthread_mutex_unlock(&lock);
	rd_kafka_conf_set_connect_cb(conf, proxy_connect);
	return RD_KAFKA_RESP_ERR_NO_ERROR;
}
