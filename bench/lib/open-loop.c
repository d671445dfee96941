// The open-loop generator of bench/lib/open-loop.ts in C (bench --overload, through
// open-loop-native.ts): the same schedule, connections, time-out and counts, without Node's event
// loop. openLoop() took a whole core at 40,000 requests a second and could not offer the ~60,000
// (3× C of a cheap GET) the overload phases need; this offers them on ~0.8 of a core, most of it
// the kernel's (loopback TCP in a virtual machine, ~14 µs a request on this one).
//
//   open-loop PORT RATE SECONDS CONNECTIONS TIMEOUT_MS GOOD_MS < requests
//
// Requests: K raw HTTP/1.1 requests on stdin, each as its length in bytes, a newline and its
// bytes; the i-th request of the schedule is the (i mod K)-th. The result is one JSON object on
// stdout (the fields of OpenLoopResult, and the generator's own figures).
//
// Requests are due every 1/RATE s from the moment the connections are open (or 5 s have passed),
// for SECONDS. A due request waits here for an idle connection (the one idle longest first), and
// its latency counts from its due time, so the wait shows. One not answered within TIMEOUT_MS of
// its due time is abandoned and its connection closed, another opened in its place. An answer is
// read by its status line and Content-Length only. Only 127.0.0.1 is ever connected to.
#define _GNU_SOURCE
#include <errno.h>
// NAN and isfinite() only: nothing of libm, so that it builds with `cc` and libc alone.
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CLOSED, CONNECTING, READY };

struct connection {
  int fd;
  int state;
  // Bumped at each close, so that an event of a closed connection read in the same epoll_wait
  // batch is not taken for one of the connection opened in its slot.
  uint32_t generation;
  // The request it carries (an index of the schedule), or -1.
  int64_t current;
  // The bytes still to write: a request normally goes out in one send(), but a full socket
  // buffer leaves the rest for EPOLLOUT.
  const char *out;
  size_t out_left;
  int watching_out;
  int in_idle;
  // The head of the answer being read (and whatever followed it in the same read), then, once
  // the head is whole, the count of body bytes still to skip.
  char *head;
  size_t head_length, head_capacity, body_left;
  int status;
};

struct text {
  const char *bytes;
  size_t length;
};

struct doubles {
  double *values;
  size_t length, capacity;
};

static int port, max_connections, epoll_fd;
static double rate, seconds, timeout_ms, good_ms;
static int64_t total;
static struct text *texts;
static size_t text_count;

static struct connection *connections;
// The idle connections, a ring taken from its head: the one idle longest goes first, so a pool
// larger than the load needs turns over whole. (A stack left most of a pool idle past the
// server's keep-alive time-out, which closed thousands at once, reopened at once: an accept storm
// in the middle of a phase.)
static int *idle, idle_head, idle_length;
static int *free_slots, free_length;
static int64_t to_open, connections_opened;

// Per request of the schedule: whether it is settled, and the connection carrying it (-1 for none).
static uint8_t *done;
static int32_t *carrier;
static int64_t next_due, queue_head, sweep_head, settled, sent;
static int64_t begin_ns;
// How long the pool took to open, before the schedule began (s).
static double open_seconds;

static int64_t good, timeouts, errors, statuses[1000];
static int64_t (*per_second)[2];
static int64_t seconds_length;
// admitted_due: each admitted answer's due time (ms from the schedule's start), in the order of admitted.
static struct doubles admitted, admitted_due, refused, send_lag;

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// As openLoop() computes it: begin + i × (1000 / rate) ms.
static int64_t due_ns(int64_t i) { return begin_ns + (int64_t)((double)i * 1e9 / rate); }

