/**
 * Registry authentication: `WWW-Authenticate` challenges, containers-auth.json
 * credentials, and the Docker token protocol (anonymous or Basic-authenticated
 * GET, or an OAuth2 refresh-token POST for identity tokens).
 */

import { readFile } from 'node:fs/promises';
import { ImageError, type ImageErrorCode } from '../errors.js';
import { DEFAULT_DOMAIN } from '../reference.js';

export interface Challenge {
  /** Lower case: `basic` or `bearer` (others are kept, never answered). */
  readonly scheme: string;
  readonly params: Readonly<Record<string, string>>;
}

/** A username and password, or an identity (refresh) token. */
export type Credentials =
  | { readonly kind: 'basic'; readonly username: string; readonly password: string }
  | { readonly kind: 'identityToken'; readonly username: string; readonly identityToken: string };

/** Finds credentials for a repository (`registry.example.com/ns/repo`). */
export type CredentialLookup = (domain: string, path: string) => Credentials | undefined;

/** Largest token response read (containers/image `MaxAuthTokenBodySize`). */
export const MAX_TOKEN_RESPONSE_BYTES = 1024 * 1024;
/** Largest auth file read. */
export const MAX_AUTH_FILE_BYTES = 1024 * 1024;

/** Authentication that cannot proceed (bad challenge, token endpoint failure, unusable auth file). */
export class RegistryAuthError extends ImageError {
  override readonly code: ImageErrorCode = 'REGISTRY_AUTH_FAILED';
  override readonly name: string = 'RegistryAuthError';
}

/**
 * Parses `WWW-Authenticate` values (RFC 7235): each challenge is a scheme
 * followed by `name=value` or `name="quoted value"` parameters.
 */
