// net.cidr_* builtins with Go's net package parsing (IPv4 without leading zeros, IPv6 with ::).
import { ObjectValue, SetValue, type Value } from '../value.js';
import { argString, type BuiltinTable, builtinError, typeError } from './api.js';

/** An address as a bigint and its family width (32 or 128 bits). */
interface IP {
  readonly v: bigint;
  readonly bits: 32 | 128;
}

interface Net {
  readonly ip: IP;
  readonly prefix: number;
}

/** Nets with more addresses than this are not expanded. */
export const MAX_CIDR_EXPAND = 65536;

function parseIPv4(s: string): bigint | undefined {
  const parts = s.split('.');
  if (parts.length !== 4) return undefined;
  let v = 0n;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const n = Number(p);
    if (n > 255) return undefined;
    v = (v << 8n) | BigInt(n);
  }
  return v;
}

function parseIPv6(s: string): bigint | undefined {
  let head = s;
  let v4tail: bigint | undefined;
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    v4tail = parseIPv4(s.slice(lastColon + 1));
    if (v4tail === undefined) return undefined;
    // The dotted tail stands for the last two groups.
    head = `${s.slice(0, lastColon + 1)}0:0`;
  }
  const dbl = head.indexOf('::');
  if (dbl !== head.lastIndexOf('::')) return undefined;
  const parseGroups = (t: string): number[] | undefined => {
    if (t === '') return [];
    const gs = t.split(':');
    const out: number[] = [];
    for (const g of gs) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(Number.parseInt(g, 16));
    }
    return out;
  };
  let groups: number[];
  if (dbl >= 0) {
    const left = parseGroups(head.slice(0, dbl));
    const right = parseGroups(head.slice(dbl + 2));
    if (left === undefined || right === undefined) return undefined;
    const fill = 8 - left.length - right.length;
    if (fill < 1) return undefined;
    groups = [...left, ...new Array<number>(fill).fill(0), ...right];
  } else {
    const g = parseGroups(head);
    if (g === undefined || g.length !== 8) return undefined;
    groups = g;
  }
  let v = 0n;
  for (const g of groups) v = (v << 16n) | BigInt(g);
  if (v4tail !== undefined) v = (v & ~0xffffffffn) | v4tail;
  return v;
}

/** net.ParseIP: IPv4 maps into IPv6 as ::ffff:a.b.c.d; here it is kept as a 32-bit address. */
export function parseIP(s: string): IP | undefined {
  if (s.includes(':')) {
    const v = parseIPv6(s);
    if (v === undefined) return undefined;
    // IPv4-mapped addresses behave as IPv4 (To4).
    if (v >> 32n === 0xffffn) return { v: v & 0xffffffffn, bits: 32 };
    return { v, bits: 128 };
  }
  const v = parseIPv4(s);
  return v === undefined ? undefined : { v, bits: 32 };
}

function mask(bits: number, prefix: number): bigint {
  const all = (1n << BigInt(bits)) - 1n;
  return (all << BigInt(bits - prefix)) & all;
}

/** net.ParseCIDR: the network (masked address) and prefix. */
export function parseCIDR(s: string): Net | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const addr = s.slice(0, slash);
  const pfx = s.slice(slash + 1);
  if (!/^[0-9]{1,3}$/.test(pfx)) return undefined;
  const prefix = Number(pfx);
  let ip: IP | undefined;
  if (addr.includes(':')) {
    const v = parseIPv6(addr);
    if (v === undefined) return undefined;
    ip = { v, bits: 128 };
  } else {
    const v = parseIPv4(addr);
    if (v === undefined) return undefined;
    ip = { v, bits: 32 };
  }
  if (prefix > ip.bits) return undefined;
  return { ip: { v: ip.v & mask(ip.bits, prefix), bits: ip.bits }, prefix };
}

function contains(n: Net, ip: IP): boolean {
  if (n.ip.bits !== ip.bits) return false;
  const m = mask(n.ip.bits, n.prefix);
  return (ip.v & m) === n.ip.v;
}

function lastIP(n: Net): IP {
  const host = (1n << BigInt(n.ip.bits - n.prefix)) - 1n;
  return { v: n.ip.v | host, bits: n.ip.bits };
}