static void fail(const char *what) {
  fprintf(stderr, "open-loop: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void *grow(void *p, size_t size) {
  void *q = realloc(p, size);
  if (q == NULL) fail("out of memory");
  return q;
}

static void push(struct doubles *d, double v) {
  if (d->length == d->capacity) {
    d->capacity = d->capacity == 0 ? 65536 : 2 * d->capacity;
    d->values = grow(d->values, d->capacity * sizeof(double));
  }
  d->values[d->length++] = v;
}

static void idle_push(int slot) {
  connections[slot].in_idle = 1;
  idle[(idle_head + idle_length) % max_connections] = slot;
  idle_length++;
}

static int idle_pop(void) {
  if (idle_length == 0) return -1;
  int slot = idle[idle_head];
  idle_head = (idle_head + 1) % max_connections;
  idle_length--;
  connections[slot].in_idle = 0;
  return slot;
}

// Only when an idle connection is closed under it (the server's keep-alive time-out): rare, and
// the order of the others is kept.
static void idle_remove(int slot) {
  for (int k = 0; k < idle_length; k++)
    if (idle[(idle_head + k) % max_connections] == slot) {
      for (int j = k; j < idle_length - 1; j++)
        idle[(idle_head + j) % max_connections] = idle[(idle_head + j + 1) % max_connections];
      idle_length--;
      break;
    }
  connections[slot].in_idle = 0;
}

static void settle(void) { settled++; }

static void answered(int64_t i, int status, int64_t now) {
  if (done[i]) return;
  done[i] = 1;
  int64_t due = due_ns(i);
  double latency = (double)(now - due) / 1e6;
  // Past the time-out a client has given up, even if the sweep has not yet said so: an answer
  // that late is a time-out, as openLoop() counts it.
  if (latency >= timeout_ms) {
    timeouts++;
    settle();
    return;
  }
  statuses[status]++;
  int64_t second = (due - begin_ns) / 1000000000;
  if (second > seconds_length - 1) second = seconds_length - 1;
  // A status line that cannot be read is counted as status 0, neither 2xx nor 503.
  int ok = status >= 100 && status < 300;
  if (status == 503) {
    push(&refused, latency);
    per_second[second][1]++;
  } else {
    push(&admitted, latency);
    push(&admitted_due, (double)(due - begin_ns) / 1e6);
    if (ok) per_second[second][0]++;
  }
  if (ok && latency <= good_ms) good++;
  settle();
}

static void close_connection(int slot) {
  struct connection *c = &connections[slot];
  close(c->fd);
  c->fd = -1;
  c->state = CLOSED;
  c->generation++;
  if (c->in_idle) idle_remove(slot);
  c->out_left = 0;
  c->head_length = 0;
  c->body_left = 0;
  free_slots[free_length++] = slot;
  // Another in its place, as a client's pool keeps its size (asked before the request it carried
  // is settled, as openLoop() does).
  if (settled < total) to_open++;
  int64_t i = c->current;
  c->current = -1;
  if (i >= 0 && !done[i]) {
    done[i] = 1;
    errors++;
    settle();
  }
}

static void watch(struct connection *c, int slot, int op, uint32_t events) {
  struct epoll_event e = {.events = events, .data.u64 = ((uint64_t)c->generation << 32) | (uint32_t)slot};
  if (epoll_ctl(epoll_fd, op, c->fd, &e) != 0) fail("epoll_ctl");
}

// Writes what is left of the connection's request; on a full socket buffer, waits for EPOLLOUT.
static void flush(int slot) {
  struct connection *c = &connections[slot];
  while (c->out_left > 0) {
    ssize_t n = send(c->fd, c->out, c->out_left, MSG_NOSIGNAL);
    if (n > 0) {
      c->out += n;
      c->out_left -= (size_t)n;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      if (!c->watching_out) watch(c, slot, EPOLL_CTL_MOD, EPOLLIN | EPOLLOUT);
      c->watching_out = 1;
      return;
    } else {
      close_connection(slot);
      return;
    }
  }
  // EPOLLOUT only while there is something to write: each epoll_ctl() is a system call.
  if (c->watching_out) watch(c, slot, EPOLL_CTL_MOD, EPOLLIN);
  c->watching_out = 0;
}

static void open_connection(void) {
  int slot = free_slots[--free_length];
  struct connection *c = &connections[slot];
  c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) {
    // Out of descriptors or ports: tried again at the next turn, as a lost connection would be.
    free_slots[free_length++] = slot;
    if (settled < total) to_open++;
    return;
  }
  connections_opened++;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  c->current = -1;
  c->out_left = 0;
  c->watching_out = 0;
  c->head_length = 0;
  c->body_left = 0;
  c->in_idle = 0;
  if (connect(c->fd, (struct sockaddr *)&address, sizeof address) == 0) {
    c->state = READY;
    watch(c, slot, EPOLL_CTL_ADD, EPOLLIN);
    idle_push(slot);
  } else if (errno == EINPROGRESS) {
    c->state = CONNECTING;
    watch(c, slot, EPOLL_CTL_ADD, EPOLLIN | EPOLLOUT);
  } else {
    c->state = READY;
    close_connection(slot);
  }
}

