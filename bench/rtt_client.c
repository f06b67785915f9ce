/* One client of bench/rtt: sends N commands to a TPM, one at a time, and
 * prints each round trip (write of the command to the last byte of its
 * response) in nanoseconds, one line per command, and on stderr the CPU
 * time the timed commands cost this process ("cpu_ns N", every thread: a
 * TCTI's own included):
 *
 *   rtt_client TO COMMAND N [WARMUP]
 *   rtt_client relay PATH HOST:PORT
 *
 * TO       tcp:HOST:PORT   raw TPM frames on a TCP socket (swtpm's data port:
 *                          `tpmsec emulate --protocol swtpm`)
 *          unix:PATH       raw TPM frames on a Unix socket (`tpmsec serve --socket`)
 *          tcti:CONF       a tpm2-tss TCTI through Tss2_TctiLdr_Initialize, e.g.
 *                          tcti:tabrmd:bus_type=session (tpm2-abrmd's D-Bus
 *                          interface: tpm2-abrmd or `tpmsec serve --dbus session`)
 * COMMAND  random          TPM2_GetRandom(8), no session
 *          extend          TPM2_PCR_Extend(16, one SHA-256 digest) under the password
 * N        commands timed; WARMUP (default 50) more are sent first, untimed.
 *
 * relay: the least any process between a client and the TPM can do, for the
 * floor row of bench/rtt: listens on the Unix socket PATH and, for one client
 * at a time, passes each command frame to the TPM's TCP data port and its
 * response back (blocking reads and writes, no poll: four system calls and
 * two context switches per command). Runs until killed.
 *
 * Both raw paths write the frame with one write() and read until the
 * response's header size is in, as a TSS does on /dev/tpmrm0. Exit 1 with one
 * line when a command fails or a response is not TPM_RC_SUCCESS, 2 on bad usage.
 *
 * Built on its own against libtss2 (bench/rtt does it):
 *   cc -O2 bench/rtt_client.c $(pkg-config --cflags --libs tss2-tctildr)
 */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <tss2/tss2_tctildr.h>
#include <unistd.h>

static const uint8_t kGetRandom[] = {0x80, 0x01, 0x00, 0x00, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x7b, 0x00, 0x08};

/* PCR_Extend(16): handle, password session (TPM_RS_PW, no nonce, no
 * attributes, empty password), TPML_DIGEST_VALUES of one SHA-256 digest. */
static uint8_t extend[65] = {0x80, 0x02, 0x00, 0x00, 0x00, 65,   0x00, 0x00, 0x01, 0x82, 0x00,
                             0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x09, 0x40, 0x00, 0x00, 0x09,
                             0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x0b};

static int fd = -1;
static TSS2_TCTI_CONTEXT* tcti;

static void die(const char* what) {
  fprintf(stderr, "rtt_client: %s\n", what);
  exit(1);
}

static int connect_tcp(const char* where) {
  char host[256];
  const char* colon = strrchr(where, ':');
  if (!colon || (size_t)(colon - where) >= sizeof(host)) return -1;
  memcpy(host, where, (size_t)(colon - where));
  host[colon - where] = 0;
  struct addrinfo hints = {0}, *ai = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) return -1;
  int s = socket(ai->ai_family, ai->ai_socktype, 0);
  if (s >= 0 && connect(s, ai->ai_addr, ai->ai_addrlen) != 0) {
    close(s);
    s = -1;
  }
  freeaddrinfo(ai);
  int one = 1;
  if (s >= 0) setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return s;
}

static int connect_unix(const char* path) {
  struct sockaddr_un a = {0};
  a.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(a.sun_path)) return -1;
  strcpy(a.sun_path, path);
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  if (s >= 0 && connect(s, (struct sockaddr*)&a, sizeof(a)) != 0) {
    close(s);
    s = -1;
  }
  return s;
}

static uint32_t be32(const uint8_t* p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | p[2] << 8 | p[3]; }

/* Reads one frame (header size) from s into buf; its size, or 0 at the end. */
static size_t read_frame(int s, uint8_t* buf, size_t cap) {
  size_t got = 0, want = 10;
  while (got < want) {
    ssize_t n = read(s, buf + got, cap - got);
    if (n <= 0) return 0;
    got += (size_t)n;
    if (got >= 10) want = be32(buf + 2);
    if (want < 10 || want > cap) return 0;
  }
  return got;
}

