// scripts/check-paths.mjs (run by `npm run lint`): clean on this repository, and it names each planted
// reference to a place outside a repository and each vector without a true provenance row.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const SCRIPT = join(import.meta.dirname, '..', 'scripts', 'check-paths.mjs');
const scratch = mkdtempSync(join(tmpdir(), 'check-paths-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function check(root: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [SCRIPT, root], { encoding: 'utf8' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

let trees = 0;
/** A repository-shaped tree in the scratch folder holding the given files. */
function tree(files: Record<string, string | Buffer>): string {
  const root = join(scratch, `repo-${trees++}`);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

const sha16 = (b: string) => createHash('sha256').update(b).digest('hex').slice(0, 16);
const row = (path: string, content: string) =>
  `| \`${path}\` | \`owner/repo\` | \`tests/${path}\` | MIT | \`${sha16(content)}\` |\n`;

describe('check-paths', () => {
  it('passes on this repository', () => {
    const r = check(join(import.meta.dirname, '..'));
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('passes a clean tree, hostile-input traversal strings included', () => {
    const r = check(
      tree({
        'packages/a/src/a.test.ts': [
          "const v = vector('trustee/x.json');",
          "const up = '../../../../../../..';",
          "const evil = '/cdh/resource/../../etc/passwd';",
          "const sibling = new URL('../../b/manifests/x.json', import.meta.url);",
          "const tmp = '/tmp/root/x';",
        ].join('\n'),
        'packages/b/manifests/x.json': '{}',
      }),
    );
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('names every reference to a place outside the repository', () => {
    const r = check(
      tree({
        'packages/a/src/abs.test.ts': "const F = '/work/shared/fixtures/trustee';\n",
        'packages/a/src/rel.test.ts':
          "\nconst F = join(import.meta.dirname, '../../../../shared/fixtures');\n",
        'packages/a/src/climb.test.ts':
          "const F = new URL('../../../../elsewhere/x.json', import.meta.url);\n",
        'README.md': 'Vectors live in `shared/fixtures/trustee`.\n',
        'scripts/run.sh': 'cd /home/someone/broker\n',
        // Generated and installed trees are not the repository's text.
        'node_modules/x/index.js': "'/work/x'\n",
        'dist/bin/x.mjs': "'/work/x'\n",
      }),
    );
    expect(r.status).toBe(1);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toEqual([
      expect.stringMatching(/^check-paths: README\.md:1: the workshop fixtures/),
      expect.stringMatching(
        /^check-paths: packages\/a\/src\/abs\.test\.ts:1: an absolute path into the workshop/,
      ),
      expect.stringMatching(/^check-paths: packages\/a\/src\/abs\.test\.ts:1: the workshop fixtures/),
      expect.stringMatching(
        /^check-paths: packages\/a\/src\/climb\.test\.ts:1: relative path \.\.\/\.\.\/\.\.\/\.\.\/elsewhere\/x\.json leaves/,
      ),
      expect.stringMatching(/^check-paths: packages\/a\/src\/rel\.test\.ts:2: the workshop fixtures/),
      expect.stringMatching(
        /^check-paths: packages\/a\/src\/rel\.test\.ts:2: relative path .* leaves the repository/,
      ),
      expect.stringMatching(/^check-paths: scripts\/run\.sh:1: an absolute path into a home folder/),
      'check-paths: 7 problem(s); the repository must not depend on anything outside it',
    ]);
  });

  it('holds every vector to its provenance row', () => {
    const good = 'good\n';
    const r = check(
      tree({
        'test/vectors/PROVENANCE.md':
          '| File | Repository | Upstream path | License | sha256 |\n|---|---|---|---|---|\n' +
          row('up/good.json', good) +
          row('up/changed.json', 'as upstream\n') +
          row('up/gone.json', 'x'),
        'test/vectors/up/good.json': good,
        'test/vectors/up/changed.json': 'edited\n',
        'test/vectors/up/unlisted.json': '{}',
        // Upstream data is not held to the path rules (its own examples may name any path).
        'test/vectors/up/LICENSE': 'see /home/upstream\n',
      }),
    );
    expect(r.status).toBe(1);
    const problems = r.stderr.trim().split('\n');
    expect(problems).toHaveLength(5);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /test\/vectors\/up\/changed\.json: sha256 [0-9a-f]{16}… differs from PROVENANCE\.md/,
        ),
        'check-paths: test/vectors/up/unlisted.json: no row in test/vectors/PROVENANCE.md',
        'check-paths: test/vectors/up/LICENSE: no row in test/vectors/PROVENANCE.md',
        'check-paths: test/vectors/PROVENANCE.md: names up/gone.json, which is missing',
      ]),
    );
  });

  it('refuses vectors without a PROVENANCE.md', () => {
    const r = check(tree({ 'test/vectors/up/x.json': '{}' }));
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      'check-paths: test/vectors: no PROVENANCE.md naming where its files come from\n',
    );
  });
});
