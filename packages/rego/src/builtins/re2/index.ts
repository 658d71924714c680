// Go-compatible (RE2) regular expressions: parsing with Go's rules and messages, linear-time matching,
// and the Find/Split/Replace operations with Go's treatment of empty matches.
import type { Parsed } from './ast.js';
import { parseRegex } from './parse.js';
import { Program } from './prog.js';

export { RegexSyntaxError } from './ast.js';
export { MAX_PROGRAM, MAX_VISITED_BITS, RegexInputTooLargeError } from './prog.js';

function runeWidth(s: string, i: number): number {
  const c = s.charCodeAt(i);
  return c >= 0xd800 && c <= 0xdbff && i + 1 < s.length ? 2 : 1;
}

export class Regex {
  readonly numCap: number;
  readonly names: readonly (string | undefined)[];
  private readonly prog: Program;

  private constructor(parsed: Parsed) {
    this.numCap = parsed.numCap;
    this.names = parsed.names;
    this.prog = new Program(parsed.root);
  }

  /** Compiles a pattern; throws RegexSyntaxError as Go's regexp.Compile would fail. */
  static compile(pattern: string): Regex {
    return new Regex(parseRegex(pattern));
  }

  test(s: string): boolean {
    try {
      return this.prog.exec(s, 0, 0) !== null;
    } finally {
      this.prog.release();
    }
  }

  /** Index pairs for the whole match and each group (-1 when a group did not participate). */
  execAt(s: string, from: number, groups: boolean): Int32Array | null {
    return this.prog.exec(s, from, groups ? 2 * (this.numCap + 1) : 2);
  }

  /** Go's FindAll*Index: up to n matches (all when n < 0), skipping an empty match right after a match. */
  findAll(s: string, n: number, groups: boolean): Int32Array[] {
    try {
      return this.findAllInner(s, n, groups);
    } finally {
      this.prog.release();
    }
  }

  private findAllInner(s: string, n: number, groups: boolean): Int32Array[] {
    const out: Int32Array[] = [];
    if (n === 0) return out;
    let pos = 0;
    let prevEnd = -1;
    while (pos <= s.length && (n < 0 || out.length < n)) {
      const m = this.execAt(s, pos, groups);
      if (m === null) break;
      let accept = true;
      if (m[1] === m[0]) {
        if (m[0] === prevEnd) accept = false;
        pos = m[1]! < s.length ? m[1]! + runeWidth(s, m[1]!) : s.length + 1;
      } else {
        pos = m[1]!;
      }
      prevEnd = m[1]!;
      if (accept) out.push(Int32Array.from(m));
    }
    return out;
  }

  /** Go's Regexp.Split(s, n). */
  split(s: string, n: number): string[] {
    if (n === 0) return [];
    if (s === '') return [''];
    const matches = this.findAll(s, n, false);
    const out: string[] = [];
    let beg = 0;
    let end = 0;
    for (const m of matches) {
      if (n > 0 && out.length === n - 1) break;
      end = m[0]!;
      if (m[1] !== 0) out.push(s.slice(beg, end));
      beg = m[1]!;
    }
    if (end !== s.length) out.push(s.slice(beg));
    return out;
  }

  /** Go's Regexp.ReplaceAllString: `$1`, `${1}`, `$name`, `${name}` and `$$` in the template. */
  replaceAll(s: string, template: string): string {
    try {
      return this.replaceAllInner(s, template);
    } finally {
      this.prog.release();
    }
  }

  private replaceAllInner(s: string, template: string): string {
    const needGroups = template.includes('$');
    let out = '';
    let lastEnd = 0;
    let searchPos = 0;
    while (searchPos <= s.length) {
      const m = this.execAt(s, searchPos, needGroups);
      if (m === null) break;
      out += s.slice(lastEnd, m[0]);
      // No replacement for an empty match right after the previous match.
      if (m[1]! > lastEnd || m[0] === 0) out += needGroups ? this.expand(template, s, m) : template;
      lastEnd = m[1]!;
      const width = searchPos < s.length ? runeWidth(s, searchPos) : 1;
      if (searchPos + width > m[1]!) searchPos += width;
      else if (searchPos + 1 > m[1]!) searchPos++;
      else searchPos = m[1]!;
    }
    return out + s.slice(lastEnd);
  }

  /** Go's Regexp.ExpandString for one match. */
  expand(template: string, s: string, m: Int32Array): string {
    let out = '';
    let i = 0;
    while (i < template.length) {
      const d = template.indexOf('$', i);
      if (d < 0) {
        out += template.slice(i);
        break;
      }
      out += template.slice(i, d);
      i = d + 1;
      if (template[i] === '$') {
        out += '$';
        i++;
        continue;
      }
      let name: string | undefined;
      const brace = template[i] === '{';
      const r = /^[\p{L}\p{Nd}_]+/u.exec(template.slice(brace ? i + 1 : i));
      if (r !== null) {
        const after = (brace ? i + 1 : i) + r[0].length;
        if (!brace) {
          name = r[0];
          i = after;
        } else if (template[after] === '}') {
          name = r[0];
          i = after + 1;
        }
      }
      if (name === undefined) {
        // Malformed: the $ is literal text.
        out += '$';
        continue;
      }
      let idx = -1;
      if (/^(0|[1-9][0-9]{0,7})$/.test(name)) {
        idx = Number(name);
      } else {
        for (let k = 1; k < this.names.length; k++) {
          if (this.names[k] === name && m[2 * k]! >= 0) {
            idx = k;
            break;
          }
        }
      }
      if (idx >= 0 && 2 * idx + 1 < m.length && m[2 * idx]! >= 0) out += s.slice(m[2 * idx], m[2 * idx + 1]);
    }
    return out;
  }
}

const CACHE_SIZE = 256;
const cache = new Map<string, Regex>();

/** A compiled pattern from a process-wide LRU cache (compilation depends only on the pattern). */
export function compileCached(pattern: string): Regex {
  const hit = cache.get(pattern);
  if (hit !== undefined) {
    cache.delete(pattern);
    cache.set(pattern, hit);
    return hit;
  }
  const re = Regex.compile(pattern);
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
  cache.set(pattern, re);
  return re;
}
