// glob.match and glob.quote_meta with gobwas/glob syntax: * (within separators), ** (across them),
// ?, [abc], [a-z], [!...], {alt,...} and \ escapes. Patterns are translated to RE2 and matched with
// the linear-time engine.
import type { Value } from '../value.js';
import { argString, type BuiltinTable, builtinError, elementError, typeErrorOneOf } from './api.js';
import { compileCached, type Regex } from './re2/index.js';
import { quoteMeta } from './regex.js';

class GlobSyntaxError extends Error {}

function escapeClassChar(c: string): string {
  return /[\\\][^-]/.test(c) ? `\\${c}` : c;
}

/** Translates a glob to an anchored RE2 pattern. */
export function globToRegex(pattern: string, delimiters: readonly string[]): string {
  const chars = Array.from(pattern);
  const notSep = delimiters.length === 0 ? '(?s:.)' : `[^${delimiters.map(escapeClassChar).join('')}]`;
  let i = 0;
  const seq = (inBraces: boolean): string => {
    let out = '';
    while (i < chars.length) {
      const c = chars[i]!;
      if (inBraces && (c === ',' || c === '}')) return out;
      i++;
      switch (c) {
        case '\\': {
          const next = chars[i];
          if (next === undefined) throw new GlobSyntaxError('unexpected end of input after escape');
          i++;
          out += quoteMeta(next);
          break;
        }
        case '*':
          if (chars[i] === '*') {
            i++;
            out += '(?s:.*)';
          } else {
            out += `${notSep}*`;
          }
          break;
        case '?':
          out += notSep;
          break;
        case '[': {
          let neg = false;
          if (chars[i] === '!') {
            neg = true;
            i++;
          }
          let cls = '';
          let closed = false;
          while (i < chars.length) {
            const d = chars[i]!;
            i++;
            if (d === ']') {
              closed = true;
              break;
            }
            if (chars[i] === '-' && chars[i + 1] !== undefined && chars[i + 1] !== ']') {
              const hi = chars[i + 1]!;
              if (hi < d) throw new GlobSyntaxError(`invalid range ${d}-${hi}`);
              cls += `${escapeClassChar(d)}-${escapeClassChar(hi)}`;
              i += 2;
            } else {
              cls += escapeClassChar(d);
            }
          }
          if (!closed) throw new GlobSyntaxError('unexpected end of input in character class');
          if (cls === '') throw new GlobSyntaxError('empty character class');
          out += `[${neg ? '^' : ''}${cls}]`;
          break;
        }
        case '{': {
          const alts: string[] = [];
          for (;;) {
            alts.push(seq(true));
            const d = chars[i];
            if (d === undefined) throw new GlobSyntaxError('unexpected end of input in alternatives');
            i++;
            if (d === '}') break;
          }
          out += `(?:${alts.join('|')})`;
          break;
        }
        default:
          out += quoteMeta(c);
      }
    }
    if (inBraces) throw new GlobSyntaxError('unexpected end of input in alternatives');
    return out;
  };
  return `^${seq(false)}$`;
}

const GLOB_SPECIALS = /[*?\\[\]{}]/g;

function compileGlob(pattern: string, delimiters: readonly string[]): Regex {
  try {
    return compileCached(globToRegex(pattern, delimiters));
  } catch (e) {
    if (e instanceof GlobSyntaxError) throw builtinError('glob.match', e.message);
    throw e;
  }
}

export const globBuiltins: BuiltinTable = {
  'glob.match': {
    arity: 3,
    fn: (args) => {
      const pattern = argString('glob.match', args, 0);
      const d = args[1] ?? null;
      let delimiters: string[];
      if (d === null) delimiters = [];
      else if (Array.isArray(d)) {
        delimiters = d.map((x: Value) => {
          if (typeof x !== 'string') throw elementError('glob.match', 2, d, 'string', x);
          if (Array.from(x).length !== 1) throw elementError('glob.match', 2, d, 'rune', x);
          return x;
        });
        if (delimiters.length === 0) delimiters = ['.'];
      } else {
        throw typeErrorOneOf('glob.match', 2, ['array', 'null'], d);
      }
      const match = argString('glob.match', args, 2);
      return compileGlob(pattern, delimiters).test(match);
    },
  },
  'glob.quote_meta': {
    arity: 1,
    fn: (args) => argString('glob.quote_meta', args, 0).replace(GLOB_SPECIALS, '\\$&'),
  },
};