static void open_connections(void) {
  int64_t n = to_open;
  to_open = 0;
  for (; n > 0 && free_length > 0; n--) open_connection();
  to_open += n;
}

// Hands what is due, oldest first, to idle connections.
static void dispatch(void) {
  while (queue_head < next_due) {
    if (done[queue_head]) {
      queue_head++;
      continue;
    }
    int slot = idle_pop();
    if (slot < 0) return;
    struct connection *c = &connections[slot];
    int64_t i = queue_head++;
    const struct text *t = &texts[i % (int64_t)text_count];
    c->current = i;
    carrier[i] = slot;
    c->out = t->bytes;
    c->out_left = t->length;
    sent++;
    push(&send_lag, (double)(now_ns() - due_ns(i)) / 1e6);
    flush(slot);
  }
}

// Abandons what is not answered within the time-out (the oldest are first).
static void sweep(int64_t now) {
  for (; sweep_head < next_due; sweep_head++) {
    int64_t i = sweep_head;
    if (done[i]) continue;
    if (now - due_ns(i) < (int64_t)(timeout_ms * 1e6)) break;
    done[i] = 1;
    timeouts++;
    settle();
    // A client that gives up closes its connection.
    int slot = carrier[i];
    if (slot >= 0 && connections[slot].current == i) {
      connections[slot].current = -1;
      close_connection(slot);
    }
  }
}

static void answer_complete(int slot, int status, int64_t now) {
  struct connection *c = &connections[slot];
  int64_t i = c->current;
  c->current = -1;
  if (i >= 0) answered(i, status, now);
  // A connection whose request is not yet all written (the server answered before reading it)
  // is idle once it is.
  if (!c->in_idle && c->out_left == 0) idle_push(slot);
}

// The Content-Length of a head, as openLoop()'s /\r\ncontent-length: *(\d+)/i reads it; 0 without.
// Line by line: strncasecmp() at every byte of the head was the largest of the generator's own
// costs (the rest is the kernel's).
static size_t content_length(const char *head, size_t length) {
  static const char name[] = "content-length:";
  const size_t n = sizeof name - 1;
  const char *end = head + length;
  for (const char *p = head; (p = memchr(p, '\n', (size_t)(end - p))) != NULL;) {
    p++;
    if (p < head + 2 || p[-2] != '\r' || (size_t)(end - p) < n || strncasecmp(p, name, n) != 0) continue;
    const char *q = p + n;
    while (q < end && *q == ' ') q++;
    if (q == end || *q < '0' || *q > '9') continue;
    size_t v = 0;
    while (q < end && *q >= '0' && *q <= '9') v = v * 10 + (size_t)(*q++ - '0');
    return v;
  }
  return 0;
}

