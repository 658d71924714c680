// Intel collateral fetched on demand, as trustee's `dcap_verifier` does (`collateral_service`,
// `tcb_update_type`): from Intel's PCS or a PCCS over HTTPS, or from the JSON file that Intel's
// PCS Client Tool writes (`file://`). For a quote it gets, in trustee's order, the TCB info for
// the PCK's FMSPC, the TD QE identity, the PCK CA's CRL and the root CA's CRL.
//
// What arrives is untrusted until checked here, before anything is cached: each document must be
// signed by the first certificate of the issuer chain its answer carries, that chain must end at
// a trusted SGX root (Intel's built-in one, or a test root the operator configured; never a root
// from the answer itself), each CRL must be signed by its issuer, and the TCB info must be for the
// FMSPC asked for. The verifier checks all of it again against the quote (verify.ts).
import { X509Certificate } from 'node:crypto';
import { open } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { VerificationError } from '../errors.js';
import { defaultHttpGet, type HttpAnswer, type HttpGet, HttpGetError } from '../http/get.js';
import { RefreshingCache, type RefreshingCacheOptions } from '../http/refreshing-cache.js';
import { checkValidity, pemCertificates } from '../snp/certs.js';
import { certificateFields, children, readTlv, type Tlv } from '../x509/der.js';
import {
  MAX_COLLATERAL_BYTES,
  type ParsedCollateral,
  parseQeIdentity,
  parseTdxTcbInfo,
  type QeIdentity,
  type SignedDocument,
  type TdxTcbInfo,
  verifyCollateralSignature,
} from './collateral.js';
import { type Crl, checkCrl, MAX_CRL_BYTES, parseCrl } from './crl.js';
import { builtinIntelCerts, rootOf, type SgxRoot } from './trust.js';

/** trustee's default `collateral_service` (used when `[dcap_verifier]` is absent). */
export const INTEL_PCS_URL = 'https://api.trustedservices.intel.com/sgx/certification/v4/';
/** Only this host is Intel's PCS; any other is a PCCS (trustee's rule). */
export const INTEL_PCS_HOST = 'api.trustedservices.intel.com';
export type TcbUpdateType = 'early' | 'standard';
export const DEFAULT_TCB_UPDATE_TYPE: TcbUpdateType = 'early';
/** One collateral request gives up after this long. */
export const DEFAULT_COLLATERAL_TIMEOUT_MS = 10_000;
/** The PCS Client Tool's file holds collateral for many FMSPCs; bigger is not such a file. */
export const MAX_COLLATERAL_FILE_BYTES = 32 * 1024 * 1024;
const MAX_CHAIN_CERTS = 4;

/** What a quote needs collateral for. */
export interface CollateralRequest {
  /** The PCK's FMSPC (6 bytes). */
  readonly fmspc: Buffer;
  /** The PCK's issuing CA: `platform` or `processor`. */
  readonly pckCa: 'platform' | 'processor';
  /** Roots the issuer chains must end at. */
  readonly roots: readonly SgxRoot[];
  /** Verification time for certificate validity. */
  readonly now: Date;
}

/** Where the `tdx` and `az-tdx-vtpm` verifiers get collateral when none is configured offline. */
export interface IntelCollateralSource {
  /** For logs and messages: the base URL or the file. */
  readonly description: string;
  collateralFor(request: CollateralRequest): Promise<ParsedCollateral>;
}

const hexUpper = (b: Uint8Array) => Buffer.from(b).toString('hex').toUpperCase();

