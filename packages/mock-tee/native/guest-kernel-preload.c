/*
 * A test-only LD_PRELOAD library that stands in for the guest kernel's
 * /dev/sev-guest and /dev/tdx_guest. It intercepts open/ioctl/close on those
 * two paths and forwards each ioctl to the mock TEE's guest-kernel server (a
 * Unix socket named by MOCK_TEE_GUEST_KERNEL), which answers from the mock SNP
 * and TDX devices. This file only does what the kernel does with user memory:
 * it copies the ioctl's structures in (following their pointers, sizes checked
 * against the ABI), and copies the server's answer back out, never past the
 * buffers the caller declared. Every decision (reports, error codes, exitinfo2)
 * is the server's.
 *
 * Without MOCK_TEE_GUEST_KERNEL in the environment it does nothing. It is
 * never shipped: src/kernel/ builds it for tests only.
 *
 * Wire format (little endian), one exchange per connection:
 *   request  "MTKQ", u32 device (1 sev-guest, 2 tdx_guest), u32 command
 *            (0 = open, else the ioctl number), u32 length, bytes
 *   answer   "MTKA", i32 errno, u64 exitinfo2, then three u32-length-prefixed
 *            byte strings: the request structure to write back, the response
 *            (SNP resp_data / TD report / GetQuote buffer), the certificates
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define DEV_SEV 1u
#define DEV_TDX 2u
#define MAX_FD 4096
#define MAX_PART (1u << 20)

#define SNP_GET_REPORT 0xc0205300ul
#define SNP_GET_DERIVED_KEY 0xc0205301ul
#define SNP_GET_EXT_REPORT 0xc0205302ul
#define TDX_CMD_GET_REPORT0 0xc4405401ul
#define TDX_CMD_GET_QUOTE 0x80105404ul
#define TDX_CMD_GET_QUOTE_V3 0xc0105404ul

struct snp_guest_request_ioctl {
	uint8_t msg_version;
	uint64_t req_data;
	uint64_t resp_data;
	uint64_t exitinfo2;
};

struct snp_ext_report_req {
	uint8_t data[96];
	uint64_t certs_address;
	uint32_t certs_len;
};

struct tdx_quote_req {
	uint64_t buf;
	uint64_t len;
};

static unsigned char fd_device[MAX_FD];

struct answer {
	int err;
	uint64_t exitinfo2;
	uint8_t *part[3];
	uint32_t len[3];
};

static int (*real_open_fn)(const char *, int, ...);
static int (*real_close_fn)(int);
static int (*real_ioctl_fn)(int, unsigned long, ...);

static void resolve(void)
{
	if (real_open_fn == NULL)
		real_open_fn = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
	if (real_close_fn == NULL)
		real_close_fn = (int (*)(int))dlsym(RTLD_NEXT, "close");
	if (real_ioctl_fn == NULL)
		real_ioctl_fn = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
}

static unsigned device_of_path(const char *path)
{
	if (getenv("MOCK_TEE_GUEST_KERNEL") == NULL || path == NULL)
		return 0;
	if (strcmp(path, "/dev/sev-guest") == 0)
		return DEV_SEV;
	if (strcmp(path, "/dev/tdx_guest") == 0)
		return DEV_TDX;
	return 0;
}

static int io_all(int s, uint8_t *p, size_t n, int writing)
{
	while (n > 0) {
		ssize_t r = writing ? send(s, p, n, MSG_NOSIGNAL) : recv(s, p, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void free_answer(struct answer *a)
{
	for (int i = 0; i < 3; i++)
		free(a->part[i]);
}

/* One exchange with the server; a broken exchange reads as EIO, as a failing device would. */
static int exchange(unsigned device, uint32_t command, const uint8_t *payload, uint32_t len, struct answer *a)
{
	memset(a, 0, sizeof(*a));
	a->err = EIO;
	const char *path = getenv("MOCK_TEE_GUEST_KERNEL");
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	if (path == NULL || strlen(path) >= sizeof(addr.sun_path))
		return -1;
	strcpy(addr.sun_path, path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	int rc = -1;
	uint8_t head[16] = { 'M', 'T', 'K', 'Q' };
	memcpy(head + 4, &device, 4);
	memcpy(head + 8, &command, 4);
	memcpy(head + 12, &len, 4);
	if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) != 0 || io_all(s, head, 16, 1) != 0 ||
	    (len > 0 && io_all(s, (uint8_t *)payload, len, 1) != 0))
		goto out;
	uint8_t ahead[16];
	if (io_all(s, ahead, 16, 0) != 0 || memcmp(ahead, "MTKA", 4) != 0)
		goto out;
	int32_t err;
	memcpy(&err, ahead + 4, 4);
	memcpy(&a->exitinfo2, ahead + 8, 8);
	for (int i = 0; i < 3; i++) {
		uint8_t l[4];
		if (io_all(s, l, 4, 0) != 0)
			goto out;
		a->len[i] = le32(l);
		if (a->len[i] > MAX_PART)
			goto out;
		a->part[i] = malloc(a->len[i] ? a->len[i] : 1);
		if (a->part[i] == NULL || io_all(s, a->part[i], a->len[i], 0) != 0)
			goto out;
	}
	a->err = err;
	rc = 0;
out:
	if (rc != 0)
		fprintf(stderr, "mock guest kernel: no answer from %s\n", path);
	close(s);
	return rc;
}

static uint32_t min32(uint32_t a, uint64_t b)
{
	return b < a ? (uint32_t)b : a;
}