export function formatIP(ip: IP): string {
  if (ip.bits === 32) {
    const v = Number(ip.v);
    return [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
  }
  // IPv4-mapped addresses print as IPv4, as Go does.
  if (ip.v >> 32n === 0xffffn) return formatIP({ v: ip.v & 0xffffffffn, bits: 32 });
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((ip.v >> BigInt(i * 16)) & 0xffffn));
  // The longest run of two or more zero groups becomes "::" (the first such run on ties).
  let bestStart = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (g: number) => g.toString(16);
  if (bestStart < 0) return groups.map(hex).join(':');
  return `${groups.slice(0, bestStart).map(hex).join(':')}::${groups
    .slice(bestStart + bestLen)
    .map(hex)
    .join(':')}`;
}

function netOperand(name: string, v: Value, pos: number): Net {
  if (typeof v !== 'string') throw typeError(name, pos, 'string', v);
  const n = parseCIDR(v);
  if (n === undefined) throw builtinError(name, `invalid CIDR address: ${v}`);
  return n;
}

function cidrContains(name: string, a: Value, b: Value): boolean {
  const na = netOperand(name, a, 1);
  if (typeof b !== 'string') throw typeError(name, 1, 'string', b);
  const ip = parseIP(b);
  if (ip !== undefined) return contains(na, ip);
  const nb = parseCIDR(b);
  if (nb === undefined)
    throw builtinError(name, `not a valid textual representation of an IP address or CIDR: ${b}`);
  return contains(na, nb.ip) && contains(na, lastIP(nb));
}

function matchOperand(name: string, pos: number, v: Value, each: (cidr: Value, index: Value) => void): void {
  const term = (x: Value): Value => {
    if (typeof x === 'string') return x;
    if (Array.isArray(x) && x.length > 0) return x[0]!;
    throw builtinError(name, `operand ${pos}: element must be string or non-empty array`);
  };
  if (typeof v === 'string') each(v, v);
  else if (Array.isArray(v)) for (let i = 0; i < v.length; i++) each(term(v[i]!), i);
  else if (v instanceof SetValue) for (const x of v.sorted()) each(term(x), x);
  else if (v instanceof ObjectValue) for (const [k, x] of v.sortedEntries()) each(term(x), k);
}

/** The smallest list of CIDRs covering [first, last] in a family. */
function rangeToCIDRs(first: bigint, last: bigint, bits: 32 | 128): Net[] {
  const out: Net[] = [];
  let cur = first;
  while (cur <= last) {
    let size = 0;
    while (size < bits) {
      const block = 1n << BigInt(size + 1);
      if (cur % block !== 0n || cur + block - 1n > last) break;
      size++;
    }
    out.push({ ip: { v: cur, bits }, prefix: bits - size });
    cur += 1n << BigInt(size);
  }
  return out;
}

interface Range {
  first: bigint;
  last: bigint;
  text: string | undefined;
}

function mergeFamily(ranges: Range[], bits: 32 | 128): string[] {
  ranges.sort((a, b) =>
    a.last < b.last ? -1 : a.last > b.last ? 1 : a.first < b.first ? -1 : a.first > b.first ? 1 : 0,
  );
  for (let i = ranges.length - 1; i > 0; i--) {
    const cur = ranges[i]!;
    const prev = ranges[i - 1]!;
    if (cur.first - 1n <= prev.last) {
      ranges[i - 1] = {
        first: minBig(prev.first, cur.first),
        last: cur.last,
        text: undefined,
      };
      ranges.splice(i, 1);
    }
  }
  return ranges.flatMap((r) =>
    r.text !== undefined
      ? [r.text]
      : rangeToCIDRs(r.first, r.last, bits).map((n) => `${formatIP(n.ip)}/${n.prefix}`),
  );
}

function minBig(a: bigint, b: bigint): bigint {
  return b < a ? b : a;
}

function defaultPrefix(v: bigint): number {
  const first = Number(v >> 24n);
  return first < 0x80 ? 8 : first < 0xc0 ? 16 : 24;
}

function cidrContainsBuiltin(name: string) {
  return { arity: 2, fn: ([a = null, b = null]: readonly Value[]) => cidrContains(name, a, b) };
}

