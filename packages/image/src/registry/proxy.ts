/**
 * Proxy settings of the registry client: which proxy a request goes
 * through, if any. `https_proxy` serves https URLs (HTTP CONNECT tunnel,
 * TLS end to end with the registry), `http_proxy` serves http URLs
 * (absolute-form requests), and a host that matches `no_proxy` is
 * contacted directly. A URL whose scheme has no proxy set goes direct, as
 * with image-rs (reqwest's per-scheme proxies).
 *
 * `no_proxy` is a comma-separated list; each entry is
 *
 * - `*`: every host;
 * - an IP address (`10.0.0.1`, `::1`, `[::1]`), optionally with a port;
 * - a CIDR block (`10.0.0.0/8`, `fd00::/8`);
 * - a domain (`example.com`, `.example.com` or `*.example.com`: the domain
 *   itself and every subdomain), optionally with `:port` (that port only).
 *
 * Names compare case-insensitively; blanks around entries are ignored.
 */

import { BlockList, isIP } from 'node:net';
import { ImageError, type ImageErrorCode } from '../errors.js';

/** `[image.image_pull_proxy]` of the data hub, `agent.https_proxy` & co. of the kernel command line. */
export interface ProxySettings {
  /** Proxy for https registries (`http://host:port`; a bare `host:port` means http). */
  readonly httpsProxy?: string | null;
  /** Proxy for plain-http registries. */
  readonly httpProxy?: string | null;
  /** Hosts reached directly (see the module comment). */
  readonly noProxy?: string | null;
}

/** A proxy setting that cannot be used. */
export class ProxyConfigError extends ImageError {
  override readonly code: ImageErrorCode = 'PROXY_CONFIG_INVALID';
  override readonly name: string = 'ProxyConfigError';
}

interface HostRule {
  readonly kind: 'domain' | 'ip';
  readonly value: string;
  readonly port?: number;
}

/** A parsed `no_proxy` list. */
export interface NoProxy {
  /** True when `url`'s host is to be reached without the proxy. */
  matches(url: URL): boolean;
}

function defaultPort(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

function bareHost(url: URL): string {
  const h = url.hostname.toLowerCase();
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h;
}

/** Splits `host[:port]`, `[v6]:port` or a bare IPv6 address. */
function splitHostPort(entry: string): { host: string; port?: number } {
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracket !== null) {
    return { host: bracket[1] ?? '', ...(bracket[2] !== undefined ? { port: Number(bracket[2]) } : {}) };
  }
  if (isIP(entry) === 6) return { host: entry };
  const colon = entry.lastIndexOf(':');
  if (colon > 0 && /^\d+$/.test(entry.slice(colon + 1))) {
    return { host: entry.slice(0, colon), port: Number(entry.slice(colon + 1)) };
  }
  return { host: entry };
}

/** Parses a `no_proxy` list (null or empty: no host bypasses the proxy). */
export function parseNoProxy(text: string | null | undefined): NoProxy {
  let all = false;
  const rules: HostRule[] = [];
  const blocks = new BlockList();
  for (const raw of (text ?? '').split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') {
      all = true;
      continue;
    }
    const cidr = /^(.+)\/(\d{1,3})$/.exec(entry);
    if (cidr !== null) {
      const ip = (cidr[1] ?? '').replace(/^\[(.*)\]$/, '$1');
      const family = isIP(ip);
      const bits = Number(cidr[2]);
      if (family === 0 || bits > (family === 4 ? 32 : 128)) {
        throw new ProxyConfigError(`no_proxy: ${entry} is not an IP address block`);
      }
      blocks.addSubnet(ip, bits, family === 4 ? 'ipv4' : 'ipv6');
      continue;
    }
    const { host, port } = splitHostPort(entry);
    if (port !== undefined && (port < 1 || port > 65535)) {
      throw new ProxyConfigError(`no_proxy: ${entry} has an invalid port`);
    }
    if (isIP(host) !== 0) {
      rules.push({ kind: 'ip', value: host, ...(port !== undefined ? { port } : {}) });
      continue;
    }
    const domain = host.replace(/^\*?\./, '');
    if (domain === '' || domain.includes('*') || domain.includes('/')) {
      throw new ProxyConfigError(`no_proxy: ${entry} is not a host name`);
    }
    rules.push({ kind: 'domain', value: domain, ...(port !== undefined ? { port } : {}) });
  }
  return {
    matches(url: URL): boolean {
      if (all) return true;
      const host = bareHost(url);
      const family = isIP(host);
      if (family !== 0 && blocks.check(host, family === 4 ? 'ipv4' : 'ipv6')) return true;
      const port = defaultPort(url);
      return rules.some((r) => {
        if (r.port !== undefined && r.port !== port) return false;
        if (r.kind === 'ip') return family !== 0 && sameIp(r.value, host);
        return host === r.value || host.endsWith(`.${r.value}`);
      });
    },
  };
}

