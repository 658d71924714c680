// Checks of the files that go into initdata. A pod whose aa.toml or cdh.toml has an empty or wrong service
// address does not start (the guest's request gets a 404), and one whose certificate does not name the
// service host never connects; both are caught here instead.
import { parseKbsUri } from '@broker/protocol';
import { parse as parseToml } from 'smol-toml';
import { CertificateError, InitDataInputError } from '../errors.js';
import { isRecord } from '../fields.js';
import { checkServerCertificate } from '../pem.js';

export interface ValidationReport {
  /** Non-fatal findings, for stderr. */
  readonly warnings: string[];
  /** The KBS URL the file names. */
  readonly kbsUrl?: URL;
}

const MAX_URL = 2048;

function parseTomlText(text: string, what: string): Record<string, unknown> {
  try {
    return parseToml(text, { maxDepth: 32 });
  } catch (e) {
    const line = e instanceof Error && 'line' in e ? ` (line ${String((e as { line: unknown }).line)})` : '';
    throw new InitDataInputError(`${what} is not valid TOML${line}: ${(e as Error).message.split('\n')[0]}`, {
      cause: e,
    });
  }
}

/** A service base URL: http(s), a host, and nothing after it (a path would make every request a 404). */
export function checkServiceUrl(value: unknown, where: string): URL {
  if (value === undefined || value === null || value === '') {
    throw new InitDataInputError(
      `${where} is empty: the guest would have no service address and the pod would not start (404)`,
    );
  }
  if (typeof value !== 'string') throw new InitDataInputError(`${where} must be a string`);
  if (value.length > MAX_URL) throw new InitDataInputError(`${where} is longer than ${MAX_URL} characters`);
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new InitDataInputError(`${where}: ${JSON.stringify(value.slice(0, 200))} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new InitDataInputError(`${where}: ${JSON.stringify(value.slice(0, 200))} is not an http(s) URL`);
  }
  if (url.hostname === '') throw new InitDataInputError(`${where}: ${JSON.stringify(value)} has no host`);
  if (url.username !== '' || url.password !== '')
    throw new InitDataInputError(`${where}: user information is not allowed in the URL`);
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    throw new InitDataInputError(
      `${where}: ${JSON.stringify(value)} has a path, query or fragment; give the service root (the guest appends /kbs/v0/...), or requests end in 404`,
    );
  }
  return url;
}

function checkCert(pem: unknown, url: URL, where: string, warnings: string[], now: Date | undefined): void {
  if (pem === undefined || pem === null || pem === '') {
    if (url.protocol === 'https:') {
      warnings.push(
        `${where} is not set: the guest trusts ${url.host} only through its built-in root certificates`,
      );
    }
    return;
  }
  if (typeof pem !== 'string') throw new InitDataInputError(`${where} must be a PEM string`);
  if (url.protocol === 'http:')
    warnings.push(`${where} is set but the service URL is plain http; the certificate is not used`);
  try {
    checkServerCertificate(pem, url.hostname, where, now);
  } catch (e) {
    if (e instanceof CertificateError) throw new InitDataInputError(e.message, { cause: e });
    throw e;
  }
}

function table(v: unknown, where: string): Record<string, unknown> | undefined {
  if (v === undefined) return undefined;
  if (!isRecord(v)) throw new InitDataInputError(`${where} must be a table`);
  return v;
}

/** aa.toml: `token_configs.kbs.url` (+ `cert`), and the attestation-service URL when given. */
export function validateAaToml(text: string, now?: Date): ValidationReport {
  const doc = parseTomlText(text, 'aa.toml');
  const warnings: string[] = [];
  const tokens = table(doc.token_configs, 'aa.toml token_configs');
  const kbs = table(tokens?.kbs, 'aa.toml token_configs.kbs');
  if (kbs === undefined) {
    throw new InitDataInputError(
      'aa.toml token_configs.kbs.url is missing: the attestation agent would have no service address (404)',
    );
  }
  const kbsUrl = checkServiceUrl(kbs.url, 'aa.toml token_configs.kbs.url');
  checkCert(kbs.cert, kbsUrl, 'aa.toml token_configs.kbs.cert', warnings, now);
  for (const key of ['coco_as', 'cc_as']) {
    const as = table(tokens?.[key], `aa.toml token_configs.${key}`);
    if (as === undefined) continue;
    checkServiceUrl(as.url, `aa.toml token_configs.${key}.url`);
    if (key === 'cc_as') {
      warnings.push(
        'aa.toml token_configs.cc_as: the attestation agent reads the attestation-service URL from token_configs.coco_as',
      );
    }
  }
  return { warnings, kbsUrl };
}

/** cdh.toml: `kbc.name = "cc_kbc"`, `kbc.url` (+ `kbs_cert`), and a well-formed image policy URI. */
export function validateCdhToml(text: string, now?: Date): ValidationReport {
  const doc = parseTomlText(text, 'cdh.toml');
  const warnings: string[] = [];
  if (doc.socket !== undefined && (typeof doc.socket !== 'string' || !doc.socket.startsWith('unix://'))) {
    throw new InitDataInputError('cdh.toml socket must be a unix:// address');
  }
  const kbc = table(doc.kbc, 'cdh.toml kbc');
  if (kbc === undefined)
    throw new InitDataInputError(
      'cdh.toml [kbc] is missing: the data hub would have no service address (404)',
    );
  if (kbc.name !== 'cc_kbc') {
    throw new InitDataInputError(
      `cdh.toml kbc.name must be "cc_kbc" to reach the service, found ${JSON.stringify(kbc.name)}`,
    );
  }
  const kbsUrl = checkServiceUrl(kbc.url, 'cdh.toml kbc.url');
  checkCert(kbc.kbs_cert, kbsUrl, 'cdh.toml kbc.kbs_cert', warnings, now);
  const image = table(doc.image, 'cdh.toml image');
  const uri = image?.image_security_policy_uri;
  if (uri !== undefined) {
    if (typeof uri !== 'string')
      throw new InitDataInputError('cdh.toml image.image_security_policy_uri must be a string');
    try {
      parseKbsUri(uri);
    } catch (e) {
      throw new InitDataInputError(`cdh.toml image.image_security_policy_uri: ${(e as Error).message}`, {
        cause: e,
      });
    }
  }
  if (doc.credentials !== undefined && !Array.isArray(doc.credentials)) {
    throw new InitDataInputError('cdh.toml credentials must be an array');
  }
  return { warnings, kbsUrl };
}

/** policy.rego must be the sandbox agent's policy package. */
export function validateAgentPolicy(text: string): ValidationReport {
  if (!/^\s*package\s+agent_policy\s*$/m.test(text)) {
    throw new InitDataInputError(
      'policy.rego must declare `package agent_policy` (the sandbox agent evaluates data.agent_policy)',
    );
  }
  return { warnings: [] };
}
