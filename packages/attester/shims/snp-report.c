/*
 * broker-snp-report: an SEV-SNP attestation report from /dev/sev-guest, for
 * kernels without configfs-tsm. The ABI is Linux's include/uapi/linux/sev-guest.h,
 * restated here so the build needs no kernel headers.
 *
 * Request (shim.h): flags bit 0 = also fetch the host's certificate table
 * (SNP_GET_EXT_REPORT), argument = VMPL (0-3), report data[64].
 *
 * With the table: SNP_GET_EXT_REPORT with a one-page certificate buffer; when
 * the host needs more, the kernel answers ENOSPC (kernels before 5.19's fix) or
 * EIO with SNP_GUEST_VMM_ERR_INVALID_LEN in exitinfo2's upper half and the
 * needed length in certs_len, and the request is repeated once with that
 * length. A kernel without the extended request (ENOTTY) gets SNP_GET_REPORT,
 * and the answer carries no table. Without the flag: SNP_GET_REPORT, as the sev
 * crate's get_report.
 *
 * Answer: magic "BSNP", flags (bit 0 extended request used, bit 1 the extended
 * request was missing and SNP_GET_REPORT answered, bit 2 the certificate buffer
 * was enlarged), part 1 = the 1184-byte report, part 2 = the certificate table
 * as the kernel returned it (empty when the host supplied none: an all-zero
 * buffer).
 */
#include <fcntl.h>
#include <sys/ioctl.h>

#include "shim.h"

#define SEV_GUEST_DEVICE "/dev/sev-guest"
#define PAGE 4096u
/* The kernel caps the buffer at SEV_FW_BLOB_MAX_SIZE (16 KiB); this leaves room for later kernels. */
#define MAX_CERTS (64u * 1024u)
#define REPORT_SIZE 1184u
#define RESP_SIZE 4000u
#define VMM_ERR_INVALID_LEN 1u
#define VMM_ERR_BUSY 2u

struct snp_report_req {
	uint8_t user_data[64];
	uint32_t vmpl;
	uint8_t rsvd[28];
};

struct snp_report_resp {
	uint8_t data[RESP_SIZE];
};

struct snp_guest_request_ioctl {
	uint8_t msg_version;
	uint64_t req_data;
	uint64_t resp_data;
	uint64_t exitinfo2; /* bits 63:32 VMM error, bits 31:0 firmware error */
};

struct snp_ext_report_req {
	struct snp_report_req data;
	uint64_t certs_address;
	uint32_t certs_len;
};

_Static_assert(sizeof(struct snp_report_req) == 96, "snp_report_req is 96 bytes");
_Static_assert(sizeof(struct snp_guest_request_ioctl) == 32, "snp_guest_request_ioctl is 32 bytes");
_Static_assert(sizeof(struct snp_ext_report_req) == 112, "snp_ext_report_req is 112 bytes");

#define SNP_GET_REPORT _IOWR('S', 0x0, struct snp_guest_request_ioctl)
#define SNP_GET_EXT_REPORT _IOWR('S', 0x2, struct snp_guest_request_ioctl)

#define FLAG_EXTENDED 1u
#define FLAG_FELL_BACK 2u
#define FLAG_ENLARGED 4u

/* MSG_REPORT_RSP (SEV-SNP firmware ABI): status, report size, 24 reserved bytes, the report. */
static void check_response(const struct snp_report_resp *resp)
{
	uint32_t status = get_le32(resp->data);
	uint32_t size = get_le32(resp->data + 4);
	if (status != 0)
		fail(EXIT_FIRMWARE, "the firmware answered the report request with status 0x%x", status);
	if (size != REPORT_SIZE)
		fail(EXIT_MALFORMED, "the firmware's report is %u bytes, not %u", size, REPORT_SIZE);
}

/* Classifies a failed request: host (VMM) code, firmware code, or a plain errno. */
__attribute__((noreturn)) static void request_failed(const char *what, int err, uint64_t exitinfo2)
{
	uint32_t vmm = (uint32_t)(exitinfo2 >> 32);
	uint32_t fw = (uint32_t)exitinfo2;
	/* All ones: the kernel refused before reaching the firmware (SEV_RET_NO_FW_CALL). */
	if (exitinfo2 != 0 && exitinfo2 != UINT64_MAX) {
		if (vmm == VMM_ERR_BUSY)
			fail(EXIT_HOST, "%s: the host is busy (rate limited), try again later", what);
		if (vmm != 0)
			fail(EXIT_HOST, "%s: the host refused it with VMM error %u (%s)", what, vmm, strerror(err));
		fail(EXIT_FIRMWARE, "%s: firmware error 0x%x (%s)", what, fw, strerror(err));
	}
	fail(EXIT_IOCTL, "%s failed: %s", what, strerror(err));
}

