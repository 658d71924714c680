/*
 * broker-tdx-report: a TD report or a TD quote from /dev/tdx_guest, for kernels
 * without configfs-tsm. The ABI is Linux's include/uapi/linux/tdx-guest.h
 * (TDX_CMD_GET_REPORT0) and, for the quote, what Intel's tdx-attest library does
 * without configfs-tsm: the TD report goes to the quote generation service (QGS)
 * in a qgs_msg GET_QUOTE_REQ, over vsock to the host at the port configured in
 * /etc/tdx-attest.conf (`port = N`), or, when no port is configured, through the
 * legacy GetQuote ioctl of kernels that have it (TDX_CMD_GET_QUOTE). Both carry
 * the message behind a 4-byte big-endian length.
 *
 * Usage: broker-tdx-report [--qgs vsock:CID:PORT | --qgs tcp:IP:PORT] [--config FILE]
 *   --qgs overrides the configuration file (tcp: a numeric address, for tests and
 *   for hosts that forward the QGS); --config names another configuration file.
 *
 * Request (shim.h): operation (1 = TD report, 2 = quote), argument zero, report data[64].
 * Answer: magic "BTDX", flags (1 report, 2 quote over vsock, 3 quote over tcp,
 * 4 quote through the GetQuote ioctl), part 1 = the 1024-byte TD report or the
 * quote, part 2 empty.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "shim.h"

#define TDX_GUEST_DEVICE "/dev/tdx_guest"
#define DEFAULT_CONFIG "/etc/tdx-attest.conf"
#define TD_REPORT_SIZE 1024u
#define TD_REPORT_TYPE_TDX 0x81
/* tdx-attest's request buffer: 4 pages, less the GetQuote header and the length prefix. */
#define QUOTE_BUF_SIZE (4u * 4096u)
#define MAX_QGS_MESSAGE (QUOTE_BUF_SIZE - 24u - 4u)

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#define VMADDR_CID_HOST 2u

/* <linux/vm_sockets.h>'s sockaddr_vm, restated for libcs without kernel headers. */
struct vsock_addr {
	sa_family_t svm_family;
	unsigned short svm_reserved1;
	unsigned int svm_port;
	unsigned int svm_cid;
	unsigned char svm_zero[sizeof(struct sockaddr) - sizeof(sa_family_t) - sizeof(unsigned short) -
			       2 * sizeof(unsigned int)];
};

struct tdx_report_req {
	uint8_t reportdata[64];
	uint8_t tdreport[TD_REPORT_SIZE];
};

/* The legacy GetQuote ioctl's argument and the shared buffer's header (Intel's backport kernels). */
struct tdx_quote_req {
	uint64_t buf;
	uint64_t len;
};

struct tdx_quote_hdr {
	uint64_t version;
	uint64_t status;
	uint32_t in_len;
	uint32_t out_len;
};

_Static_assert(sizeof(struct tdx_report_req) == 1088, "tdx_report_req is 1088 bytes");
_Static_assert(sizeof(struct tdx_quote_req) == 16, "tdx_quote_req is 16 bytes");
_Static_assert(sizeof(struct tdx_quote_hdr) == 24, "tdx_quote_hdr is 24 bytes");

#define TDX_CMD_GET_REPORT0 _IOWR('T', 1, struct tdx_report_req)
#define TDX_CMD_GET_QUOTE _IOR('T', 4, struct tdx_quote_req)
/* Intel's "V3" driver numbered it read-write. */
#define TDX_CMD_GET_QUOTE_V3 _IOWR('T', 4, struct tdx_quote_req)

#define GET_QUOTE_IN_FLIGHT 0xffffffffffffffffull
#define GET_QUOTE_SERVICE_UNAVAILABLE 0x8000000000000001ull

/* qgs_msg_lib: header {u16 major, u16 minor, u32 type, u32 size, u32 error_code}, little endian. */
#define QGS_MAJOR 1
#define QGS_MINOR 1
#define QGS_GET_QUOTE_REQ 0
#define QGS_GET_QUOTE_RESP 1
#define QGS_HEADER 16u
#define QGS_QUOTE_REQ_SIZE (QGS_HEADER + 8u + TD_REPORT_SIZE)

#define OP_REPORT 1
#define OP_QUOTE 2
#define VIA_REPORT 1u
#define VIA_VSOCK 2u
#define VIA_TCP 3u
#define VIA_IOCTL 4u