export const netBuiltins: BuiltinTable = {
  // Without DNS: an IP address resolves to itself (as Go's resolver does), `localhost` to the loopback
  // addresses (RFC 6761); other names are a builtin error.
  'net.lookup_ip_addr': {
    arity: 1,
    fn: (args) => {
      const name = argString('net.lookup_ip_addr', args, 0);
      if (/^(.+\.)?localhost\.?$/i.test(name)) {
        const loopback = new SetValue();
        loopback.add('127.0.0.1');
        loopback.add('::1');
        return loopback;
      }
      const ip = parseIP(name);
      if (ip === undefined) {
        throw builtinError(
          'net.lookup_ip_addr',
          `lookup ${name}: name resolution is not supported by this engine`,
        );
      }
      const out = new SetValue();
      out.add(formatIP(ip));
      return out;
    },
  },
  'net.cidr_contains': cidrContainsBuiltin('net.cidr_contains'),
  // Deprecated (v0 only): same as net.cidr_contains.
  'net.cidr_overlap': cidrContainsBuiltin('net.cidr_overlap'),
  'net.cidr_intersects': {
    arity: 2,
    fn: ([a = null, b = null]) => {
      const na = netOperand('net.cidr_intersects', a, 1);
      const nb = netOperand('net.cidr_intersects', b, 1);
      return contains(na, nb.ip) || contains(nb, na.ip);
    },
  },
  'net.cidr_is_valid': {
    arity: 1,
    fn: ([v = null]) => typeof v === 'string' && parseCIDR(v) !== undefined,
  },
  'net.cidr_expand': {
    arity: 1,
    fn: (args) => {
      const s = argString('net.cidr_expand', args, 0);
      const n = parseCIDR(s);
      if (n === undefined) throw builtinError('net.cidr_expand', `invalid CIDR address: ${s}`);
      const count = 1n << BigInt(n.ip.bits - n.prefix);
      if (count > BigInt(MAX_CIDR_EXPAND)) {
        throw builtinError('net.cidr_expand', `CIDR ${s} has more than ${MAX_CIDR_EXPAND} addresses`);
      }
      const out = new SetValue();
      for (let i = 0n; i < count; i++) out.add(formatIP({ v: n.ip.v + i, bits: n.ip.bits }));
      return out;
    },
  },
  'net.cidr_contains_matches': {
    arity: 2,
    fn: ([a = null, b = null]) => {
      const name = 'net.cidr_contains_matches';
      const out = new SetValue();
      matchOperand(name, 1, a, (c1, i1) => {
        matchOperand(name, 2, b, (c2, i2) => {
          if (cidrContains(name, c1, c2)) out.add([i1, i2]);
        });
      });
      return out;
    },
  },
  'net.cidr_merge': {
    arity: 1,
    fn: ([v = null]) => {
      const name = 'net.cidr_merge';
      let items: readonly Value[];
      if (Array.isArray(v)) items = v;
      else if (v instanceof SetValue) items = v.sorted();
      else throw builtinError(name, 'operand must be an array');
      const fams: { 32: Range[]; 128: Range[] } = { 32: [], 128: [] };
      for (const x of items) {
        if (typeof x !== 'string') throw builtinError(name, 'element must be string');
        const ip = parseIP(x);
        let net: Net;
        let text: string;
        if (ip !== undefined) {
          if (ip.bits !== 32) throw builtinError(name, 'IPv6 invalid: needs prefix length');
          // A bare IPv4 address takes its classful default mask, unmasked in the text, as in Go.
          const prefix = defaultPrefix(ip.v);
          net = { ip: { v: ip.v & mask(32, prefix), bits: 32 }, prefix };
          text = `${formatIP(ip)}/${prefix}`;
        } else {
          const n = parseCIDR(x);
          if (n === undefined) throw builtinError(name, `invalid CIDR address: ${x}`);
          net = n;
          text = `${formatIP(n.ip)}/${n.prefix}`;
        }
        fams[net.ip.bits].push({ first: net.ip.v, last: lastIP(net).v, text });
      }
      return SetValue.of([...mergeFamily(fams[32], 32), ...mergeFamily(fams[128], 128)]);
    },
  },
};
