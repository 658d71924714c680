// A mock AMD Key Distribution Service: VCEKs by product, hardware ID and TCB, the ASK/ARK chain and
// the ARK's CRL (RSASSA-PSS/SHA-384, as AMD signs it), from a test ARK.
import { constants as cryptoConstants, type KeyObject, sign } from 'node:crypto';
import {
  derBitString,
  derExplicit,
  derInteger,
  derName,
  derOctetString,
  derOid,
  derSequence,
  derTime,
  OID_CN,
  rsaPssSha384Algorithm,
} from '../x509/build.js';
import { type MockAnswer, MockHttpsService } from './mock-service.js';
import type { TestTlsIdentity } from './tls.js';

const DAY = 86_400_000;

export interface MockKdsContent {
  /** `Milan`, `Genoa` or `Turin`: the only product served. */
  readonly product: string;
  /** The VCEK (DER) for `/vcek/v1/<product>/<hwid>?<SPLs>`, or undefined (404). */
  readonly vcek: (hwid: string, spl: URLSearchParams) => Buffer | undefined;
  /** ASK then ARK (PEM), as `/vcek/v1/<product>/cert_chain` answers. */
  readonly certChainPem: string;
  /** The ARK's CRL (DER). */
  readonly crl: Buffer;
}

export interface TestAmdCrlOptions {
  readonly thisUpdate?: Date;
  readonly nextUpdate?: Date;
}

/** A CRL by the ARK (RSA key) revoking `serials` (hex). DER. */
export function signTestAmdCrl(
  arkKey: KeyObject,
  serials: readonly string[],
  options: TestAmdCrlOptions = {},
): Buffer {
  const thisUpdate = options.thisUpdate ?? new Date(Date.now() - DAY);
  const nextUpdate = options.nextUpdate ?? new Date(thisUpdate.getTime() + 7 * DAY);
  const alg = rsaPssSha384Algorithm();
  const entries = serials.map((s) =>
    derSequence(derInteger(Buffer.from(s.length % 2 ? `0${s}` : s, 'hex')), derTime(thisUpdate)),
  );
  const tbs = derSequence(
    derInteger(1),
    alg,
    derName([{ oid: OID_CN, value: 'ARK-Test' }]),
    derTime(thisUpdate),
    derTime(nextUpdate),
    ...(entries.length > 0 ? [derSequence(...entries)] : []),
    derExplicit(0, derSequence(derSequence(derOid('2.5.29.20'), derOctetString(derInteger(1))))),
  );
  const sig = sign('sha384', tbs, {
    key: arkKey,
    padding: cryptoConstants.RSA_PKCS1_PSS_PADDING,
    saltLength: 48,
  });
  return derSequence(tbs, alg, derBitString(sig));
}

/** Serves `content` (mutable: tests may swap it while the service runs). */
export function startMockKds(
  tls: TestTlsIdentity,
  content: { current: MockKdsContent },
): Promise<MockHttpsService> {
  return MockHttpsService.start(tls, (url): MockAnswer | undefined => {
    const c = content.current;
    const parts = url.pathname.split('/');
    // ['', 'vcek', 'v1', product, what]
    if (parts.length !== 5 || parts[1] !== 'vcek' || parts[2] !== 'v1' || parts[3] !== c.product)
      return undefined;
    const what = parts[4]!;
    if (what === 'cert_chain') {
      return { status: 200, headers: { 'content-type': 'application/x-pem-file' }, body: c.certChainPem };
    }
    if (what === 'crl')
      return { status: 200, headers: { 'content-type': 'application/pkix-crl' }, body: c.crl };
    const der = c.vcek(what, url.searchParams);
    if (der === undefined) return undefined;
    return { status: 200, headers: { 'content-type': 'application/x-x509-ca-cert' }, body: der };
  });
}