static void get_td_report(int fd, const uint8_t *report_data, uint8_t *out)
{
	static struct tdx_report_req req;
	memset(&req, 0, sizeof(req));
	memcpy(req.reportdata, report_data, REPORT_DATA_SIZE);
	if (ioctl(fd, TDX_CMD_GET_REPORT0, &req) != 0)
		fail(EXIT_IOCTL, "TDX_CMD_GET_REPORT0 failed: %s", strerror(errno));
	if (req.tdreport[0] != TD_REPORT_TYPE_TDX)
		fail(EXIT_MALFORMED, "the TD report's type is 0x%02x, not 0x%02x", req.tdreport[0], TD_REPORT_TYPE_TDX);
	memcpy(out, req.tdreport, TD_REPORT_SIZE);
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* The length-prefixed GET_QUOTE_REQ for a TD report (no attestation key ID list: Intel's TDQE). */
static void quote_request(const uint8_t *td_report, uint8_t out[4 + QGS_QUOTE_REQ_SIZE])
{
	uint8_t *m = out + 4;
	put_be32(out, QGS_QUOTE_REQ_SIZE);
	memset(m, 0, QGS_QUOTE_REQ_SIZE);
	m[0] = QGS_MAJOR;
	m[2] = QGS_MINOR;
	put_le32(m + 4, QGS_GET_QUOTE_REQ);
	put_le32(m + 8, QGS_QUOTE_REQ_SIZE);
	put_le32(m + 16, TD_REPORT_SIZE);
	put_le32(m + 20, 0);
	memcpy(m + 24, td_report, TD_REPORT_SIZE);
}

/* Checks a GET_QUOTE_RESP of `size` bytes as qgs_msg_inflate_get_quote_resp does; returns the quote. */
static const uint8_t *quote_of_response(const uint8_t *m, uint32_t size, uint32_t *quote_len)
{
	if (size < QGS_HEADER + 8u)
		fail(EXIT_MALFORMED, "the quote service's answer has %u bytes, less than a GET_QUOTE_RESP", size);
	uint32_t major = (uint32_t)m[0] | (uint32_t)m[1] << 8;
	uint32_t type = get_le32(m + 4);
	uint32_t declared = get_le32(m + 8);
	uint32_t error = get_le32(m + 12);
	uint32_t id_size = get_le32(m + 16);
	uint32_t q_size = get_le32(m + 20);
	if (major != QGS_MAJOR)
		fail(EXIT_MALFORMED, "the quote service answered message version %u, not %u", major, QGS_MAJOR);
	if (type != QGS_GET_QUOTE_RESP)
		fail(EXIT_MALFORMED, "the quote service answered message type %u, not GET_QUOTE_RESP", type);
	if (declared != size || (uint64_t)QGS_HEADER + 8u + id_size + q_size != size)
		fail(EXIT_MALFORMED, "the quote service's answer sizes do not add up (%u bytes, header %u, id %u, quote %u)",
		     size, declared, id_size, q_size);
	if (error != 0)
		fail(EXIT_HOST, "the quote service refused the request: error 0x%x", error);
	if (q_size == 0)
		fail(EXIT_MALFORMED, "the quote service answered success with an empty quote");
	*quote_len = q_size;
	return m + QGS_HEADER + 8u + id_size;
}

static void recv_exact(int s, uint8_t *p, uint32_t n, const char *what)
{
	uint32_t got = 0;
	while (got < n) {
		ssize_t r = recv(s, p + got, n - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail(EXIT_TRANSPORT, "reading %s from the quote service: %s", what, strerror(errno));
		if (r == 0)
			fail(EXIT_TRANSPORT, "the quote service hung up after %u of %u bytes of %s", got, n, what);
		got += (uint32_t)r;
	}
}

/* Parses vsock:CID:PORT or tcp:IP:PORT into a socket address. */
static int parse_address(const char *spec, struct sockaddr_storage *sa, socklen_t *len, uint32_t *via)
{
	memset(sa, 0, sizeof(*sa));
	if (strncmp(spec, "vsock:", 6) == 0) {
		char *end;
		errno = 0;
		unsigned long cid = strtoul(spec + 6, &end, 10);
		if (errno || end == spec + 6 || *end != ':' || cid > UINT32_MAX)
			return -1;
		const char *p = end + 1;
		unsigned long port = strtoul(p, &end, 10);
		if (errno || end == p || *end || port == 0 || port > UINT32_MAX)
			return -1;
		struct vsock_addr *v = (struct vsock_addr *)sa;
		v->svm_family = AF_VSOCK;
		v->svm_cid = (unsigned int)cid;
		v->svm_port = (unsigned int)port;
		*len = sizeof(*v);
		*via = VIA_VSOCK;
		return 0;
	}
	if (strncmp(spec, "tcp:", 4) == 0) {
		const char *host = spec + 4;
		const char *colon = strrchr(host, ':');
		if (colon == NULL || colon == host || colon - host >= 64)
			return -1;
		char ip[64];
		memcpy(ip, host, (size_t)(colon - host));
		ip[colon - host] = 0;
		if (ip[0] == '[' && ip[strlen(ip) - 1] == ']') {
			memmove(ip, ip + 1, strlen(ip));
			ip[strlen(ip) - 1] = 0;
		}
		char *end;
		errno = 0;
		unsigned long port = strtoul(colon + 1, &end, 10);
		if (errno || end == colon + 1 || *end || port == 0 || port > 65535)
			return -1;
		struct sockaddr_in *v4 = (struct sockaddr_in *)sa;
		struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)sa;
		if (inet_pton(AF_INET, ip, &v4->sin_addr) == 1) {
			v4->sin_family = AF_INET;
			v4->sin_port = htons((uint16_t)port);
			*len = sizeof(*v4);
		} else if (inet_pton(AF_INET6, ip, &v6->sin6_addr) == 1) {
			v6->sin6_family = AF_INET6;
			v6->sin6_port = htons((uint16_t)port);
			*len = sizeof(*v6);
		} else {
			return -1;
		}
		*via = VIA_TCP;
		return 0;
	}
	return -1;
}

/*
 * tdx-attest's reading of /etc/tdx-attest.conf: lines starting with '#' are
 * comments; `port = N` (blanks around '=' allowed, at most 10 digits, nothing
 * after) names the vsock port on the host. 0 when there is none.
 */
static unsigned long configured_port(const char *path)
{
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return 0;
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	unsigned long port = 0;
	while ((len = getline(&line, &cap, f)) != -1) {
		char digits[11];
		char hash[2];
		int consumed = 0;
		if (sscanf(line, " %1[#]", hash) == 1)
			continue;
		if (len > 0 && line[len - 1] == '\n')
			line[len - 1] = 0;
		if (sscanf(line, " port = %10[0-9] %n", digits, &consumed) == 1 && consumed > 0 &&
		    line[consumed] == 0) {
			char *end;
			errno = 0;
			port = strtoul(digits, &end, 10);
			if (errno || *end || port > UINT32_MAX)
				port = 0;
			break;
		}
	}
	free(line);
	fclose(f);
	return port;
}

static uint8_t *quote_over_socket(const struct sockaddr_storage *sa, socklen_t len, const uint8_t *td_report,
				  uint32_t *quote_len)
{
	static uint8_t req[4 + QGS_QUOTE_REQ_SIZE];
	quote_request(td_report, req);
	int s = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		fail(EXIT_TRANSPORT, "cannot make a socket for the quote service: %s", strerror(errno));
	if (connect(s, (const struct sockaddr *)sa, len) != 0)
		fail(EXIT_TRANSPORT, "cannot connect to the quote service: %s", strerror(errno));
	for (size_t sent = 0; sent < sizeof(req);) {
		ssize_t w = send(s, req + sent, sizeof(req) - sent, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			fail(EXIT_TRANSPORT, "sending the request to the quote service: %s",
			     w < 0 ? strerror(errno) : "short write");
		sent += (size_t)w;
	}
	uint8_t prefix[4];
	recv_exact(s, prefix, 4, "the length");
	uint32_t size = get_be32(prefix);
	if (size > MAX_QGS_MESSAGE)
		fail(EXIT_MALFORMED, "the quote service announced %u bytes, more than %u", size, MAX_QGS_MESSAGE);
	uint8_t *msg = malloc(size ? size : 1);
	if (msg == NULL)
		fail(EXIT_OUTPUT, "out of memory");
	recv_exact(s, msg, size, "the answer");
	close(s);
	const uint8_t *q = quote_of_response(msg, size, quote_len);
	uint8_t *quote = malloc(*quote_len);
	if (quote == NULL)
		fail(EXIT_OUTPUT, "out of memory");
	memcpy(quote, q, *quote_len);
	free(msg);
	return quote;
}

static uint8_t *quote_over_ioctl(int fd, const uint8_t *td_report, uint32_t *quote_len)
{
	uint8_t *buf;
	if (posix_memalign((void **)&buf, 4096, QUOTE_BUF_SIZE) != 0)
		fail(EXIT_OUTPUT, "out of memory");
	memset(buf, 0, QUOTE_BUF_SIZE);
	struct tdx_quote_hdr *hdr = (struct tdx_quote_hdr *)buf;
	uint8_t *payload = buf + sizeof(*hdr);
	quote_request(td_report, payload);
	hdr->version = 1;
	hdr->in_len = 4 + QGS_QUOTE_REQ_SIZE;
	struct tdx_quote_req arg = { .buf = (uint64_t)(uintptr_t)buf, .len = QUOTE_BUF_SIZE };
	if (ioctl(fd, TDX_CMD_GET_QUOTE, &arg) != 0) {
		if (errno != ENOTTY)
			fail(EXIT_IOCTL, "TDX_CMD_GET_QUOTE failed: %s", strerror(errno));
		if (ioctl(fd, TDX_CMD_GET_QUOTE_V3, &arg) != 0) {
			if (errno == ENOTTY)
				fail(EXIT_UNSUPPORTED,
				     "no quote path: no configfs-tsm, no QGS port in %s, and %s has no GetQuote ioctl",
				     DEFAULT_CONFIG, TDX_GUEST_DEVICE);
			fail(EXIT_IOCTL, "TDX_CMD_GET_QUOTE failed: %s", strerror(errno));
		}
	}
	if (hdr->status == GET_QUOTE_IN_FLIGHT)
		fail(EXIT_HOST, "GetQuote: the host has not finished the quote (in flight), try again later");
	if (hdr->status == GET_QUOTE_SERVICE_UNAVAILABLE)
		fail(EXIT_HOST, "GetQuote: the host's quote service is unavailable");
	if (hdr->status != 0)
		fail(EXIT_HOST, "GetQuote: the host answered status 0x%llx", (unsigned long long)hdr->status);
	if (hdr->out_len <= 4 || hdr->out_len > QUOTE_BUF_SIZE - sizeof(*hdr))
		fail(EXIT_MALFORMED, "GetQuote: the host's answer length %u does not fit the buffer", hdr->out_len);
	uint32_t size = get_be32(payload);
	if (size != hdr->out_len - 4)
		fail(EXIT_MALFORMED, "GetQuote: the answer's length prefix %u disagrees with out_len %u", size,
		     hdr->out_len);
	const uint8_t *q = quote_of_response(payload + 4, size, quote_len);
	uint8_t *quote = malloc(*quote_len);
	if (quote == NULL)
		fail(EXIT_OUTPUT, "out of memory");
	memcpy(quote, q, *quote_len);
	free(buf);
	return quote;
}

int main(int argc, char **argv)
{
	shim_name = "broker-tdx-report";
	const char *qgs = NULL;
	const char *config = DEFAULT_CONFIG;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--qgs") == 0 && i + 1 < argc)
			qgs = argv[++i];
		else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			config = argv[++i];
		else
			fail(EXIT_USAGE, "unknown argument %s (usage: [--qgs vsock:CID:PORT|tcp:IP:PORT] [--config FILE])",
			     argv[i]);
	}
	uint8_t request[REQUEST_SIZE];
	read_request(request);
	uint8_t op = request[1];
	if (op != OP_REPORT && op != OP_QUOTE)
		fail(EXIT_USAGE, "unknown operation %u", op);
	if (request[2] != 0)
		fail(EXIT_USAGE, "request byte 2 must be zero");

	struct sockaddr_storage sa;
	socklen_t sa_len = 0;
	uint32_t via = VIA_REPORT;
	if (op == OP_QUOTE) {
		if (qgs != NULL) {
			if (parse_address(qgs, &sa, &sa_len, &via) != 0)
				fail(EXIT_USAGE, "--qgs %s is not vsock:CID:PORT or tcp:IP:PORT", qgs);
		} else {
			unsigned long port = configured_port(config);
			if (port != 0) {
				struct vsock_addr *v = (struct vsock_addr *)&sa;
				memset(&sa, 0, sizeof(sa));
				v->svm_family = AF_VSOCK;
				v->svm_cid = VMADDR_CID_HOST;
				v->svm_port = (unsigned int)port;
				sa_len = sizeof(*v);
				via = VIA_VSOCK;
			} else {
				via = VIA_IOCTL;
			}
		}
	}

	int fd = open(TDX_GUEST_DEVICE, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		fail(EXIT_NO_DEVICE, "cannot open %s: %s", TDX_GUEST_DEVICE, strerror(errno));
	static uint8_t td_report[TD_REPORT_SIZE];
	get_td_report(fd, request + 4, td_report);
	if (op == OP_REPORT) {
		close(fd);
		write_answer("BTDX", VIA_REPORT, td_report, TD_REPORT_SIZE, NULL, 0);
		return EXIT_OK;
	}
	uint32_t quote_len = 0;
	uint8_t *quote = via == VIA_IOCTL ? quote_over_ioctl(fd, td_report, &quote_len)
					  : quote_over_socket(&sa, sa_len, td_report, &quote_len);
	close(fd);
	write_answer("BTDX", via, quote, quote_len, NULL, 0);
	free(quote);
	return EXIT_OK;
}
