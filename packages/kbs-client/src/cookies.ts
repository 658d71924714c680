/**
 * A cookie jar for one KBS origin, standing in for reqwest's cookie store:
 * it keeps what the KBS sets (the `kbs-session-id` session cookie), honours
 * `Expires`/`Max-Age`, and sends the live cookies back. The client talks to a
 * single host under `/kbs/v0`, so domain and path scoping are not needed.
 */

/** Bounds so a hostile server cannot grow the jar without limit. */
const MAX_COOKIES = 32;
const MAX_COOKIE_BYTES = 4096;

interface StoredCookie {
  value: string;
  /** Epoch milliseconds, or undefined for a session cookie. */
  expiresAt: number | undefined;
}

// RFC 6265 token characters for the name; the value may not hold ; , whitespace, quotes or backslash.
const NAME_RE = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const VALUE_RE = /^[\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*$/;

export class CookieJar {
  readonly #cookies = new Map<string, StoredCookie>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Store the cookies of one response's `Set-Cookie` headers; malformed ones are ignored, as browsers do. */
  store(setCookie: readonly string[] | string | undefined): void {
    if (setCookie === undefined) return;
    for (const header of typeof setCookie === 'string' ? [setCookie] : setCookie) this.#storeOne(header);
  }

  #storeOne(header: string): void {
    if (header.length > MAX_COOKIE_BYTES) return;
    const [pair = '', ...attrs] = header.split(';');
    const eq = pair.indexOf('=');
    if (eq <= 0) return;
    const name = pair.slice(0, eq).trim();
    let value = pair.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (!NAME_RE.test(name) || !VALUE_RE.test(value)) return;

    let expiresAt: number | undefined;
    let maxAgeSeen = false;
    for (const attr of attrs) {
      const i = attr.indexOf('=');
      const key = (i < 0 ? attr : attr.slice(0, i)).trim().toLowerCase();
      const val = i < 0 ? '' : attr.slice(i + 1).trim();
      if (key === 'max-age' && /^-?\d+$/.test(val)) {
        // Max-Age wins over Expires (RFC 6265 §5.3 step 3).
        maxAgeSeen = true;
        const secs = Number(val);
        expiresAt = secs <= 0 ? Number.NEGATIVE_INFINITY : this.#now() + secs * 1000;
      } else if (key === 'expires' && !maxAgeSeen) {
        const t = Date.parse(val);
        if (!Number.isNaN(t)) expiresAt = t;
      }
    }

    if (expiresAt !== undefined && expiresAt <= this.#now()) {
      this.#cookies.delete(name);
      return;
    }
    if (!this.#cookies.has(name) && this.#cookies.size >= MAX_COOKIES) return;
    this.#cookies.set(name, { value, expiresAt });
  }

  /** The `Cookie` header value for a request, or undefined when no live cookie remains. */
  header(): string | undefined {
    const now = this.#now();
    const parts: string[] = [];
    for (const [name, c] of this.#cookies) {
      if (c.expiresAt !== undefined && c.expiresAt <= now) {
        this.#cookies.delete(name);
        continue;
      }
      parts.push(`${name}=${c.value}`);
    }
    return parts.length === 0 ? undefined : parts.join('; ');
  }

  /** The live value of one cookie. */
  get(name: string): string | undefined {
    const c = this.#cookies.get(name);
    if (c === undefined) return undefined;
    if (c.expiresAt !== undefined && c.expiresAt <= this.#now()) {
      this.#cookies.delete(name);
      return undefined;
    }
    return c.value;
  }

  clear(): void {
    this.#cookies.clear();
  }
}