static int plain_report(int fd, const struct snp_report_req *req, struct snp_report_resp *resp)
{
	struct snp_guest_request_ioctl guest = {
		.msg_version = 1,
		.req_data = (uint64_t)(uintptr_t)req,
		.resp_data = (uint64_t)(uintptr_t)resp,
	};
	if (ioctl(fd, SNP_GET_REPORT, &guest) != 0)
		request_failed("SNP_GET_REPORT", errno, guest.exitinfo2);
	check_response(resp);
	return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Returns the certificate buffer (its length in *len, 0 for none); sets the answer flags. */
static uint8_t *extended_report(int fd, const struct snp_report_req *req, struct snp_report_resp *resp,
				uint32_t *len, uint32_t *flags)
{
	uint32_t certs_len = PAGE;
	uint8_t *certs = NULL;
	for (int attempt = 0;; attempt++) {
		free(certs);
		if (posix_memalign((void **)&certs, PAGE, certs_len) != 0)
			fail(EXIT_OUTPUT, "out of memory");
		memset(certs, 0, certs_len);
		struct snp_ext_report_req ext = {
			.data = *req,
			.certs_address = (uint64_t)(uintptr_t)certs,
			.certs_len = certs_len,
		};
		struct snp_guest_request_ioctl guest = {
			.msg_version = 1,
			.req_data = (uint64_t)(uintptr_t)&ext,
			.resp_data = (uint64_t)(uintptr_t)resp,
		};
		int rc = ioctl(fd, SNP_GET_EXT_REPORT, &guest);
		int err = rc != 0 ? errno : 0;
		uint32_t vmm = guest.exitinfo2 == UINT64_MAX ? 0 : (uint32_t)(guest.exitinfo2 >> 32);
		if (rc != 0 && (err == ENOTTY || err == EOPNOTSUPP)) {
			/* No extended request on this kernel: the report alone, as SNP_GET_REPORT gives it. */
			free(certs);
			plain_report(fd, req, resp);
			*flags |= FLAG_FELL_BACK;
			*len = 0;
			return NULL;
		}
		if (vmm == VMM_ERR_INVALID_LEN || (rc != 0 && err == ENOSPC)) {
			uint32_t needed = ext.certs_len;
			if (attempt > 0)
				fail(EXIT_MALFORMED, "the host still wants a larger certificate buffer after one retry");
			if (needed <= certs_len || needed > MAX_CERTS || needed % PAGE != 0)
				fail(EXIT_MALFORMED,
				     "the kernel asked for a certificate buffer of %u bytes (had %u; at most %u, whole pages)",
				     needed, certs_len, MAX_CERTS);
			certs_len = needed;
			*flags |= FLAG_ENLARGED;
			continue;
		}
		if (rc != 0)
			request_failed("SNP_GET_EXT_REPORT", err, guest.exitinfo2);
		check_response(resp);
		*flags |= FLAG_EXTENDED;
		if (all_zero(certs, certs_len)) {
			/* The host supplied no certificates (the kernel hands out the zeroed buffer). */
			free(certs);
			*len = 0;
			return NULL;
		}
		*len = certs_len;
		return certs;
	}
}

int main(int argc, char **argv)
{
	shim_name = "broker-snp-report";
	(void)argv;
	if (argc != 1)
		fail(EXIT_USAGE, "takes no arguments; the request comes on stdin");
	uint8_t request[REQUEST_SIZE];
	read_request(request);
	uint8_t flags_in = request[1];
	uint8_t vmpl = request[2];
	if (flags_in & ~1u)
		fail(EXIT_USAGE, "unknown request flags 0x%x", flags_in);
	if (vmpl > 3)
		fail(EXIT_USAGE, "VMPL %u is not 0-3", vmpl);

	struct snp_report_req req;
	memset(&req, 0, sizeof(req));
	memcpy(req.user_data, request + 4, REPORT_DATA_SIZE);
	req.vmpl = vmpl;

	int fd = open(SEV_GUEST_DEVICE, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fail(EXIT_NO_DEVICE, "cannot open %s: %s", SEV_GUEST_DEVICE, strerror(errno));

	static struct snp_report_resp resp;
	uint32_t flags = 0, certs_len = 0;
	uint8_t *certs = NULL;
	if (flags_in & 1u)
		certs = extended_report(fd, &req, &resp, &certs_len, &flags);
	else
		plain_report(fd, &req, &resp);
	close(fd);

	write_answer("BSNP", flags, resp.data + 32, REPORT_SIZE, certs, certs_len);
	free(certs);
	return EXIT_OK;
}
