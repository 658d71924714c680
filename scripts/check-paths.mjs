// Lint step: the repository stands on its own.
//   1. No file refers to a place outside the repository: the workshop folders (`/work`, `../shared`,
//      `shared/fixtures`), home folders, or a relative path that climbs above the repository root.
//   2. Every upstream vector under test/vectors has a row in test/vectors/PROVENANCE.md with its
//      sha256, and every row names a file that is there.
// Usage: node scripts/check-paths.mjs [ROOT]   (default: this repository). Exit 0 clean, 1 violations.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const root = resolve(process.argv[2] ?? join(import.meta.dirname, '..'));
// Generated or installed trees (as in .gitignore), and the upstream data (checked against its table).
const SKIP_DIRS = new Set(['.git', 'node_modules', 'dist', '.bench-out']);
const VECTORS = join('test', 'vectors');
const MAX_BYTES = 2 * 1024 * 1024;
// This checker and its test spell out the patterns they look for.
const SELF = new Set([join('scripts', 'check-paths.mjs'), join('test', 'check-paths.test.ts')]);

const FORBIDDEN = [
  { re: /(?<![\w.-])\/work(?=[/'"`\s)]|$)/m, why: 'an absolute path into the workshop (/work)' },
  {
    re: /\.\.\/shared\b|(?<![\w-])shared\/fixtures\b/,
    why: 'the workshop fixtures (../shared); use test/vectors',
  },
  { re: /(?<![\w.-])\/(?:home|Users)\/[\w.-]/, why: 'an absolute path into a home folder' },
  { re: /(?<![\w.~-])\/root\/[\w.-]/, why: "an absolute path into root's home folder" },
];

const entries = (dir) =>
  readdirSync(dir, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

function* walk(dir) {
  for (const entry of entries(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!SKIP_DIRS.has(entry.name) && relative(root, path) !== VECTORS) yield* walk(path);
    } else if (entry.isFile()) {
      yield path;
    }
  }
}

function textOf(path) {
  if (statSync(path).size > MAX_BYTES) return undefined;
  const bytes = readFileSync(path);
  return bytes.includes(0) ? undefined : bytes.toString('utf8');
}

/**
 * Quoted relative paths that start with `../` and name something (`'../../../shared/x'`), resolved from the
 * file's own folder, that land above the repository root. A bare run of `..` (a hostile-input test's
 * traversal attempt) names nothing and is not a reference.
 */
function escapingRelativePaths(path, text) {
  const found = [];
  for (const m of text.matchAll(/(?<=['"`(])((?:\.\.\/)+[\w-][\w./-]*)/g)) {
    const target = resolve(dirname(path), m[1]);
    if (relative(root, target).startsWith(`..${sep}`)) found.push(m[1]);
  }
  return found;
}

const problems = [];
for (const path of walk(root)) {
  const rel = relative(root, path);
  const text = SELF.has(rel) ? undefined : textOf(path);
  if (text === undefined) continue;
  text.split('\n').forEach((line, i) => {
    for (const { re, why } of FORBIDDEN) {
      if (re.test(line)) problems.push(`${rel}:${i + 1}: ${why}: ${line.trim().slice(0, 120)}`);
    }
    for (const p of escapingRelativePaths(path, line)) {
      problems.push(`${rel}:${i + 1}: relative path ${p} leaves the repository`);
    }
  });
}

// Provenance of the vectors: `| \`path\` | repository | upstream path | license | \`sha256 prefix\` |`.
const vectorsDir = join(root, VECTORS);
const table = existsSync(join(vectorsDir, 'PROVENANCE.md'))
  ? readFileSync(join(vectorsDir, 'PROVENANCE.md'), 'utf8')
  : undefined;
if (table === undefined && existsSync(vectorsDir)) {
  problems.push(`${VECTORS}: no PROVENANCE.md naming where its files come from`);
} else if (table !== undefined) {
  const rows = new Map();
  for (const m of table.matchAll(/^\| `([^`]+)` \|.*\| `([0-9a-f]{16})` \|$/gm)) rows.set(m[1], m[2]);
  const present = new Set();
  for (const path of walkAll(vectorsDir)) {
    const rel = relative(vectorsDir, path).split(sep).join('/');
    if (rel === 'PROVENANCE.md') continue;
    present.add(rel);
    const digest = createHash('sha256').update(readFileSync(path)).digest('hex').slice(0, 16);
    if (!rows.has(rel)) problems.push(`${VECTORS}/${rel}: no row in ${VECTORS}/PROVENANCE.md`);
    else if (rows.get(rel) !== digest) {
      problems.push(`${VECTORS}/${rel}: sha256 ${digest}… differs from PROVENANCE.md (${rows.get(rel)}…)`);
    }
  }
  for (const rel of rows.keys()) {
    if (!present.has(rel)) problems.push(`${VECTORS}/PROVENANCE.md: names ${rel}, which is missing`);
  }
}

function* walkAll(dir) {
  for (const entry of entries(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* walkAll(path);
    else yield path;
  }
}

if (problems.length > 0) {
  for (const p of problems) console.error(`check-paths: ${p}`);
  console.error(
    `check-paths: ${problems.length} problem(s); the repository must not depend on anything outside it`,
  );
  process.exit(1);
}
console.log(`check-paths: ok (${relative(process.cwd(), root) || '.'})`);
