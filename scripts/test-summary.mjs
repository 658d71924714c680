// Prints vitest's JSON results as the plain closing line `N passed, N failed, N skipped`.
import { readFileSync } from 'node:fs';

const file = process.argv[2] ?? 'dist/test-results.json';
let r;
try {
  r = JSON.parse(readFileSync(file, 'utf8'));
} catch (e) {
  console.log(`tests: no results in ${file} (${e.message})`);
  process.exit(1);
}
const skipped = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skipped} skipped`);
