/**
 * KBS resource identifiers: `kbs:///repo/type/tag` (the KBS the guest is
 * configured with) or `kbs://host:port/repo/type/tag`, and the
 * `repo/type/tag` part of `/kbs/v0/resource/...` URLs.
 *
 * guest-components also names a KBS plugin in the scheme: `kbs+<plugin>://…/<path>[?query]` is fetched
 * from `/kbs/v0/<plugin>/<path>[?query]`, and `kbs://` is `kbs+resource://`. `parseKbsUri` reads those;
 * `parseResourceUri` takes only URIs of the `resource` plugin.
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

/** The plugin a `kbs://` URI names (guest-components' default resource plugin). */
export const DEFAULT_KBS_PLUGIN = 'resource';
/** Path segments a plugin URI may have. */
export const MAX_PLUGIN_PATH_SEGMENTS = 16;
/** A plugin name as it can stand in a URI scheme and a KBS URL path segment. */
const PLUGIN_RE = /^[a-z0-9][a-z0-9.-]{0,63}$/;

/** A `kbs://` or `kbs+<plugin>://` URI: the plugin and the path below `/kbs/v0/<plugin>/`. */
export interface KbsUri {
  /** `resource` for `kbs://` and `kbs+resource://`. */
  plugin: string;
  /** The path segments; `[repository, type, tag]` for the resource plugin. */
  path: string[];
  host?: string;
  port?: number;
  /** Raw query string (without `?`), sent on to the KBS. */
  query?: string;
}

interface SplitUri {
  plugin: string;
  host?: string;
  port?: number;
  query?: string;
  path: string;
}

function splitUri(s: string): SplitUri {
  if (typeof s !== 'string') throw new InvalidResourceUri(String(s), 'not a string');
  if (s.length > MAX_RESOURCE_URI_LENGTH) throw new InvalidResourceUri(s, 'too long');
  const scheme = /^kbs(?:\+([^:]*))?:\/\//.exec(s);
  if (scheme === null) throw new InvalidResourceUri(s, 'scheme must be kbs:// or kbs+<plugin>://');
  const named = scheme[1];
  if (named !== undefined && !PLUGIN_RE.test(named)) {
    throw new InvalidResourceUri(
      s,
      named === ''
        ? 'scheme kbs+ needs a plugin name, e.g. kbs+sample'
        : `plugin name ${JSON.stringify(named)} does not match [a-z0-9][a-z0-9.-]*`,
    );
  }
  if (s.includes('#')) throw new InvalidResourceUri(s, 'fragments are not allowed');
  const rest = s.slice(scheme[0].length);
  const slash = rest.indexOf('/');
  if (slash < 0) throw new InvalidResourceUri(s, 'missing /repository/type/tag path');
  const authority = rest.slice(0, slash);
  let path = rest.slice(slash + 1);

  const out: SplitUri = { plugin: named ?? DEFAULT_KBS_PLUGIN, path: '' };
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

  const q = path.indexOf('?');
  if (q >= 0) {
    const query = path.slice(q + 1);
    if (!QUERY_RE.test(query)) throw new InvalidResourceUri(s, 'invalid query');
    out.query = query;
    path = path.slice(0, q);
  }
  out.path = path;
  return out;
}

function withLocation<T extends object>(target: T, u: SplitUri): T & Omit<KbsUri, 'plugin' | 'path'> {
  const result: T & Omit<KbsUri, 'plugin' | 'path'> = target;
  if (u.host !== undefined) result.host = u.host;
  if (u.port !== undefined) result.port = u.port;
  if (u.query !== undefined) result.query = u.query;
  return result;
}

/**
 * Parse `kbs:///repo/type/tag`, `kbs://host[:port]/repo/type/tag`, optionally with `?query`; `kbs+resource://`
 * is the same. URIs of other plugins are refused: `parseKbsUri` reads those.
 */
export function parseResourceUri(s: string): ResourceUri {
  const u = splitUri(s);
  if (u.plugin !== DEFAULT_KBS_PLUGIN) {
    throw new InvalidResourceUri(
      s,
      `names the ${u.plugin} plugin; a resource URI (kbs:// or kbs+resource://) is needed here`,
    );
  }
  return withLocation({ ...splitPath(s, u.path) }, u);
}

/**
 * Parse a URI of any KBS plugin, as guest-components does: `kbs://…` and `kbs+resource://…` are resources
 * (exactly `repository/type/tag`), `kbs+<plugin>://[host[:port]]/<segment>[/<segment>…][?query]` is a
 * request to the plugin. Every segment follows the resource segment rule (no empty, `.`, `..`, hidden or
 * percent-encoded segments), so the path cannot leave `/kbs/v0/<plugin>/`.
 */
export function parseKbsUri(s: string): KbsUri {
  const u = splitUri(s);
  if (u.plugin === DEFAULT_KBS_PLUGIN) {
    const r = splitPath(s, u.path);
    return withLocation({ plugin: u.plugin, path: [r.repository, r.type, r.tag] }, u);
  }
  const parts = u.path.split('/');
  if (parts.length > MAX_PLUGIN_PATH_SEGMENTS) {
    throw new InvalidResourceUri(s, `more than ${MAX_PLUGIN_PATH_SEGMENTS} path segments`);
  }
  parts.forEach((seg, i) => {
    checkSegment(s, `path segment ${i + 1}`, seg);
  });
  return withLocation({ plugin: u.plugin, path: parts }, u);
}

/** The URI text of a `KbsUri`: `kbs://` for the resource plugin, `kbs+<plugin>://` otherwise. */
export function formatKbsUri(uri: KbsUri): string {
  const scheme = uri.plugin === DEFAULT_KBS_PLUGIN ? 'kbs' : `kbs+${uri.plugin}`;
  let authority = '';
  if (uri.host !== undefined) authority = uri.host;
  if (uri.port !== undefined) {
    if (uri.host === undefined) throw new InvalidResourceUri(uri.path.join('/'), 'a port needs a host');
    authority += `:${uri.port}`;
  }
  const text = `${scheme}://${authority}/${uri.path.join('/')}${uri.query !== undefined ? `?${uri.query}` : ''}`;
  const parsed = parseKbsUri(text);
  if (
    parsed.plugin !== uri.plugin ||
    parsed.path.join('/') !== uri.path.join('/') ||
    parsed.host !== uri.host ||
    parsed.port !== uri.port ||
    parsed.query !== uri.query
  ) {
    throw new InvalidResourceUri(text, 'plugin, path, host, port or query do not round-trip');
  }
  return text;
}

/** The KBS request path of a `KbsUri` below the API root: `<plugin>/<path>[?query]` (the host is not used). */
export function kbsUriRequestPath(uri: KbsUri): string {
  return `${uri.plugin}/${uri.path.join('/')}${uri.query !== undefined ? `?${uri.query}` : ''}`;
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
