// Regex builtins with Go (RE2) semantics, on the linear-time engine in re2/.
import type { Value } from '../value.js';
import { argSmallInt, argString, type BuiltinContext, type BuiltinTable, builtinError } from './api.js';
import { compileCached, type Regex, RegexInputTooLargeError, RegexSyntaxError } from './re2/index.js';

function compile(name: string, pattern: string, ctx: BuiltinContext): Regex {
  if (pattern.length > ctx.maxRegexLength) {
    throw builtinError(name, `regular expression longer than ${ctx.maxRegexLength} characters`);
  }
  try {
    return compileCached(pattern);
  } catch (e) {
    if (e instanceof RegexSyntaxError) throw builtinError(name, e.message);
    throw e;
  }
}

/** Runs a matcher, turning the engine's resource limit into a builtin error. */
function run<T>(name: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof RegexInputTooLargeError) throw builtinError(name, e.message);
    throw e;
  }
}

const META = /[\\.+*?()|[\]{}^$]/g;

/** Go's regexp.QuoteMeta. */
export function quoteMeta(s: string): string {
  return s.replace(META, '\\$&');
}

function utf8Length(s: string): number {
  return new TextEncoder().encode(s).length;
}

/** OPA's regex.template_match: literal text with regexes between one-byte delimiters, matched whole. */
function templateRegex(name: string, tpl: string, start: string, end: string, ctx: BuiltinContext): Regex {
  const bounds: number[] = [];
  let level = 0;
  let open = 0;
  for (let i = 0; i < tpl.length; i++) {
    const c = tpl[i];
    if (c === start) {
      level++;
      if (level === 1) open = i;
    } else if (c === end) {
      level--;
      if (level === 0) bounds.push(open, i + 1);
      else if (level < 0) throw builtinError(name, `unbalanced braces in ${JSON.stringify(tpl)}`);
    }
  }
  if (level !== 0) throw builtinError(name, `unbalanced braces in ${JSON.stringify(tpl)}`);
  let pattern = '^';
  let last = 0;
  for (let i = 0; i < bounds.length; i += 2) {
    const raw = tpl.slice(last, bounds[i]);
    last = bounds[i + 1]!;
    const part = tpl.slice(bounds[i]! + 1, last - 1);
    compile(name, `^${part}$`, ctx);
    pattern += `${quoteMeta(raw)}(${part})`;
  }
  pattern += `${quoteMeta(tpl.slice(last))}$`;
  return compile(name, pattern, ctx);
}

function matchBuiltin(name: string) {
  return {
    arity: 2,
    fn: (args: readonly Value[], ctx: BuiltinContext) => {
      const re = compile(name, argString(name, args, 0), ctx);
      const s = argString(name, args, 1);
      return run(name, () => re.test(s));
    },
  };
}

export const regexBuiltins: BuiltinTable = {
  'regex.match': matchBuiltin('regex.match'),
  // Deprecated (v0 only): use regex.match.
  re_match: matchBuiltin('re_match'),
  'regex.is_valid': {
    arity: 1,
    fn: ([p = null], ctx) => {
      if (typeof p !== 'string' || p.length > ctx.maxRegexLength) return false;
      try {
        compileCached(p);
        return true;
      } catch (e) {
        if (e instanceof RegexSyntaxError) return false;
        throw e;
      }
    },
  },
  'regex.split': {
    arity: 2,
    fn: (args, ctx) => {
      const re = compile('regex.split', argString('regex.split', args, 0), ctx);
      const s = argString('regex.split', args, 1);
      return run('regex.split', () => re.split(s, -1));
    },
  },
  'regex.find_n': {
    arity: 3,
    fn: (args, ctx) => {
      const name = 'regex.find_n';
      const pattern = argString(name, args, 0);
      const s = argString(name, args, 1);
      const n = argSmallInt(name, args, 2);
      const re = compile(name, pattern, ctx);
      return run(name, () => re.findAll(s, n, false).map((m) => s.slice(m[0], m[1])));
    },
  },
  'regex.find_all_string_submatch_n': {
    arity: 3,
    fn: (args, ctx) => {
      const name = 'regex.find_all_string_submatch_n';
      const pattern = argString(name, args, 0);
      const s = argString(name, args, 1);
      const n = argSmallInt(name, args, 2);
      const re = compile(name, pattern, ctx);
      return run(name, () =>
        re.findAll(s, n, true).map((m) => {
          const groups: string[] = [];
          // Go reports a group that did not take part in the match as "".
          for (let g = 0; g <= re.numCap; g++)
            groups.push(m[2 * g]! >= 0 ? s.slice(m[2 * g], m[2 * g + 1]) : '');
          return groups;
        }),
      );
    },
  },
  'regex.replace': {
    arity: 3,
    fn: (args, ctx) => {
      const name = 'regex.replace';
      const s = argString(name, args, 0);
      const pattern = argString(name, args, 1);
      const value = argString(name, args, 2);
      const re = compile(name, pattern, ctx);
      return run(name, () => re.replaceAll(s, value));
    },
  },
  'regex.template_match': {
    arity: 4,
    fn: (args, ctx) => {
      const name = 'regex.template_match';
      const tpl = argString(name, args, 0);
      const s = argString(name, args, 1);
      const start = argString(name, args, 2);
      const end = argString(name, args, 3);
      if (utf8Length(start) !== 1) {
        throw builtinError(
          name,
          `start delimiter has to be exactly one character long but is ${utf8Length(start)} long`,
        );
      }
      // OPA reports the start delimiter's length here too.
      if (utf8Length(end) !== 1) {
        throw builtinError(
          name,
          `end delimiter has to be exactly one character long but is ${utf8Length(start)} long`,
        );
      }
      const re = templateRegex(name, tpl, start, end, ctx);
      return run(name, () => re.test(s));
    },
  },
};
