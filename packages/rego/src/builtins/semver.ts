// semver.is_valid and semver.compare, as OPA's SemVer parser (a leading "v" is accepted).
import { argString, type BuiltinTable, builtinError } from './api.js';

interface Version {
  major: bigint;
  minor: bigint;
  patch: bigint;
  pre: string;
}

const DECIMALS = /^\d+$/;
const IDENT = /^[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*$/;
// strconv.ParseInt(s, 10, 64) syntax.
const INT = /^[+-]?\d+$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** The parts before and after the first `sep`; the second is undefined when there is no `sep`. */
function cut(s: string, sep: string): [string, string | undefined] {
  const i = s.indexOf(sep);
  return i < 0 ? [s, undefined] : [s.slice(0, i), s.slice(i + 1)];
}

/** A numeric identifier with a leading zero (`01`), which SemVer 2.0.0 forbids. */
const LEADING_ZERO = /^0\d/;

function int64(s: string): bigint | undefined {
  if (!INT.test(s) || LEADING_ZERO.test(s)) return undefined;
  const v = BigInt(s);
  return v < INT64_MIN || v > INT64_MAX ? undefined : v;
}

/**
 * OPA's strict SemVer 2.0.0: no leading zeros in the numbers or in numeric pre-release identifiers, and no
 * empty pre-release or build sections.
 */
export function parseSemver(input: string): Version | undefined {
  const [rest, meta] = cut(input.startsWith('v') ? input.slice(1) : input, '+');
  if (meta !== undefined && !IDENT.test(meta)) return undefined;
  const [core, pre = ''] = cut(rest, '-');
  if (pre !== '' || rest.includes('-')) {
    if (!IDENT.test(pre)) return undefined;
    if (pre.split('.').some((id) => DECIMALS.test(id) && LEADING_ZERO.test(id))) return undefined;
  }
  const parts = core.split('.');
  if (parts.length !== 3) return undefined;
  const [major, minor, patch] = parts.map(int64);
  if (major === undefined || minor === undefined || patch === undefined) return undefined;
  return { major, minor, patch, pre };
}

function atoi(s: string): bigint {
  // Go's Atoi fails (and OPA then compares 0) beyond int64.
  const v = BigInt(s);
  return v > INT64_MAX ? 0n : v;
}

export function compareSemver(a: Version, b: Version): number {
  for (const k of ['major', 'minor', 'patch'] as const) {
    if (a[k] !== b[k]) return a[k] > b[k] ? 1 : -1;
  }
  if (a.pre === b.pre) return 0;
  if (a.pre === '') return 1;
  if (b.pre === '') return -1;
  const pa = a.pre.split('.');
  const pb = b.pre.split('.');
  for (let i = 0; ; i++) {
    const x = pa[i];
    const y = pb[i];
    if (x === undefined && y !== undefined) return -1;
    if (x !== undefined && y === undefined) return 1;
    if (x === undefined || y === undefined) return 0;
    const xi = DECIMALS.test(x);
    const yi = DECIMALS.test(y);
    if (xi && !yi) return -1;
    if (!xi && yi) return 1;
    if (xi && yi) {
      const d = atoi(x) - atoi(y);
      if (d !== 0n) return d > 0n ? 1 : -1;
    } else if (x !== y) {
      return x > y ? 1 : -1;
    }
  }
}

export const semverBuiltins: BuiltinTable = {
  'semver.is_valid': {
    arity: 1,
    fn: ([v = null]) => typeof v === 'string' && parseSemver(v) !== undefined,
  },
  'semver.compare': {
    arity: 2,
    fn: (args) => {
      const a = argString('semver.compare', args, 0);
      const b = argString('semver.compare', args, 1);
      const va = parseSemver(a);
      if (va === undefined)
        throw builtinError('semver.compare', `operand 1: string ${JSON.stringify(a)} is not a valid SemVer`);
      const vb = parseSemver(b);
      if (vb === undefined)
        throw builtinError('semver.compare', `operand 2: string ${JSON.stringify(b)} is not a valid SemVer`);
      return compareSemver(va, vb);
    },
  },
};