// The status of "HTTP/1.1 503 …" (its bytes 9 to 11), 0 if they are not a number.
static int status_of(const char *head, size_t length) {
  if (length < 12) return 0;
  int s = 0;
  for (int k = 9; k < 12; k++) {
    if (head[k] < '0' || head[k] > '9') return 0;
    s = s * 10 + (head[k] - '0');
  }
  return s;
}

static void *find_end_of_head(const char *p, size_t n) { return memmem(p, n, "\r\n\r\n", 4); }

// Reads answers out of the bytes of one read().
static void feed(int slot, const char *data, size_t n, int64_t now) {
  struct connection *c = &connections[slot];
  uint32_t generation = c->generation;
  while (n > 0) {
    if (c->body_left > 0) {
      size_t take = n < c->body_left ? n : c->body_left;
      c->body_left -= take;
      data += take;
      n -= take;
      if (c->body_left == 0) answer_complete(slot, c->status, now);
      continue;
    }
    if (c->head_length + n > c->head_capacity) {
      c->head_capacity = 2 * (c->head_length + n);
      c->head = grow(c->head, c->head_capacity);
    }
    memcpy(c->head + c->head_length, data, n);
    c->head_length += n;
    n = 0;
    for (;;) {
      char *end = find_end_of_head(c->head, c->head_length);
      if (end == NULL) break;
      size_t head = (size_t)(end - c->head);
      int status = status_of(c->head, head);
      size_t length = head + 4 + content_length(c->head, head);
      if (c->head_length >= length) {
        c->head_length -= length;
        memmove(c->head, c->head + length, c->head_length);
        answer_complete(slot, status, now);
        if (c->generation != generation) return;
      } else {
        c->body_left = length - c->head_length;
        c->status = status;
        c->head_length = 0;
        break;
      }
    }
  }
}

static void on_event(struct epoll_event *e) {
  int slot = (int)(uint32_t)e->data.u64;
  struct connection *c = &connections[slot];
  if (c->state == CLOSED || c->generation != (uint32_t)(e->data.u64 >> 32)) return;
  if (c->state == CONNECTING) {
    int error = 0;
    socklen_t size = sizeof error;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &error, &size);
    if (error != 0 || (e->events & (EPOLLERR | EPOLLHUP))) {
      close_connection(slot);
    } else if (e->events & EPOLLOUT) {
      c->state = READY;
      watch(c, slot, EPOLL_CTL_MOD, EPOLLIN);
      idle_push(slot);
    }
    return;
  }
  if (e->events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    static char buffer[65536];
    ssize_t n = recv(c->fd, buffer, sizeof buffer, 0);
    if (n > 0) {
      feed(slot, buffer, (size_t)n, now_ns());
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      close_connection(slot);
      return;
    }
  }
  if (c->state == READY && (e->events & EPOLLOUT) && c->out_left > 0) {
    flush(slot);
    if (c->state == READY && c->out_left == 0 && c->current < 0 && !c->in_idle) idle_push(slot);
  }
}

// At most 64 events a turn: each costs ~10 µs of system time here (loopback TCP in a virtual
// machine), and a turn of a thousand would hold back what falls due meanwhile by ~10 ms.
// The events not taken are there at the next turn (epoll is level-triggered).
static void wait_and_handle(int timeout) {
  static struct epoll_event events[64];
  int n = epoll_wait(epoll_fd, events, 64, timeout);
  if (n < 0 && errno != EINTR) fail("epoll_wait");
  for (int k = 0; k < n; k++) on_event(&events[k]);
}