function sameIp(a: string, b: string): boolean {
  if (a === b) return true;
  const list = new BlockList();
  const family = isIP(a) === 4 ? 'ipv4' : 'ipv6';
  list.addAddress(a, family);
  return list.check(b, isIP(b) === 4 ? 'ipv4' : 'ipv6');
}

/**
 * A proxy URL as a `URL`: `http://host:port` or `https://host:port`
 * (credentials allowed, sent as `Proxy-Authorization: Basic`); a value
 * without a scheme is taken as http, as curl and reqwest do.
 */
export function parseProxyUrl(value: string, what: string): URL {
  const text = /^[a-z][a-z0-9+.-]*:\/\//i.test(value) ? value : `http://${value}`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ProxyConfigError(`${what}: ${JSON.stringify(value)} is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ProxyConfigError(`${what}: unsupported proxy scheme ${url.protocol} (http or https)`);
  }
  if (url.hostname === '') throw new ProxyConfigError(`${what}: ${JSON.stringify(value)} names no host`);
  return url;
}

/** Settings checked and parsed once; `proxyFor` picks the proxy of one request. */
export interface ResolvedProxies {
  readonly https: URL | undefined;
  readonly http: URL | undefined;
  readonly noProxy: NoProxy;
  /** The proxy `url` goes through, or undefined to connect directly. */
  proxyFor(url: URL): URL | undefined;
}

/** Checks the settings (throws `ProxyConfigError`); empty strings count as unset. */
export function resolveProxies(settings: ProxySettings): ResolvedProxies {
  const https =
    settings.httpsProxy != null && settings.httpsProxy.trim() !== ''
      ? parseProxyUrl(settings.httpsProxy.trim(), 'https_proxy')
      : undefined;
  const http =
    settings.httpProxy != null && settings.httpProxy.trim() !== ''
      ? parseProxyUrl(settings.httpProxy.trim(), 'http_proxy')
      : undefined;
  const noProxy = parseNoProxy(settings.noProxy);
  return {
    https,
    http,
    noProxy,
    proxyFor(url) {
      const proxy = url.protocol === 'https:' ? https : url.protocol === 'http:' ? http : undefined;
      if (proxy === undefined || noProxy.matches(url)) return undefined;
      return proxy;
    },
  };
}

/**
 * The settings of the usual environment variables (`HTTPS_PROXY`,
 * `HTTP_PROXY`, `NO_PROXY`, upper case first, then lower case), as skopeo
 * reads them; undefined when none is set.
 */
export function proxySettingsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): ProxySettings | undefined {
  const pick = (name: string) => env[name.toUpperCase()] ?? env[name] ?? null;
  const out = { httpsProxy: pick('https_proxy'), httpProxy: pick('http_proxy'), noProxy: pick('no_proxy') };
  return out.httpsProxy === null && out.httpProxy === null ? undefined : out;
}