static void relay(const char* path, const char* tpm_at) {
  int tpm = connect_tcp(tpm_at);
  if (tpm < 0) die("relay: cannot connect to the TPM");
  struct sockaddr_un a = {0};
  a.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(a.sun_path)) die("relay: path too long");
  strcpy(a.sun_path, path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr*)&a, sizeof(a)) != 0 || listen(l, 4) != 0) die("relay: cannot listen");
  uint8_t buf[4096];
  for (;;) {
    int c = accept(l, NULL, NULL);
    if (c < 0) continue;
    size_t n;
    while ((n = read_frame(c, buf, sizeof(buf))) > 0) {
      if (write(tpm, buf, n) != (ssize_t)n) die("relay: write to the TPM failed");
      if ((n = read_frame(tpm, buf, sizeof(buf))) == 0) die("relay: the TPM did not answer");
      if (write(c, buf, n) != (ssize_t)n) break;
    }
    close(c);
  }
}

/* One command, one response; the response code. */
static uint32_t round_trip(const uint8_t* cmd, size_t len) {
  uint8_t rsp[4096];
  size_t got = 0;
  if (tcti) {
    if (Tss2_Tcti_Transmit(tcti, len, cmd) != TSS2_RC_SUCCESS) die("TCTI transmit failed");
    got = sizeof(rsp);
    if (Tss2_Tcti_Receive(tcti, &got, rsp, TSS2_TCTI_TIMEOUT_BLOCK) != TSS2_RC_SUCCESS) die("TCTI receive failed");
  } else {
    if (write(fd, cmd, len) != (ssize_t)len) die("write failed");
    size_t want = 10;
    while (got < want) {
      ssize_t n = read(fd, rsp + got, sizeof(rsp) - got);
      if (n <= 0) die("the server closed the connection");
      got += (size_t)n;
      if (got >= 10) want = be32(rsp + 2);
      if (want < 10 || want > sizeof(rsp)) die("a response with a bad size");
    }
  }
  if (got < 10) die("a short response");
  return be32(rsp + 6);
}

static int64_t clock_ns(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void open_target(const char* to) {
  if (strncmp(to, "tcp:", 4) == 0) {
    fd = connect_tcp(to + 4);
  } else if (strncmp(to, "unix:", 5) == 0) {
    fd = connect_unix(to + 5);
  } else if (strncmp(to, "tcti:", 5) == 0) {
    if (Tss2_TctiLdr_Initialize(to + 5, &tcti) != TSS2_RC_SUCCESS) die("cannot open the TCTI");
    return;
  } else {
    fprintf(stderr, "rtt_client: TO is tcp:HOST:PORT, unix:PATH or tcti:CONF\n");
    exit(2);
  }
  if (fd < 0) die("cannot connect");
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "relay") == 0) {
    relay(argv[2], argv[3]);
    return 1;
  }
  if (argc < 4 || argc > 5) {
    fprintf(stderr, "usage: rtt_client TO random|extend N [WARMUP]\n");
    return 2;
  }
  const uint8_t* cmd = kGetRandom;
  size_t len = sizeof(kGetRandom);
  if (strcmp(argv[2], "extend") == 0) {
    for (int i = 0; i < 32; ++i) extend[33 + i] = (uint8_t)i;
    cmd = extend;
    len = sizeof(extend);
  } else if (strcmp(argv[2], "random") != 0) {
    fprintf(stderr, "rtt_client: COMMAND is random or extend\n");
    return 2;
  }
  const long n = atol(argv[3]), warmup = argc == 5 ? atol(argv[4]) : 50;
  if (n < 1 || n > 1000000 || warmup < 0 || warmup > 1000000) {
    fprintf(stderr, "rtt_client: N from 1 to 1000000, WARMUP from 0\n");
    return 2;
  }
  int64_t* ns = malloc((size_t)n * sizeof(*ns));
  if (!ns) die("out of memory");
  open_target(argv[1]);
  for (long i = 0; i < warmup; ++i) {
    if (round_trip(cmd, len) != 0) die("a warm-up command failed");
  }
  const int64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
  for (long i = 0; i < n; ++i) {
    const int64_t t0 = clock_ns(CLOCK_MONOTONIC);
    const uint32_t rc = round_trip(cmd, len);
    ns[i] = clock_ns(CLOCK_MONOTONIC) - t0;
    if (rc != 0) {
      fprintf(stderr, "rtt_client: command %ld answered 0x%x\n", i, rc);
      return 1;
    }
  }
  fprintf(stderr, "cpu_ns %lld\n", (long long)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0));
  for (long i = 0; i < n; ++i) printf("%lld\n", (long long)ns[i]);
  if (tcti) Tss2_TctiLdr_Finalize(&tcti);
  if (fd >= 0) close(fd);
  free(ns);
  return 0;
}