static void read_requests(void) {
  size_t length = 0, capacity = 1 << 20;
  char *all = grow(NULL, capacity);
  for (;;) {
    if (length == capacity) all = grow(all, capacity *= 2);
    size_t n = fread(all + length, 1, capacity - length, stdin);
    if (n == 0) break;
    length += n;
  }
  size_t p = 0, allocated = 0;
  while (p < length) {
    char *end;
    unsigned long long size = strtoull(all + p, &end, 10);
    if (end == all + p || end >= all + length || *end != '\n' || size > length - (size_t)(end + 1 - all)) {
      fprintf(stderr, "open-loop: malformed requests on stdin at byte %zu\n", p);
      exit(2);
    }
    if (text_count == allocated) texts = grow(texts, (allocated = allocated == 0 ? 1024 : 2 * allocated) * sizeof *texts);
    texts[text_count].bytes = end + 1;
    texts[text_count].length = (size_t)size;
    text_count++;
    p = (size_t)(end + 1 - all) + (size_t)size;
  }
  if (text_count == 0) {
    fprintf(stderr, "open-loop: no requests on stdin\n");
    exit(2);
  }
}

// JSON out: numbers written by hand, since the latency arrays hold up to a million of them.
static char *out;
static size_t out_length, out_capacity;

static void put(const char *s, size_t n) {
  if (out_length + n > out_capacity) out = grow(out, out_capacity = 2 * (out_length + n) + 4096);
  memcpy(out + out_length, s, n);
  out_length += n;
}

static void put_s(const char *s) { put(s, strlen(s)); }

static void put_i(int64_t v) {
  char digits[24];
  int k = 0;
  uint64_t u = v < 0 ? (uint64_t)(-v) : (uint64_t)v;
  do digits[k++] = (char)('0' + u % 10);
  while ((u /= 10) > 0);
  if (v < 0) digits[k++] = '-';
  char s[24];
  for (int j = 0; j < k; j++) s[j] = digits[k - 1 - j];
  put(s, (size_t)k);
}

// A number to three decimals (milliseconds to the microsecond, seconds to the millisecond).
static void put_thousandths(double ms) {
  if (!isfinite(ms)) {
    put_s("null");
    return;
  }
  double v = ms * 1000;
  int64_t us = (int64_t)(v < 0 ? v - 0.5 : v + 0.5);
  if (us < 0) {
    put_s("-");
    us = -us;
  }
  put_i(us / 1000);
  char frac[4] = {'.', (char)('0' + us / 100 % 10), (char)('0' + us / 10 % 10), (char)('0' + us % 10)};
  put(frac, 4);
}

