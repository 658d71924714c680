/*
 * What the two ioctl shims share: the request framing on stdin, the answer
 * framing on stdout, the exit codes per failure class, and careful I/O.
 *
 * A shim reads one fixed-size request from stdin (exactly REQUEST_SIZE bytes,
 * then end of file), talks to the device, and writes one answer to stdout
 * only once everything succeeded, so a failure never leaves partial evidence
 * behind. On failure it prints one line to stderr and exits with the class's
 * code. src/ioctl-shim.ts is the other side of this contract.
 *
 * Request:  u8 version (1), u8 operation/flags, u8 argument, u8 zero, report data[64]
 * Answer:   magic[4], u32 LE flags, u32 LE length of part 1, u32 LE length of part 2,
 *           part 1, part 2
 */
#ifndef BROKER_SHIM_H
#define BROKER_SHIM_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define REQUEST_VERSION 1
#define REQUEST_SIZE 68
#define REPORT_DATA_SIZE 64

/* Exit codes, one per failure class (the attester maps them to its errors). */
enum shim_exit {
	EXIT_OK = 0,
	EXIT_USAGE = 2,	     /* bad command line or request framing */
	EXIT_NO_DEVICE = 3,  /* the device node cannot be opened */
	EXIT_IOCTL = 4,	     /* the ioctl failed with an errno and no firmware or host code */
	EXIT_FIRMWARE = 5,   /* the firmware (AMD-SP) refused the request */
	EXIT_HOST = 6,	     /* the host (VMM, quote service) refused or is busy */
	EXIT_MALFORMED = 7,  /* the answer has the wrong size or shape */
	EXIT_TRANSPORT = 8,  /* the quote service could not be reached or hung up */
	EXIT_OUTPUT = 9,     /* stdout could not be written */
	EXIT_UNSUPPORTED = 10 /* no way to do this on this kernel */
};

static const char *shim_name = "shim";

__attribute__((noreturn, format(printf, 2, 3))) static void fail(int code, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", shim_name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

/* The request: exactly REQUEST_SIZE bytes, then end of file. */
static void read_request(uint8_t req[REQUEST_SIZE])
{
	size_t got = 0;
	uint8_t extra;
	while (got < REQUEST_SIZE) {
		ssize_t n = read(STDIN_FILENO, req + got, REQUEST_SIZE - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail(EXIT_USAGE, "reading the request: %s", strerror(errno));
		if (n == 0)
			fail(EXIT_USAGE, "the request has %zu bytes, not %d", got, REQUEST_SIZE);
		got += (size_t)n;
	}
	for (;;) {
		ssize_t n = read(STDIN_FILENO, &extra, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != 0)
			fail(EXIT_USAGE, "the request is longer than %d bytes", REQUEST_SIZE);
		break;
	}
	if (req[0] != REQUEST_VERSION)
		fail(EXIT_USAGE, "request version %u is not %d", req[0], REQUEST_VERSION);
	if (req[3] != 0)
		fail(EXIT_USAGE, "request byte 3 must be zero");
}

static void write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail(EXIT_OUTPUT, "writing the answer: %s", w < 0 ? strerror(errno) : "short write");
		p += w;
		n -= (size_t)w;
	}
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The answer, written in one go at the very end. */
static void write_answer(const char magic[4], uint32_t flags, const uint8_t *part1, uint32_t len1,
			 const uint8_t *part2, uint32_t len2)
{
	uint8_t head[16];
	memcpy(head, magic, 4);
	put_le32(head + 4, flags);
	put_le32(head + 8, len1);
	put_le32(head + 12, len2);
	size_t total = sizeof(head) + (size_t)len1 + (size_t)len2;
	uint8_t *out = malloc(total);
	if (out == NULL)
		fail(EXIT_OUTPUT, "out of memory");
	memcpy(out, head, sizeof(head));
	if (len1)
		memcpy(out + sizeof(head), part1, len1);
	if (len2)
		memcpy(out + sizeof(head) + len1, part2, len2);
	write_all(STDOUT_FILENO, out, total);
	free(out);
}

#endif
