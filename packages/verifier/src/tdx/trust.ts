// Trust anchors and signature primitives of Intel DCAP: the Intel SGX Root CA (built in, pinned),
// test roots the operator configures (the mock TEE's), certificate chains to them, and the raw
// ECDSA P-256 signatures (r‖s) that quotes, QE reports and collateral carry.
import { createHash, createPublicKey, type KeyObject, verify, X509Certificate } from 'node:crypto';
import { VerificationError, VerifierError } from '../errors.js';
import { checkValidity, pemCertificates } from '../snp/certs.js';
import { certificateFields } from '../x509/der.js';
import {
  INTEL_SGX_ROOT_CA_PEM,
  INTEL_SGX_ROOT_CA_SHA256,
  INTEL_SGX_TCB_SIGNING_PEM,
  INTEL_SGX_TCB_SIGNING_SHA256,
} from './intel-roots.gen.js';

export interface SgxRoot {
  /** `Intel SGX Root CA` for the built-in root, `configured` for the others. */
  readonly name: string;
  readonly builtin: boolean;
  readonly cert: X509Certificate;
}

/** Roots accept only certificates they signed themselves; a configured root must be self-signed. */
function signedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

const sha256Hex = (der: Uint8Array) => createHash('sha256').update(der).digest('hex');

let builtin: { root: SgxRoot; tcbSigning: X509Certificate } | undefined;

/** Intel's root and TCB signing certificate, parsed and checked against their pinned digests once. */
export function builtinIntelCerts(): { readonly root: SgxRoot; readonly tcbSigning: X509Certificate } {
  if (builtin === undefined) {
    const root = new X509Certificate(INTEL_SGX_ROOT_CA_PEM);
    const tcbSigning = new X509Certificate(INTEL_SGX_TCB_SIGNING_PEM);
    // Constants of this program: a mismatch is a build defect, not bad input.
    if (sha256Hex(root.raw) !== INTEL_SGX_ROOT_CA_SHA256 || !signedBy(root, root)) {
      throw new VerifierError(
        'BUILTIN_CERTS_INVALID',
        'built-in Intel SGX Root CA does not match its pinned digest',
      );
    }
    if (sha256Hex(tcbSigning.raw) !== INTEL_SGX_TCB_SIGNING_SHA256 || !signedBy(tcbSigning, root)) {
      throw new VerifierError(
        'BUILTIN_CERTS_INVALID',
        'built-in Intel SGX TCB Signing certificate does not verify',
      );
    }
    builtin = { root: { name: 'Intel SGX Root CA', builtin: true, cert: root }, tcbSigning };
  }
  return builtin;
}

const MAX_ROOT_PEM_CHARS = 64 * 1024;
const rootCache = new Map<string, SgxRoot[]>();
const ROOT_CACHE_MAX = 16;

/**
 * Roots from configuration (PEM; each self-signed certificate in the text is one root). Meant
 * for test hardware such as the mock TEE; Intel's root is always trusted.
 */
export function configuredSgxRoots(pems: readonly string[] | undefined): SgxRoot[] {
  const out: SgxRoot[] = [];
  for (const pem of pems ?? []) {
    let roots = rootCache.get(pem);
    if (roots === undefined) {
      if (pem.length > MAX_ROOT_PEM_CHARS) {
        throw new VerificationError(
          'EVIDENCE_TOO_LARGE',
          `trusted SGX root PEM is longer than ${MAX_ROOT_PEM_CHARS} characters`,
        );
      }
      roots = pemCertificates(pem, 8).map((der) => {
        let cert: X509Certificate;
        try {
          certificateFields(der);
          cert = new X509Certificate(der);
        } catch (e) {
          throw new VerificationError('CERT_MALFORMED', 'trusted SGX root is not a certificate', {
            cause: e,
          });
        }
        if (!signedBy(cert, cert))
          throw new VerificationError('CERT_CHAIN_INVALID', 'trusted SGX root is not self-signed');
        return { name: 'configured', builtin: false, cert };
      });
      if (roots.length === 0)
        throw new VerificationError('CERT_MALFORMED', 'trusted SGX root PEM holds no certificate');
      if (rootCache.size >= ROOT_CACHE_MAX) rootCache.delete(rootCache.keys().next().value!);
      rootCache.set(pem, roots);
    }
    out.push(...roots);
  }
  return out;
}

/** Intel's root followed by the configured ones. */
export function trustedSgxRoots(configured: readonly string[] | undefined): SgxRoot[] {
  return [builtinIntelCerts().root, ...configuredSgxRoots(configured)];
}

/** The trusted root that signed `cert`, or undefined. */
export function rootOf(cert: X509Certificate, roots: readonly SgxRoot[]): SgxRoot | undefined {
  return roots.find((r) => signedBy(cert, r.cert));
}

/**
 * Checks `leaf` ← `intermediate` ← trusted root, every certificate valid at `now`, and that the
 * intermediate is a CA and the leaf is not. Returns the root.
 */
export function verifyChain(
  leaf: X509Certificate,
  intermediate: X509Certificate | undefined,
  roots: readonly SgxRoot[],
  now: Date,
  what: string,
): SgxRoot {
  const top = intermediate ?? leaf;
  const root = rootOf(top, roots);
  if (root === undefined) {
    throw new VerificationError('CERT_CHAIN_INVALID', `${what} does not chain to a trusted SGX root`);
  }
  if (intermediate !== undefined) {
    if (!intermediate.ca)
      throw new VerificationError('CERT_CHAIN_INVALID', `${what} intermediate is not a CA`);
    if (!signedBy(leaf, intermediate)) {
      throw new VerificationError('CERT_CHAIN_INVALID', `${what} leaf is not signed by its intermediate`);
    }
    checkValidity(intermediate, now, `${what} intermediate`);
  }
  if (leaf.ca) throw new VerificationError('CERT_CHAIN_INVALID', `${what} leaf is a CA certificate`);
  checkValidity(leaf, now, `${what} leaf`);
  checkValidity(root.cert, now, root.builtin ? root.name : 'configured SGX root');
  return root;
}

/** A P-256 public key from its raw x‖y coordinates. */
export function p256Key(xy: Uint8Array): KeyObject {
  if (xy.length !== 64) throw new VerificationError('REPORT_MALFORMED', 'P-256 key is not 64 bytes');
  const b = Buffer.from(xy);
  try {
    return createPublicKey({
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: b.subarray(0, 32).toString('base64url'),
        y: b.subarray(32).toString('base64url'),
      },
      format: 'jwk',
    });
  } catch (e) {
    throw new VerificationError('REPORT_MALFORMED', 'attestation key is not a P-256 point', { cause: e });
  }
}

/** ECDSA P-256 / SHA-256, signature as r‖s. OpenSSL errors (bad keys) count as failures. */
export function verifyP256(key: KeyObject, data: Uint8Array, signature: Uint8Array): boolean {
  if (signature.length !== 64) return false;
  try {
    return verify('sha256', data, { key, dsaEncoding: 'ieee-p1363' }, signature);
  } catch {
    return false;
  }
}

/** SHA-384 of the root's public key as an uncompressed point: QVL's `root_key_id`. */
export function rootKeyId(root: X509Certificate): string {
  const jwk = root.publicKey.export({ format: 'jwk' });
  if (jwk.x === undefined || jwk.y === undefined) return '';
  const point = Buffer.concat([
    Buffer.from([4]),
    Buffer.from(jwk.x, 'base64url'),
    Buffer.from(jwk.y, 'base64url'),
  ]);
  return createHash('sha384').update(point).digest('hex');
}
