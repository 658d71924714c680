// The device certificate chain an NVIDIA GPU sends with its report: PEM certificates, the
// attestation (leaf) certificate first and NVIDIA's device identity root last, e.g. for an H100:
// GSP FMC LF ← GSP BROM ← GH100 Provisioner ICA ← GH100 Identity ← NVIDIA Device Identity CA.
import { X509Certificate } from 'node:crypto';
import { quote, VerificationError } from '../errors.js';
import { certificateFields } from '../x509/der.js';
import { NVIDIA_DEVICE_ROOT_PEM } from './device-root.js';

/** TCG DICE TcbInfo (2.23.133.5.4.1): the leaf's firmware ID ends its value. */
export const OID_TCG_DICE_TCB_INFO = '2.23.133.5.4.1';
const FWID_SIZE = 48;
export const MAX_CHAIN_CERTIFICATES = 10;
const PEM_RE = /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]*?)-----END CERTIFICATE-----/g;

function chainError(message: string): VerificationError {
  return new VerificationError('CERT_CHAIN_INVALID', `NVIDIA certificate chain: ${message}`);
}

/** The certificates of a PEM bundle in order; text between them is ignored, as OpenSSL does. */
export function parsePemChain(pem: string): X509Certificate[] {
  const certs: X509Certificate[] = [];
  for (const m of pem.matchAll(PEM_RE)) {
    if (certs.length === MAX_CHAIN_CERTIFICATES) {
      throw new VerificationError(
        'EVIDENCE_TOO_LARGE',
        `NVIDIA certificate chain has more than ${MAX_CHAIN_CERTIFICATES} certificates`,
      );
    }
    try {
      certs.push(new X509Certificate(Buffer.from(m[1]!.replace(/\s/g, ''), 'base64')));
    } catch (e) {
      throw new VerificationError('CERT_MALFORMED', `NVIDIA certificate ${certs.length + 1} does not parse`, {
        cause: e,
      });
    }
  }
  return certs;
}

/** Hex of the last 48 bytes of the leaf's TcbInfo extension value: the firmware ID the report repeats. */
export function certificateFwid(cert: X509Certificate): string {
  let ext: Uint8Array | undefined;
  try {
    ext = certificateFields(cert.raw).extensions.get(OID_TCG_DICE_TCB_INFO);
  } catch (e) {
    throw new VerificationError('CERT_MALFORMED', 'NVIDIA attestation certificate extensions do not parse', {
      cause: e,
    });
  }
  if (ext === undefined) {
    throw new VerificationError(
      'CERT_MALFORMED',
      'NVIDIA attestation certificate has no FWID (TcbInfo) extension',
    );
  }
  if (ext.length < FWID_SIZE) {
    throw new VerificationError(
      'CERT_MALFORMED',
      'NVIDIA attestation certificate TcbInfo is shorter than a FWID',
    );
  }
  return Buffer.from(ext.subarray(ext.length - FWID_SIZE)).toString('hex');
}

let pinnedRoot: X509Certificate | undefined;
function nvidiaRoot(): X509Certificate {
  pinnedRoot ??= new X509Certificate(NVIDIA_DEVICE_ROOT_PEM);
  return pinnedRoot;
}

function validAt(cert: X509Certificate, now: Date, what: string): void {
  if (now < new Date(cert.validFrom) || now > new Date(cert.validTo)) {
    throw new VerificationError(
      'CERT_NOT_VALID_AT_TIME',
      `NVIDIA ${what} certificate ${quote(cert.subject.replace(/\n/g, ', '))} is not valid at ${now.toISOString()}`,
    );
  }
}

export interface ChainOptions {
  readonly now: Date;
  /** The firmware ID the report carries (opaque `fwid`, hex). */
  readonly fwid: unknown;
  /** Roots trusted besides NVIDIA's (PEM), e.g. the mock TEE's simulated device root. */
  readonly extraRoots?: readonly string[];
}

/**
 * The chain's checks, in trustee's order: at least a leaf and a root; the last certificate is a
 * trusted root (compared by SHA-1 fingerprint, as trustee does); the leaf's FWID equals the
 * report's; every certificate is issued and signed by the next one, issuers are CAs, and all are
 * valid at `now`. Revocation is not checked: the evidence carries no OCSP or CRL data.
 */
export function verifyNvidiaChain(certs: readonly X509Certificate[], opts: ChainOptions): void {
  if (certs.length < 2) throw chainError('needs at least the attestation certificate and the root');
  const roots = [nvidiaRoot(), ...(opts.extraRoots ?? []).map((pem) => new X509Certificate(pem))];
  const last = certs[certs.length - 1]!;
  const root = roots.find((r) => r.fingerprint === last.fingerprint);
  if (root === undefined) throw chainError('the last certificate is not the NVIDIA device identity root');
  if (typeof opts.fwid !== 'string') {
    throw new VerificationError('REPORT_MALFORMED', 'NVIDIA report: the opaque data has no fwid');
  }
  const leafFwid = certificateFwid(certs[0]!);
  if (leafFwid !== opts.fwid) {
    throw chainError(`FWID mismatch: attestation certificate ${leafFwid}, report ${quote(opts.fwid, 96)}`);
  }
  if (!root.verify(root.publicKey)) throw chainError('the root is not self-signed');
  validAt(root, opts.now, 'root');
  for (let i = 0; i < certs.length - 1; i++) {
    const cert = certs[i]!;
    const issuer = certs[i + 1]!;
    const what = i === 0 ? 'attestation' : `chain (position ${i + 1})`;
    if (!issuer.ca) throw chainError(`certificate ${i + 2} issues certificate ${i + 1} but is not a CA`);
    if (!cert.checkIssued(issuer) || !cert.verify(issuer.publicKey)) {
      throw chainError(`certificate ${i + 1} is not issued and signed by certificate ${i + 2}`);
    }
    validAt(cert, opts.now, what);
  }
}
