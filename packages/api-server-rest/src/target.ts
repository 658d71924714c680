/**
 * The request target as the router sees it: the raw path (never
 * percent-decoded, as hyper's `uri().path()`, so `%2e%2e` reaches the data hub
 * verbatim and its URI parser decides) and the query parameters.
 */

export interface RequestTarget {
  /** Raw path, starting with `/` for origin-form and absolute-form targets. */
  readonly path: string;
  /** Raw query without the `?`, or `null` when the target has none. */
  readonly query: string | null;
}

const ABSOLUTE_FORM = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/;

/**
 * Splits an HTTP/1.1 request target. Origin-form (`/p?q`) is the normal case;
 * absolute-form (`http://host/p?q`, sent to proxies) is reduced to its path and
 * query as hyper does. Anything else (`*`, authority-form) is kept as the path
 * and will not match a route.
 */
export function parseRequestTarget(raw: string): RequestTarget {
  let rest = raw;
  const hash = rest.indexOf('#');
  if (hash >= 0) rest = rest.slice(0, hash);
  if (!rest.startsWith('/')) {
    const m = ABSOLUTE_FORM.exec(rest);
    if (m) {
      rest = rest.slice(m[0].length);
      if (!rest.startsWith('/')) rest = `/${rest}`;
    }
  }
  const q = rest.indexOf('?');
  if (q < 0) return { path: rest, query: null };
  return { path: rest.slice(0, q), query: rest.slice(q + 1) };
}

/**
 * Query parameters with `application/x-www-form-urlencoded` rules (`+` is a
 * space, malformed `%` escapes stay literal, invalid UTF-8 becomes U+FFFD).
 * A repeated name keeps its last value, as upstream collects into a map.
 */
export function parseQuery(query: string | null): Map<string, string> {
  const out = new Map<string, string>();
  if (query === null || query === '') return out;
  for (const [k, v] of new URLSearchParams(query)) out.set(k, v);
  return out;
}

/**
 * Upstream's `split_nth_slash`: splits `path` just before its `n`-th `/`
 * (1-based), so the second part starts with that slash; `null` when `path`
 * has fewer than `n` slashes.
 */
export function splitNthSlash(path: string, n: number): [string, string] | null {
  if (n < 1) return null;
  let idx = -1;
  for (let i = 0; i < n; i++) {
    idx = path.indexOf('/', idx + 1);
    if (idx < 0) return null;
  }
  return [path.slice(0, idx), path.slice(idx)];
}