function signedBy(child: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return child.checkIssued(issuer) && child.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/** PEM certificates of an issuer chain (header values are percent-encoded PEM). */
function chainCertificates(encoded: string, where: string): X509Certificate[] {
  let pem: string;
  try {
    pem = decodeURIComponent(encoded);
  } catch {
    throw new VerificationError('CERT_MALFORMED', `${where} is not percent-encoded PEM`);
  }
  const ders = pemCertificates(pem, MAX_CHAIN_CERTS);
  if (ders.length === 0) throw new VerificationError('CERT_MALFORMED', `${where} holds no certificate`);
  return ders.map((der) => {
    try {
      certificateFields(der);
      const c = new X509Certificate(der);
      void c.publicKey;
      return c;
    } catch (e) {
      throw new VerificationError('CERT_MALFORMED', `${where} holds a malformed certificate`, { cause: e });
    }
  });
}

/**
 * Checks that an issuer chain, leaf first, reaches a trusted root: each certificate is signed by
 * a trusted root or by the next one in the chain, and valid at `now`. Returns the root reached.
 */
export function verifyIssuerChain(
  chain: readonly X509Certificate[],
  roots: readonly SgxRoot[],
  now: Date,
  where: string,
): SgxRoot {
  for (let i = 0; i < chain.length; i++) {
    const c = chain[i]!;
    checkValidity(c, now, `${where} certificate ${i + 1}`);
    const root = rootOf(c, roots);
    if (root !== undefined) return root;
    const next = chain[i + 1];
    if (next === undefined || !signedBy(c, next)) break;
  }
  throw new VerificationError('CERT_CHAIN_INVALID', `${where} does not chain to a trusted SGX root`);
}

/** The first URI of a certificate's CRL distribution points (2.5.29.31), if any. */
export function crlDistributionPoint(cert: X509Certificate): string | undefined {
  const value = certificateFields(cert.raw).extensions.get('2.5.29.31');
  if (value === undefined) return undefined;
  const find = (t: Tlv): string | undefined => {
    if (t.tag === 0x86) return Buffer.from(value.subarray(t.start, t.end)).toString('latin1');
    if ((t.tag & 0x20) === 0) return undefined; // primitive
    for (const c of children(value, t)) {
      const hit = find(c);
      if (hit !== undefined) return hit;
    }
    return undefined;
  };
  try {
    return find(readTlv(value, 0, value.length));
  } catch {
    return undefined;
  }
}

/** A CRL body as DER, PEM or hex text (PCCS answers hex for some CRLs). */
function crlFromBody(body: Buffer): string | Buffer {
  const text = body.toString('latin1').trim();
  if (/^(?:[0-9a-fA-F]{2})+$/.test(text) || text.includes('-----BEGIN X509 CRL-----')) return text;
  return body;
}

interface SignedCollateral<T> {
  readonly doc: SignedDocument<T>;
  readonly signers: readonly X509Certificate[];
  readonly root: SgxRoot;
}

/** Checks a fetched document against its issuer chain and the trusted roots. */
function validateSigned<T>(
  doc: SignedDocument<T>,
  chain: readonly X509Certificate[],
  roots: readonly SgxRoot[],
  now: Date,
  what: string,
): SignedCollateral<T> {
  const root = verifyIssuerChain(chain, roots, now, `${what} issuer chain`);
  const signers = chain.filter((c) => !c.ca);
  verifyCollateralSignature(doc, signers, roots, now, what);
  return { doc, signers, root };
}

function checkFmspc(info: SignedDocument<TdxTcbInfo>, fmspc: Buffer, what: string): void {
  if (!info.body.fmspc.equals(fmspc)) {
    throw new VerificationError(
      'COLLATERAL_MISMATCH',
      `${what} is for FMSPC ${hexUpper(info.body.fmspc)}, not the PCK's FMSPC ${hexUpper(fmspc)}`,
    );
  }
}

function assemble(
  tcb: SignedCollateral<TdxTcbInfo>,
  qe: SignedCollateral<QeIdentity>,
  pckCrl: Crl | undefined,
  rootCaCrl: Crl | undefined,
): ParsedCollateral {
  const signers = [...tcb.signers, ...qe.signers.filter((s) => !tcb.signers.includes(s))];
  return {
    tcbInfos: [tcb.doc],
    qeIdentity: qe.doc,
    signers: [...signers, builtinIntelCerts().tcbSigning],
    ...(pckCrl !== undefined ? { pckCrl } : {}),
    ...(rootCaCrl !== undefined ? { rootCaCrl } : {}),
  };
}

export interface PcsClientOptions {
  /** `collateral_service`: only its scheme, host and port are used (trustee's rule). */
  readonly url: string;
  readonly tcbUpdateType?: TcbUpdateType;
  /** Per request; DEFAULT_COLLATERAL_TIMEOUT_MS by default. */
  readonly timeoutMs?: number;
  /** The HTTP client; Node's, with the system trust store, by default. */
  readonly httpGet?: HttpGet;
  readonly cache?: RefreshingCacheOptions;
}

/**
 * Intel's PCS or a PCCS over HTTP(S), with the answers cached until their nextUpdate (shared by
 * every verification that uses this object), refreshed in the background, and served while the
 * service is down as long as they are valid.
 */
export class PcsCollateralService implements IntelCollateralSource {
  readonly description: string;
  readonly origin: string;
  readonly isIntelPcs: boolean;
  readonly tcbUpdateType: TcbUpdateType;
  readonly #timeoutMs: number;
  readonly #http: HttpGet;
  readonly #tcb: RefreshingCache<SignedCollateral<TdxTcbInfo>>;
  readonly #qe: RefreshingCache<SignedCollateral<QeIdentity>>;
  readonly #crls: RefreshingCache<Crl>;

  constructor(options: PcsClientOptions) {
    let u: URL;
    try {
      u = new URL(options.url);
    } catch {
      throw new TypeError(`collateral_service ${JSON.stringify(options.url)} is not a URL`);
    }
    if (u.protocol !== 'https:' && u.protocol !== 'http:') {
      throw new TypeError(`collateral_service ${options.url}: expected an https:, http: or file: URL`);
    }
    this.origin = u.origin;
    this.description = options.url;
    this.isIntelPcs = u.hostname === INTEL_PCS_HOST;
    this.tcbUpdateType = options.tcbUpdateType ?? DEFAULT_TCB_UPDATE_TYPE;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_COLLATERAL_TIMEOUT_MS;
    this.#http = options.httpGet ?? defaultHttpGet();
    this.#tcb = new RefreshingCache(options.cache);
    this.#qe = new RefreshingCache(options.cache);
    this.#crls = new RefreshingCache(options.cache);
  }

  /** Cache counters of the four kinds of collateral together. */
  get cacheStats(): { hits: number; loads: number; refreshes: number; refreshFailures: number } {
    const all = [this.#tcb.stats, this.#qe.stats, this.#crls.stats];
    const sum = (k: 'hits' | 'loads' | 'refreshes' | 'refreshFailures') => all.reduce((n, s) => n + s[k], 0);
    return {
      hits: sum('hits'),
      loads: sum('loads'),
      refreshes: sum('refreshes'),
      refreshFailures: sum('refreshFailures'),
    };
  }

  /** Waits for background refreshes in flight. */
  async settled(): Promise<void> {
    await Promise.all([this.#tcb.settled(), this.#qe.settled(), this.#crls.settled()]);
  }

  tcbInfoUrl(fmspc: Uint8Array): string {
    return `${this.origin}/tdx/certification/v4/tcb?fmspc=${hexUpper(fmspc)}&update=${this.tcbUpdateType}`;
  }

  qeIdentityUrl(): string {
    return `${this.origin}/tdx/certification/v4/qe/identity?update=${this.tcbUpdateType}`;
  }

  pckCrlUrl(ca: 'platform' | 'processor'): string {
    return `${this.origin}/sgx/certification/v4/pckcrl?ca=${ca}&encoding=der`;
  }

  async #get(url: string, what: string, maxBytes: number): Promise<HttpAnswer> {
    let a: HttpAnswer;
    try {
      a = await this.#http(url, { timeoutMs: this.#timeoutMs, maxBytes });
    } catch (e) {
      const msg = e instanceof HttpGetError ? e.message : `GET ${url} failed: ${(e as Error).message}`;
      throw new VerificationError('COLLATERAL_UNAVAILABLE', `${what}: ${msg}`);
    }
    if (a.status === 404 || a.status === 410) {
      throw new VerificationError(
        'COLLATERAL_UNAVAILABLE',
        `${what}: collateral not available from ${url} (HTTP ${a.status})`,
      );
    }
    if (a.status !== 200) {
      throw new VerificationError('COLLATERAL_UNAVAILABLE', `${what}: GET ${url} answered HTTP ${a.status}`);
    }
    return a;
  }

  #chain(a: HttpAnswer, names: readonly string[], what: string): X509Certificate[] {
    const name = names.find((n) => a.headers[n] !== undefined);
    if (name === undefined) {
      throw new VerificationError('COLLATERAL_INVALID', `${what} from ${a.url} has no ${names[0]} header`);
    }
    return chainCertificates(a.headers[name]!, `${what} ${name} header from ${a.url}`);
  }

  async collateralFor(req: CollateralRequest): Promise<ParsedCollateral> {
    const { fmspc, roots, now } = req;
    const tcbUrl = this.tcbInfoUrl(fmspc);
    const tcb = await this.#tcb.get(tcbUrl, async () => {
      const what = `TCB info from ${tcbUrl}`;
      const a = await this.#get(tcbUrl, 'TCB info', MAX_COLLATERAL_BYTES);
      const chain = this.#chain(a, ['tcb-info-issuer-chain', 'sgx-tcb-info-issuer-chain'], 'TCB info');
      const doc = parseDocument(() => parseTdxTcbInfo(a.body), what);
      checkFmspc(doc, fmspc, what);
      const v = validateSigned(doc, chain, roots, now, what);
      return { value: v, expiresAt: doc.body.nextUpdate.getTime() };
    });
    const qeUrl = this.qeIdentityUrl();
    const qe = await this.#qe.get(qeUrl, async () => {
      const what = `QE identity from ${qeUrl}`;
      const a = await this.#get(qeUrl, 'QE identity', MAX_COLLATERAL_BYTES);
      const chain = this.#chain(a, ['sgx-enclave-identity-issuer-chain'], 'QE identity');
      const doc = parseDocument(() => parseQeIdentity(a.body), what);
      const v = validateSigned(doc, chain, roots, now, what);
      return { value: v, expiresAt: doc.body.nextUpdate.getTime() };
    });
    const pckUrl = this.pckCrlUrl(req.pckCa);
    const pckCrl = await this.#crls.get(pckUrl, async () => {
      const what = `PCK CRL from ${pckUrl}`;
      const a = await this.#get(pckUrl, 'PCK CRL', MAX_CRL_BYTES);
      const chain = this.#chain(a, ['sgx-pck-crl-issuer-chain'], 'PCK CRL');
      verifyIssuerChain(chain, roots, now, `${what} issuer chain`);
      const crl = parseCrlNamed(crlFromBody(a.body), what);
      checkCrl(crl, chain[0]!, now, what);
      return { value: crl, expiresAt: crlExpiry(crl) };
    });
    const rootUrl = this.#rootCaCrlUrl(qe.root);
    const rootCaCrl = await this.#crls.get(rootUrl, async () => {
      const what = `root CA CRL from ${rootUrl}`;
      const a = await this.#get(rootUrl, 'root CA CRL', MAX_CRL_BYTES);
      const crl = parseCrlNamed(crlFromBody(a.body), what);
      checkCrl(crl, qe.root.cert, now, what);
      return { value: crl, expiresAt: crlExpiry(crl) };
    });
    return assemble(tcb, qe, pckCrl, rootCaCrl);
  }

  /** PCCS serves the root CA CRL itself; Intel's PCS points at the root's distribution point. */
  #rootCaCrlUrl(root: SgxRoot): string {
    if (!this.isIntelPcs) return `${this.origin}/sgx/certification/v4/rootcacrl`;
    const cdp = crlDistributionPoint(root.cert);
    if (cdp === undefined) {
      throw new VerificationError(
        'COLLATERAL_UNAVAILABLE',
        `root CA CRL: the SGX root ${root.name} names no CRL distribution point`,
      );
    }
    return cdp;
  }
}

