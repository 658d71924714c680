/**
 * KBS resource identifiers: `kbs:///repo/type/tag` (the KBS the guest is
 * configured with) or `kbs://host:port/repo/type/tag`, and the
 * `repo/type/tag` part of `/kbs/v0/resource/...` URLs.
 */
import { InvalidResourceUri } from './errors.js';

export interface ResourcePath {
  repository: string;
  type: string;
  tag: string;
}

export interface ResourceUri extends ResourcePath {
  host?: string;
  port?: number;
  /** Raw query string (without `?`); upstream forwards it to the resource policy. */
  query?: string;
}

/** trustee's ResourceDesc rule for each segment; `.`/`..`/hidden names cannot match. */
const SEGMENT_RE = /^[A-Za-z0-9_-][A-Za-z0-9_.-]*$/;
export const MAX_SEGMENT_LENGTH = 255;
export const MAX_RESOURCE_URI_LENGTH = 4096;

const HOSTNAME_RE =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const IPV6_RE = /^\[[0-9A-Fa-f:.]{2,45}\]$/;
const PORT_RE = /^[0-9]{1,5}$/;
const QUERY_RE = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/?]|%[0-9A-Fa-f]{2})*$/;

function checkSegment(input: string, name: string, seg: string): void {
  if (seg.length === 0) throw new InvalidResourceUri(input, `${name} is empty`);
  if (seg.length > MAX_SEGMENT_LENGTH) {
    throw new InvalidResourceUri(input, `${name} is longer than ${MAX_SEGMENT_LENGTH} characters`);
  }
  if (seg.includes('%')) throw new InvalidResourceUri(input, `${name} contains percent-encoding`);
  if (!SEGMENT_RE.test(seg)) {
    throw new InvalidResourceUri(
      input,
      `${name} ${JSON.stringify(seg)} does not match [A-Za-z0-9_-][A-Za-z0-9_.-]*`,
    );
  }
}

function splitPath(input: string, path: string): ResourcePath {
  const parts = path.split('/');
  if (parts.length !== 3) {
    throw new InvalidResourceUri(
      input,
      `expected exactly 3 segments repository/type/tag, got ${parts.length}`,
    );
  }
  const [repository, type, tag] = parts as [string, string, string];
  checkSegment(input, 'repository', repository);
  checkSegment(input, 'type', type);
  checkSegment(input, 'tag', tag);
  return { repository, type, tag };
}

/** Parse the `repo/type/tag` part of a KBS resource URL, exactly three segments. */
export function parseResourcePath(path: string): ResourcePath {
  if (typeof path !== 'string') throw new InvalidResourceUri(String(path), 'not a string');
  if (path.length > 3 * MAX_SEGMENT_LENGTH + 2) throw new InvalidResourceUri(path, 'too long');
  return splitPath(path, path);
}

/** Parse `kbs:///repo/type/tag`, `kbs://host[:port]/repo/type/tag`, optionally with `?query`. */
export function parseResourceUri(s: string): ResourceUri {
  if (typeof s !== 'string') throw new InvalidResourceUri(String(s), 'not a string');
  if (s.length > MAX_RESOURCE_URI_LENGTH) throw new InvalidResourceUri(s, 'too long');
  const scheme = 'kbs://';
  if (!s.startsWith(scheme)) {
    if (/^kbs\+[^:/]*:/.test(s))
      throw new InvalidResourceUri(s, 'only the kbs scheme (resource plugin) is supported');
    throw new InvalidResourceUri(s, 'scheme must be kbs://');
  }
  if (s.includes('#')) throw new InvalidResourceUri(s, 'fragments are not allowed');
  const rest = s.slice(scheme.length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw new InvalidResourceUri(s, 'missing /repository/type/tag path');
  const authority = rest.slice(0, slash);
  let pathAndQuery = rest.slice(slash + 1);

  const out: Partial<ResourceUri> = {};
  if (authority.length > 0) {
    if (authority.includes('@')) throw new InvalidResourceUri(s, 'user information is not allowed');
    let host = authority;
    const colon = authority.lastIndexOf(':');
    if (colon >= 0 && !authority.endsWith(']')) {
      host = authority.slice(0, colon);
      const portText = authority.slice(colon + 1);
      const port = Number(portText);
      if (!PORT_RE.test(portText) || port < 1 || port > 65535) {
        throw new InvalidResourceUri(s, `invalid port ${JSON.stringify(portText)}`);
      }
      out.port = port;
    }
    if (!HOSTNAME_RE.test(host) && !IPV6_RE.test(host)) {
      throw new InvalidResourceUri(s, `invalid host ${JSON.stringify(host)}`);
    }
    out.host = host;
  }

  const q = pathAndQuery.indexOf('?');
  if (q >= 0) {
    const query = pathAndQuery.slice(q + 1);
    if (!QUERY_RE.test(query)) throw new InvalidResourceUri(s, 'invalid query');
    out.query = query;
    pathAndQuery = pathAndQuery.slice(0, q);
  }
  const path = splitPath(s, pathAndQuery);
  const result: ResourceUri = { ...path };
  if (out.host !== undefined) result.host = out.host;
  if (out.port !== undefined) result.port = out.port;
  if (out.query !== undefined) result.query = out.query;
  return result;
}

/** The URI text of a resource; validates like the parsers do. */
export function formatResourceUri(uri: ResourceUri): string {
  const path = `${uri.repository}/${uri.type}/${uri.tag}`;
  let authority = '';
  if (uri.host !== undefined) authority = uri.host;
  if (uri.port !== undefined) {
    if (uri.host === undefined) throw new InvalidResourceUri(path, 'a port needs a host');
    authority += `:${uri.port}`;
  }
  const text = `kbs://${authority}/${path}${uri.query !== undefined ? `?${uri.query}` : ''}`;
  const parsed = parseResourceUri(text);
  if (parsed.host !== uri.host || parsed.port !== uri.port || parsed.query !== uri.query) {
    throw new InvalidResourceUri(text, 'host, port or query do not round-trip');
  }
  return text;
}

/** `repo/type/tag`, the key used by resource storage and KBS URLs. */
export function formatResourcePath(p: ResourcePath): string {
  const path = `${p.repository}/${p.type}/${p.tag}`;
  parseResourcePath(path);
  return path;
}