static void put_array(const char *name, const struct doubles *d) {
  put_s(",\"");
  put_s(name);
  put_s("\":[");
  for (size_t k = 0; k < d->length; k++) {
    if (k > 0) put_s(",");
    put_thousandths(d->values[k]);
  }
  put_s("]");
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// As percentile() of open-loop.ts: the value at floor(p/100 × n) of the sorted values.
static double percentile(struct doubles *d, double p) {
  if (d->length == 0) return NAN;
  qsort(d->values, d->length, sizeof(double), by_value);
  size_t k = (size_t)(p / 100 * (double)d->length);
  return d->values[k < d->length ? k : d->length - 1];
}

static void write_result(double run_seconds) {
  put_s("{\"offered\":");
  put_i(total);
  put_s(",\"good\":");
  put_i(good);
  put_s(",\"statuses\":{");
  int first = 1;
  for (int s = 0; s < 1000; s++) {
    if (statuses[s] == 0) continue;
    if (!first) put_s(",");
    first = 0;
    put_s("\"");
    put_i(s);
    put_s("\":");
    put_i(statuses[s]);
  }
  put_s("},\"timeouts\":");
  put_i(timeouts);
  put_s(",\"errors\":");
  put_i(errors);
  put_s(",\"perSecond\":[");
  for (int64_t k = 0; k < seconds_length; k++) {
    if (k > 0) put_s(",");
    put_s("[");
    put_i(per_second[k][0]);
    put_s(",");
    put_i(per_second[k][1]);
    put_s("]");
  }
  put_s("]");
  put_array("admitted", &admitted);
  put_array("admittedDue", &admitted_due);
  put_array("refused", &refused);
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  double cpu = (double)(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
               (double)(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  put_s(",\"generator\":{\"sent\":");
  put_i(sent);
  put_s(",\"connectionsOpened\":");
  put_i(connections_opened);
  put_s(",\"cpuSeconds\":");
  put_thousandths(cpu);
  put_s(",\"openSeconds\":");
  put_thousandths(open_seconds);
  put_s(",\"runSeconds\":");
  put_thousandths(run_seconds);
  put_s(",\"sendLagP99\":");
  put_thousandths(percentile(&send_lag, 99));
  put_s(",\"sendLagMax\":");
  put_thousandths(send_lag.length == 0 ? NAN : send_lag.values[send_lag.length - 1]);
  put_s("}}\n");
  for (size_t p = 0; p < out_length;) {
    ssize_t n = write(1, out + p, out_length - p);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    p += (size_t)n;
  }
}

int main(int argc, char **argv) {
  if (argc != 7) {
    fprintf(stderr, "usage: open-loop PORT RATE SECONDS CONNECTIONS TIMEOUT_MS GOOD_MS < requests\n");
    return 2;
  }
  port = atoi(argv[1]);
  rate = strtod(argv[2], NULL);
  seconds = strtod(argv[3], NULL);
  max_connections = atoi(argv[4]);
  timeout_ms = strtod(argv[5], NULL);
  good_ms = strtod(argv[6], NULL);
  if (port <= 0 || port > 65535 || !(rate > 0) || !(seconds >= 0) || max_connections <= 0) {
    fprintf(stderr, "open-loop: bad arguments\n");
    return 2;
  }
  read_requests();
  // Up to 15,000 connections and their replacements: the soft limit up to the hard one, as Node
  // raises its own.
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }

  // Math.round(rate × seconds), as openLoop() counts what it offers.
  total = (int64_t)(rate * seconds + 0.5);
  seconds_length = (int64_t)seconds + ((double)(int64_t)seconds < seconds) + 1;
  per_second = calloc((size_t)seconds_length, sizeof *per_second);
  done = calloc((size_t)total + 1, 1);
  carrier = malloc(((size_t)total + 1) * sizeof *carrier);
  connections = calloc((size_t)max_connections, sizeof *connections);
  idle = malloc((size_t)max_connections * sizeof *idle);
  free_slots = malloc((size_t)max_connections * sizeof *free_slots);
  if (!per_second || !done || !carrier || !connections || !idle || !free_slots) fail("out of memory");
  for (int64_t i = 0; i < total; i++) carrier[i] = -1;
  for (int k = 0; k < max_connections; k++) free_slots[free_length++] = max_connections - 1 - k;
  epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) fail("epoll_create1");

  // The connections open first, then the schedule starts.
  int64_t start = now_ns();
  to_open = max_connections;
  while (idle_length < max_connections && now_ns() - start <= 5000000000LL) {
    open_connections();
    wait_and_handle(1);
  }
  begin_ns = now_ns();
  open_seconds = (double)(begin_ns - start) / 1e9;

  // The schedule: each turn sends everything due, abandons what is past its time-out, and waits
  // at most 1 ms for answers, so a request leaves at most ~1 ms after it is due when the
  // generator keeps up (its latency counts from its due time either way).
  while (settled < total) {
    int64_t now = now_ns();
    while (next_due < total && due_ns(next_due) <= now) next_due++;
    sweep(now);
    dispatch();
    open_connections();
    if (settled >= total) break;
    int timeout = 1;
    if (next_due < total && due_ns(next_due) <= now_ns()) timeout = 0;
    wait_and_handle(timeout);
  }
  double run_seconds = (double)(now_ns() - begin_ns) / 1e9;
  for (int k = 0; k < max_connections; k++)
    if (connections[k].state != CLOSED) close(connections[k].fd);
  write_result(run_seconds);
  return 0;
}
