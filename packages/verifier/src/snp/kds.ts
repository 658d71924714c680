// AMD's Key Distribution Service beyond the VCEK: the ASK/ARK chain (`/vcek/v1/<product>/cert_chain`)
// and the ARK's CRL (`/vcek/v1/<product>/crl`), fetched when a VCEK came from KDS, so that a VCEK
// whose ASK AMD revoked is refused. trustee calls neither; the chain it would get is AMD's
// published one, the same as the built-in roots, so the KDS chain adds nothing unless its ARK is a
// trusted one: the fetched ARK must be signed by a trusted ARK, the ASK by that ARK, and the CRL
// too. Both are cached process-wide (the CRL until its nextUpdate, the chain for a day), refreshed
// in the background and served while KDS is down as long as they are valid.
import { X509Certificate } from 'node:crypto';
import { VerificationError } from '../errors.js';
import { type HttpAnswer, type HttpGet, HttpGetError } from '../http/get.js';
import { RefreshingCache } from '../http/refreshing-cache.js';
import { type Crl, checkCrl, isRevoked, MAX_CRL_BYTES, parseCrl } from '../tdx/crl.js';
import { certificateFields } from '../x509/der.js';
import { type AmdRootSet, checkValidity, pemCertificates } from './certs.js';
import type { SnpGeneration } from './report.js';

const DAY = 86_400_000;
const MAX_CHAIN_BYTES = 64 * 1024;

export interface KdsChain {
  readonly ask: X509Certificate;
  readonly ark: X509Certificate;
}

const chainCache = new RefreshingCache<KdsChain>({ maxEntries: 64 });
const crlCache = new RefreshingCache<Crl>({ maxEntries: 64 });

/** Forgets cached chains and CRLs (tests). */
export function clearKdsChainCache(): void {
  chainCache.clear();
  crlCache.clear();
}

function signedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

export interface KdsRequestOptions {
  readonly httpGet: HttpGet;
  readonly timeoutMs: number;
}

async function kdsGet(
  url: string,
  what: string,
  maxBytes: number,
  o: KdsRequestOptions,
): Promise<HttpAnswer> {
  let a: HttpAnswer;
  try {
    a = await o.httpGet(url, { timeoutMs: o.timeoutMs, maxBytes });
  } catch (e) {
    const msg = e instanceof HttpGetError ? e.message : `GET ${url} failed: ${(e as Error).message}`;
    throw new VerificationError('COLLATERAL_UNAVAILABLE', `KDS ${what}: ${msg}`);
  }
  if (a.status !== 200) {
    throw new VerificationError(
      'COLLATERAL_UNAVAILABLE',
      `KDS ${what}: GET ${url} answered HTTP ${a.status}`,
    );
  }
  return a;
}

const base = (url: string) => url.replace(/\/+$/, '');

/**
 * The roots to verify a KDS VCEK with: each usable trusted root whose ARK signed the KDS chain's
 * ARK and ASK, with the KDS ASK. Throws CERT_REVOKED when the ARK's CRL lists that ASK.
 */
export async function kdsRoots(
  baseUrl: string,
  generation: SnpGeneration,
  usable: readonly AmdRootSet[],
  now: Date,
  o: KdsRequestOptions,
): Promise<AmdRootSet[]> {
  const chainUrl = `${base(baseUrl)}/vcek/v1/${generation}/cert_chain`;
  const chain = await chainCache.get(chainUrl, async () => {
    const a = await kdsGet(chainUrl, 'certificate chain', MAX_CHAIN_BYTES, o);
    const ders = pemCertificates(a.body.toString('latin1'), 2);
    if (ders.length !== 2) {
      throw new VerificationError(
        'CERT_MALFORMED',
        `KDS certificate chain from ${chainUrl} is not an ASK and an ARK`,
      );
    }
    const [ask, ark] = ders.map((d, i) => {
      try {
        certificateFields(d);
        return new X509Certificate(d);
      } catch (e) {
        throw new VerificationError(
          'CERT_MALFORMED',
          `KDS certificate chain from ${chainUrl}: certificate ${i + 1} is malformed`,
          {
            cause: e,
          },
        );
      }
    }) as [X509Certificate, X509Certificate];
    const trusted = usable.find((r) => signedBy(ark, r.ark) && signedBy(ask, r.ark));
    if (trusted === undefined) {
      throw new VerificationError(
        'CERT_CHAIN_INVALID',
        `KDS certificate chain from ${chainUrl} is not signed by a trusted AMD ARK`,
      );
    }
    checkValidity(ask, now, `KDS ASK from ${chainUrl}`);
    return { value: { ask, ark }, expiresAt: Math.min(ask.validToDate.getTime(), Date.now() + DAY) };
  });
  const roots = usable
    .filter((r) => signedBy(chain.ark, r.ark) && signedBy(chain.ask, r.ark))
    .map((r) => ({ ...r, ask: chain.ask }));
  if (roots.length === 0) {
    throw new VerificationError(
      'CERT_CHAIN_INVALID',
      `KDS certificate chain from ${chainUrl} is not signed by a trusted AMD ARK`,
    );
  }
  const crlUrl = `${base(baseUrl)}/vcek/v1/${generation}/crl`;
  const crl = await crlCache.get(crlUrl, async () => {
    const a = await kdsGet(crlUrl, 'CRL', MAX_CRL_BYTES, o);
    let parsed: Crl;
    try {
      parsed = parseCrl(a.body);
    } catch (e) {
      if (!(e instanceof VerificationError)) throw e;
      throw new VerificationError(e.code, `KDS CRL from ${crlUrl}: ${e.message}`, { cause: e });
    }
    checkCrl(parsed, roots[0]!.ark, now, `KDS CRL from ${crlUrl}`);
    return { value: parsed, expiresAt: parsed.nextUpdate?.getTime() ?? Date.now() + DAY };
  });
  if (isRevoked(crl, chain.ask)) {
    throw new VerificationError(
      'CERT_REVOKED',
      `the ASK that issued the VCEK is revoked (KDS CRL ${crlUrl})`,
    );
  }
  return roots;
}
