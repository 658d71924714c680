// Unicode simple case folding orbits, as Go's regexp uses for (?i): every code point whose simple
// lower- or uppercase mapping relates it to another one is in the same orbit (k, K and the Kelvin
// sign K; s, S and the long s ſ; ß and ẞ; ...).

let orbits: Map<number, number[]> | undefined;
// Every code point with a non-trivial orbit, sorted.
let cased: Int32Array | undefined;

// The last code point with a case mapping in current Unicode is below this bound.
const MAX_CASED = 0x1e944;

function single(s: string): number | undefined {
  const cp = s.codePointAt(0);
  if (cp === undefined) return undefined;
  return s.length === (cp > 0xffff ? 2 : 1) ? cp : undefined;
}

function build(): Map<number, number[]> {
  const parent = new Map<number, number>();
  const find = (x: number): number => {
    let r = x;
    while (parent.has(r) && parent.get(r) !== r) r = parent.get(r)!;
    return r;
  };
  const union = (a: number, b: number) => {
    const ra = find(a);
    const rb = find(b);
    if (!parent.has(ra)) parent.set(ra, ra);
    if (!parent.has(rb)) parent.set(rb, rb);
    if (ra !== rb) parent.set(ra, rb);
  };
  for (let c = 0; c < MAX_CASED; c++) {
    if (c >= 0xd800 && c <= 0xdfff) continue;
    const s = String.fromCodePoint(c);
    const lo = single(s.toLowerCase());
    const up = single(s.toUpperCase());
    if (lo !== undefined && lo !== c) union(c, lo);
    if (up !== undefined && up !== c) union(c, up);
  }
  const groups = new Map<number, number[]>();
  for (const c of parent.keys()) {
    const r = find(c);
    let g = groups.get(r);
    if (g === undefined) {
      g = [];
      groups.set(r, g);
    }
    g.push(c);
  }
  const out = new Map<number, number[]>();
  for (const g of groups.values()) {
    g.sort((a, b) => a - b);
    for (const c of g) out.set(c, g);
  }
  return out;
}

const ASCII_EXTRA: Record<number, number[]> = {
  75: [0x4b, 0x6b, 0x212a],
  107: [0x4b, 0x6b, 0x212a],
  83: [0x53, 0x73, 0x17f],
  115: [0x53, 0x73, 0x17f],
};

/** All code points equal to c under simple case folding, c included. */
export function foldOrbit(c: number): readonly number[] {
  if (c < 0x80) {
    const extra = ASCII_EXTRA[c];
    if (extra !== undefined) return extra;
    if (c >= 0x41 && c <= 0x5a) return [c, c + 32];
    if (c >= 0x61 && c <= 0x7a) return [c - 32, c];
    return [c];
  }
  orbits ??= build();
  return orbits.get(c) ?? [c];
}

function casedCodePoints(): Int32Array {
  orbits ??= build();
  cased ??= Int32Array.from([...orbits.keys()].sort((a, b) => a - b));
  return cased;
}

/** Adds the fold orbits of every code point in [lo, hi] to ranges (pairs). */
export function addFoldedRange(out: number[], lo: number, hi: number): void {
  out.push(lo, hi);
  if (hi < 0x80) {
    for (let c = lo; c <= hi; c++) for (const o of foldOrbit(c)) if (o < lo || o > hi) out.push(o, o);
    return;
  }
  // Only cased code points can add anything: visit those in the range, not the whole range.
  const all = casedCodePoints();
  let i = 0;
  let j = all.length;
  while (i < j) {
    const mid = (i + j) >> 1;
    if (all[mid]! < lo) i = mid + 1;
    else j = mid;
  }
  for (; i < all.length && all[i]! <= hi; i++) {
    for (const o of foldOrbit(all[i]!)) if (o < lo || o > hi) out.push(o, o);
  }
}