export function parseChallenges(header: string | readonly string[] | undefined): Challenge[] {
  if (header === undefined) return [];
  const text = typeof header === 'string' ? header : header.join(', ');
  const out: { scheme: string; params: Record<string, string> }[] = [];
  let i = 0;
  const n = text.length;
  const skip = () => {
    while (i < n && (text[i] === ' ' || text[i] === '\t' || text[i] === ',')) i++;
  };
  const token = () => {
    const start = i;
    while (i < n && /[!#$%&'*+\-.^_`|~0-9A-Za-z]/.test(text[i] ?? '')) i++;
    return text.slice(start, i);
  };
  while (i < n) {
    skip();
    const word = token();
    if (word === '') {
      i++;
      continue;
    }
    let j = i;
    while (j < n && text[j] === ' ') j++;
    if (text[j] === '=' && out.length > 0) {
      // A parameter of the current challenge.
      i = j + 1;
      while (i < n && text[i] === ' ') i++;
      let value = '';
      if (text[i] === '"') {
        i++;
        while (i < n && text[i] !== '"') {
          if (text[i] === '\\' && i + 1 < n) i++;
          value += text[i];
          i++;
        }
        i++;
      } else {
        const start = i;
        while (i < n && text[i] !== ',' && text[i] !== ' ') i++;
        value = text.slice(start, i);
      }
      const current = out[out.length - 1];
      if (current !== undefined) current.params[word.toLowerCase()] = value;
      continue;
    }
    out.push({ scheme: word.toLowerCase(), params: {} });
  }
  return out;
}

function normalizeRegistryHost(host: string): string {
  return host === 'registry-1.docker.io' || host === 'index.docker.io' ? DEFAULT_DOMAIN : host;
}

/** An auth.json key as containers/image compares it: scheme-prefixed (legacy) keys keep only their host. */
function normalizeAuthKey(key: string): string {
  const stripped = key.replace(/^https?:\/\//, '');
  if (stripped !== key) return normalizeRegistryHost(stripped.split('/')[0] ?? '');
  const slash = stripped.indexOf('/');
  const host = slash < 0 ? stripped : stripped.slice(0, slash);
  return `${normalizeRegistryHost(host)}${slash < 0 ? '' : stripped.slice(slash)}`;
}

/**
 * Credentials from a containers-auth.json(5) document: `auths` keyed by
 * `registry[/namespace[/repo]]`; the most specific key wins. `auth` is
 * base64 of `user:password`; `identitytoken` is an OAuth2 refresh token.
 * Credential helpers (`credHelpers`) are not run.
 */
export function parseAuthFile(text: string): CredentialLookup {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new RegistryAuthError(`auth file is not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null) throw new RegistryAuthError('auth file is not a JSON object');
  const auths = (doc as { auths?: unknown }).auths ?? {};
  if (typeof auths !== 'object' || auths === null)
    throw new RegistryAuthError('auth file: "auths" is not an object');
  const table = new Map<string, Credentials>();
  for (const [key, entry] of Object.entries(auths as Record<string, unknown>)) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { auth, identitytoken } = entry as { auth?: unknown; identitytoken?: unknown };
    let username = '';
    let password = '';
    if (typeof auth === 'string' && auth !== '') {
      const decoded = Buffer.from(auth, 'base64').toString('utf8');
      const colon = decoded.indexOf(':');
      if (colon < 0)
        throw new RegistryAuthError(
          `auth file: the auth of ${JSON.stringify(key)} is not base64 of user:password`,
        );
      username = decoded.slice(0, colon);
      password = decoded.slice(colon + 1);
    }
    const normalized = normalizeAuthKey(key);
    if (typeof identitytoken === 'string' && identitytoken !== '') {
      table.set(normalized, { kind: 'identityToken', username, identityToken: identitytoken });
    } else if (username !== '' || password !== '') {
      table.set(normalized, { kind: 'basic', username, password });
    }
  }
  return (domain, path) => {
    const host = normalizeRegistryHost(domain);
    const parts = path.split('/');
    for (let k = parts.length; k >= 0; k--) {
      const key = k === 0 ? host : `${host}/${parts.slice(0, k).join('/')}`;
      const found = table.get(key);
      if (found !== undefined) return found;
    }
    return undefined;
  };
}

/** Reads an auth file (`--authfile`). */
export async function loadAuthFile(file: string): Promise<CredentialLookup> {
  const bytes = await readFile(file);
  if (bytes.byteLength > MAX_AUTH_FILE_BYTES) throw new RegistryAuthError(`auth file ${file} is too large`);
  return parseAuthFile(bytes.toString('utf8'));
}

/** The value of an `Authorization: Basic` header. */
export function basicAuthorization(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

/** A bearer token and when it stops being usable (ms since the epoch). */
export interface BearerToken {
  readonly token: string;
  readonly expiresAt: number;
}

/** Tokens live at least this long when the server says less or nothing (docker's rule). */
export const MIN_TOKEN_LIFETIME_S = 60;

/** Reads a token endpoint's JSON answer: `token` or `access_token`, `expires_in`, `issued_at`. */
export function parseTokenResponse(body: Uint8Array, now = Date.now()): BearerToken {
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(body).toString('utf8'));
  } catch (e) {
    throw new RegistryAuthError(`token response is not JSON: ${(e as Error).message}`);
  }
  if (typeof doc !== 'object' || doc === null)
    throw new RegistryAuthError('token response is not a JSON object');
  const d = doc as { token?: unknown; access_token?: unknown; expires_in?: unknown; issued_at?: unknown };
  const token = typeof d.token === 'string' && d.token !== '' ? d.token : d.access_token;
  if (typeof token !== 'string' || token === '') throw new RegistryAuthError('token response has no token');
  const expiresIn =
    typeof d.expires_in === 'number' && Number.isFinite(d.expires_in) && d.expires_in >= MIN_TOKEN_LIFETIME_S
      ? d.expires_in
      : MIN_TOKEN_LIFETIME_S;
  let issued = now;
  if (typeof d.issued_at === 'string') {
    const t = Date.parse(d.issued_at);
    // A server clock ahead of ours must not extend the token's life here.
    if (Number.isFinite(t) && t <= now) issued = t;
  }
  return { token, expiresAt: issued + expiresIn * 1000 };
}