static int finish(struct answer *a)
{
	int err = a->err;
	free_answer(a);
	if (err != 0) {
		errno = err;
		return -1;
	}
	return 0;
}

static int snp_ioctl(unsigned long request, void *arg)
{
	struct answer a;
	struct snp_guest_request_ioctl *g = arg;
	size_t req_size = request == SNP_GET_EXT_REPORT ? sizeof(struct snp_ext_report_req)
			  : request == SNP_GET_REPORT	 ? 96
							 : 32;
	size_t resp_size = request == SNP_GET_DERIVED_KEY ? 64 : 4000;
	uint8_t payload[1 + sizeof(struct snp_ext_report_req)];
	uint32_t len = 1;
	payload[0] = g->msg_version;
	if (g->req_data != 0) {
		memcpy(payload + 1, (void *)(uintptr_t)g->req_data, req_size);
		len += (uint32_t)req_size;
	}
	/* The certificate buffer as the caller declared it before the call. */
	uint64_t certs_address = 0;
	uint32_t certs_len = 0;
	if (request == SNP_GET_EXT_REPORT && g->req_data != 0) {
		struct snp_ext_report_req *ext = (void *)(uintptr_t)g->req_data;
		certs_address = ext->certs_address;
		certs_len = ext->certs_len;
	}
	if (exchange(DEV_SEV, (uint32_t)request, payload, len, &a) != 0)
		return finish(&a);
	g->exitinfo2 = a.exitinfo2;
	if (a.len[0] && g->req_data)
		memcpy((void *)(uintptr_t)g->req_data, a.part[0], min32(a.len[0], req_size));
	if (a.len[1] && g->resp_data)
		memcpy((void *)(uintptr_t)g->resp_data, a.part[1], min32(a.len[1], resp_size));
	if (a.len[2] && certs_address)
		memcpy((void *)(uintptr_t)certs_address, a.part[2], min32(a.len[2], certs_len));
	return finish(&a);
}

static int tdx_ioctl(unsigned long request, void *arg)
{
	struct answer a;
	if (request == TDX_CMD_GET_REPORT0) {
		if (exchange(DEV_TDX, (uint32_t)request, arg, 64, &a) != 0)
			return finish(&a);
		if (a.len[1])
			memcpy((uint8_t *)arg + 64, a.part[1], min32(a.len[1], 1024));
		return finish(&a);
	}
	if (request == TDX_CMD_GET_QUOTE || request == TDX_CMD_GET_QUOTE_V3) {
		struct tdx_quote_req *q = arg;
		uint32_t len = min32(MAX_PART, q->len);
		if (exchange(DEV_TDX, (uint32_t)request, (void *)(uintptr_t)q->buf, len, &a) != 0)
			return finish(&a);
		if (a.len[1])
			memcpy((void *)(uintptr_t)q->buf, a.part[1], min32(a.len[1], len));
		return finish(&a);
	}
	exchange(DEV_TDX, (uint32_t)request, NULL, 0, &a);
	return finish(&a);
}

static int open_device(unsigned device, int flags)
{
	struct answer a;
	resolve();
	if (exchange(device, 0, NULL, 0, &a) != 0 || a.err != 0)
		return finish(&a);
	free_answer(&a);
	int fd = real_open_fn("/dev/null", O_RDWR | (flags & O_CLOEXEC));
	if (fd >= 0 && fd < MAX_FD)
		fd_device[fd] = (unsigned char)device;
	return fd;
}

#define OPEN_BODY(call)                                      \
	unsigned device = device_of_path(path);              \
	if (device != 0)                                     \
		return open_device(device, flags);           \
	mode_t mode = 0;                                     \
	if (flags & (O_CREAT | O_TMPFILE)) {                 \
		va_list ap;                                  \
		va_start(ap, flags);                         \
		mode = va_arg(ap, mode_t);                   \
		va_end(ap);                                  \
	}                                                    \
	return call;

int open(const char *path, int flags, ...)
{
	resolve();
	OPEN_BODY(real_open_fn(path, flags, mode))
}

int open64(const char *path, int flags, ...)
{
	resolve();
	OPEN_BODY(real_open_fn(path, flags, mode))
}

int openat(int dirfd, const char *path, int flags, ...)
{
	static int (*real_openat)(int, const char *, int, ...);
	if (real_openat == NULL)
		real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	OPEN_BODY(real_openat(dirfd, path, flags, mode))
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	static int (*real_openat)(int, const char *, int, ...);
	if (real_openat == NULL)
		real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	OPEN_BODY(real_openat(dirfd, path, flags, mode))
}

int __open_2(const char *path, int flags)
{
	return open(path, flags);
}

int __open64_2(const char *path, int flags)
{
	return open(path, flags);
}

int close(int fd)
{
	resolve();
	if (fd >= 0 && fd < MAX_FD)
		fd_device[fd] = 0;
	return real_close_fn(fd);
}

int ioctl(int fd, unsigned long request, ...)
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	resolve();
	unsigned device = fd >= 0 && fd < MAX_FD ? fd_device[fd] : 0;
	if (device == DEV_SEV) {
		if (request == SNP_GET_REPORT || request == SNP_GET_EXT_REPORT || request == SNP_GET_DERIVED_KEY)
			return snp_ioctl(request, arg);
		struct answer a;
		exchange(DEV_SEV, (uint32_t)request, NULL, 0, &a);
		return finish(&a);
	}
	if (device == DEV_TDX)
		return tdx_ioctl(request, arg);
	return real_ioctl_fn(fd, request, arg);
}