/** CRLs without nextUpdate are kept for a day. */
function crlExpiry(crl: Crl): number {
  return crl.nextUpdate?.getTime() ?? Date.now() + 86_400_000;
}

function parseDocument<T>(parse: () => SignedDocument<T>, what: string): SignedDocument<T> {
  try {
    return parse();
  } catch (e) {
    if (e instanceof VerificationError) {
      throw new VerificationError(e.code, `${what}: ${e.message}`, { cause: e });
    }
    throw e;
  }
}

function parseCrlNamed(input: string | Buffer, what: string): Crl {
  try {
    return parseCrl(input);
  } catch (e) {
    if (e instanceof VerificationError) {
      throw new VerificationError(e.code, `${what}: ${e.message}`, { cause: e });
    }
    throw e;
  }
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * The JSON file of Intel's PCS Client Tool (`{"collaterals": {tcbinfos, tdqeidentity, pckcacrl,
 * rootcacrl, certificates, …}}`), read as trustee's file backend reads it and re-read when its
 * modification time changes. Signed objects are re-serialized compactly, as Intel signed them.
 */
export class PcsClientToolFile implements IntelCollateralSource {
  readonly description: string;
  readonly #path: string;
  readonly #updateType: TcbUpdateType;
  #loaded: { mtimeMs: number; size: number; collaterals: Obj } | undefined;

  constructor(path: string, tcbUpdateType: TcbUpdateType = DEFAULT_TCB_UPDATE_TYPE) {
    this.#path = path;
    this.#updateType = tcbUpdateType;
    this.description = `file://${path}`;
  }

  #unavailable(msg: string): VerificationError {
    return new VerificationError(
      'COLLATERAL_UNAVAILABLE',
      `collateral not available from ${this.#path}: ${msg}`,
    );
  }

  async #collaterals(): Promise<Obj> {
    let fh: Awaited<ReturnType<typeof open>>;
    try {
      fh = await open(this.#path, 'r');
    } catch (e) {
      throw this.#unavailable(`cannot open it (${(e as NodeJS.ErrnoException).code ?? e})`);
    }
    try {
      const st = await fh.stat();
      if (!st.isFile()) throw this.#unavailable('not a regular file');
      const hit = this.#loaded;
      if (hit !== undefined && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit.collaterals;
      if (st.size > MAX_COLLATERAL_FILE_BYTES) {
        throw this.#unavailable(`larger than ${MAX_COLLATERAL_FILE_BYTES} bytes`);
      }
      const buf = Buffer.alloc(st.size);
      const { bytesRead } = await fh.read(buf, 0, st.size, 0);
      let doc: unknown;
      try {
        doc = JSON.parse(buf.subarray(0, bytesRead).toString('utf8'));
      } catch {
        throw new VerificationError('COLLATERAL_INVALID', `${this.#path} is not JSON`);
      }
      const collaterals = isObj(doc) ? doc.collaterals : undefined;
      if (!isObj(collaterals)) {
        throw new VerificationError('COLLATERAL_INVALID', `${this.#path} has no "collaterals" object`);
      }
      this.#loaded = { mtimeMs: st.mtimeMs, size: st.size, collaterals };
      return collaterals;
    } finally {
      await fh.close();
    }
  }

  /** `early` prefers the `_early` entry and falls back to the standard one; `standard` uses only it. */
  #pick(o: Obj, key: string): unknown {
    if (this.#updateType === 'early' && o[`${key}_early`] !== undefined) return o[`${key}_early`];
    return o[key];
  }

  #chain(certs: unknown, name: string): X509Certificate[] {
    const v = isObj(certs) ? certs[name] : undefined;
    if (typeof v !== 'string') throw this.#unavailable(`certificates has no ${name}`);
    return chainCertificates(v, `${name} in ${this.#path}`);
  }

  #hexCrl(v: unknown, what: string): Crl | undefined {
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string') throw new VerificationError('COLLATERAL_INVALID', `${what} is not hex text`);
    return parseCrlNamed(v, what);
  }

  async collateralFor(req: CollateralRequest): Promise<ParsedCollateral> {
    const { fmspc, roots, now } = req;
    const c = await this.#collaterals();
    const infos = Array.isArray(c.tcbinfos) ? c.tcbinfos : [];
    const entry = infos.find(
      (t): t is Obj => isObj(t) && typeof t.fmspc === 'string' && t.fmspc.toUpperCase() === hexUpper(fmspc),
    );
    if (entry === undefined) {
      throw new VerificationError(
        'COLLATERAL_MISMATCH',
        `no TCB info for the PCK's FMSPC ${hexUpper(fmspc)} in ${this.#path}`,
      );
    }
    const signed = (v: unknown, key: string, what: string): string => {
      if (!isObj(v) || !isObj(v[key]) || typeof v.signature !== 'string') {
        throw this.#unavailable(`no ${what}`);
      }
      return JSON.stringify({ [key]: v[key], signature: v.signature });
    };
    const tcbWhat = `TCB info for FMSPC ${hexUpper(fmspc)} in ${this.#path}`;
    const tcbDoc = parseDocument(
      () => parseTdxTcbInfo(signed(this.#pick(entry, 'tdx_tcbinfo'), 'tcbInfo', 'TDX TCB info')),
      tcbWhat,
    );
    checkFmspc(tcbDoc, fmspc, tcbWhat);
    const tcb = validateSigned(
      tcbDoc,
      this.#chain(c.certificates, 'TCB-Info-Issuer-Chain'),
      roots,
      now,
      tcbWhat,
    );
    const qeWhat = `TD QE identity in ${this.#path}`;
    const qeDoc = parseDocument(
      () => parseQeIdentity(signed(this.#pick(c, 'tdqeidentity'), 'enclaveIdentity', 'TD QE identity')),
      qeWhat,
    );
    const qe = validateSigned(
      qeDoc,
      this.#chain(c.certificates, 'SGX-Enclave-Identity-Issuer-Chain'),
      roots,
      now,
      qeWhat,
    );
    const pckCrls = isObj(c.pckcacrl) ? c.pckcacrl : {};
    const pckCrl = this.#hexCrl(
      req.pckCa === 'platform' ? pckCrls.platformCrl : pckCrls.processorCrl,
      `${req.pckCa} PCK CRL in ${this.#path}`,
    );
    const rootCaCrl = this.#hexCrl(c.rootcacrl, `root CA CRL in ${this.#path}`);
    if (rootCaCrl !== undefined) checkCrl(rootCaCrl, qe.root.cert, now, `root CA CRL in ${this.#path}`);
    return assemble(tcb, qe, pckCrl, rootCaCrl);
  }
}

export interface IntelCollateralSourceOptions extends Omit<PcsClientOptions, 'url'> {
  /** `collateral_service`: `https://…`/`http://…` for PCS or PCCS, `file://…` for the PCS Client Tool's JSON. */
  readonly url: string;
}

/** The source `collateral_service` names. */
export function intelCollateralSource(options: IntelCollateralSourceOptions): IntelCollateralSource {
  if (options.url.startsWith('file:')) {
    let path: string;
    try {
      path = fileURLToPath(options.url);
    } catch (e) {
      throw new TypeError(`collateral_service ${options.url}: ${(e as Error).message}`);
    }
    return new PcsClientToolFile(path, options.tcbUpdateType);
  }
  return new PcsCollateralService(options);
}
