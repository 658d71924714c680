/**
 * Debian's skopeo 1.9 (containers/image 5.23) as an oracle for policy parsing
 * and scope selection. Its sigstore verification is patched out, so only
 * `reject` / `insecureAcceptAnything` verdicts and parse errors are compared.
 *
 * Scope probing: each reference is remapped by a registries.conf entry to one
 * image on a local docker-registry, so skopeo evaluates the policy for the
 * logical reference (any host name) while fetching from loopback. Two
 * policies per case: only the expected scope accepts (skopeo must copy), and
 * only the expected scope rejects (skopeo must refuse).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildImage, buildLayer, pushImage, writeDirImage } from './build.js';
import { parsePolicy, requirementsForImage } from './policy.js';
import {
  dockerImageName,
  parseImageReference,
  policyIdentity,
  policyNamespaces,
  referenceName,
} from './reference.js';
import { RegistryClient } from './registry/client.js';
import { type RunningRegistry, startDockerRegistry } from './registry/local-registry.js';
import { runTool } from './testing/tools.js';

const FIXTURES = vector('guest-components/image-policy');

let registry: RunningRegistry;
let work: string;
let digest: string;
let dirImage: string;
let n = 0;

beforeAll(async () => {
  registry = await startDockerRegistry();
  work = await mkdtemp(join(tmpdir(), 'policy-oracle-'));
  const client = new RegistryClient({ insecure: () => true });
  const image = buildImage({ layers: [await buildLayer([{ name: 'probe', content: 'probe\n' }])] });
  for (const tag of ['t', 'tag2', 'latest'])
    digest = await pushImage(client, { domain: registry.host, path: 'probe/img' }, tag, image);
  client.close();
  dirImage = join(work, 'dir-image');
  await writeDirImage(dirImage, image);
}, 60_000);

afterAll(async () => {
  await registry?.stop();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

async function skopeoCopy(policy: unknown, source: string, registriesConf?: string) {
  const id = n++;
  const policyFile = join(work, `policy-${id}.json`);
  await writeFile(policyFile, typeof policy === 'string' ? policy : JSON.stringify(policy));
  const args = ['--policy', policyFile];
  if (registriesConf !== undefined) {
    const conf = join(work, `registries-${id}.conf`);
    await writeFile(conf, registriesConf);
    args.push('--registries-conf', conf);
  }
  args.push('copy', '--src-tls-verify=false', source, `dir:${join(work, `out-${id}`)}`);
  return { ...(await runTool('skopeo', args, { HOME: work })), policyFile };
}

describe('scope selection agrees with skopeo', () => {
  const D = () => digest;
  const scopes = () => [
    'deep.com/n1/n2/n3/repo:tag2',
    'deep.com/n1/n2/n3/repo',
    'deep.com/n1/n2/n3',
    'deep.com/n1/n2',
    'deep.com/n1',
    'deep.com',
    '*.very.deep.com',
    '*.deep.com',
    '*.com',
    '',
    'unmatched',
    'docker.io/library/busybox',
    'docker.io',
    'localhost:5000',
    'localhost',
    'example.com:8443/ns',
    '*.example.com',
    `registry.example.com/app@${D()}`,
    'registry.example.com',
  ];
  const cases: [string, string | null, boolean][] = [
    // reference, expected scope (null: default), whether the "" scope is in the policy
    ['deep.com/n1/n2/n3/repo:tag2', 'deep.com/n1/n2/n3/repo:tag2', true],
    ['deep.com/n1/n2/n3/repo:t', 'deep.com/n1/n2/n3/repo', true],
    ['deep.com/n1/n2/n3/other:t', 'deep.com/n1/n2/n3', true],
    ['deep.com/n1/x/y:t', 'deep.com/n1', true],
    ['deep.com/x:t', 'deep.com', true],
    ['very.deep.com/a:t', '*.deep.com', true],
    ['not.very.deep.com/a:t', '*.very.deep.com', true],
    ['deep.com:5000/a:t', '*.com', true],
    ['other.org/a:t', '', true],
    ['other.org/a:t', null, false],
    ['busybox:t', 'docker.io/library/busybox', true],
    ['ns/x:t', 'docker.io', true],
    ['localhost:5000/a:t', 'localhost:5000', true],
    ['localhost/a:t', 'localhost', true],
    ['example.com:8443/ns/r:t', 'example.com:8443/ns', true],
    ['a.example.com/r:t', '*.example.com', true],
    ['registry.example.com/app@DIGEST', 'registry.example.com/app@DIGEST', true],
    ['registry.example.com/app:t', 'registry.example.com', true],
  ];

  for (const [refTemplate, expectedTemplate, withDefaultScope] of cases) {
    it(`${refTemplate} → ${expectedTemplate === null ? 'default' : JSON.stringify(expectedTemplate)}`, async () => {
      const refText = refTemplate.replace('DIGEST', D());
      const expected = expectedTemplate?.replace('DIGEST', D()) ?? null;
      const ref = parseImageReference(refText);
      const all = scopes().filter((s) => withDefaultScope || s !== '');
      const build = (chosen: string, other: string) =>
        ({
          default: [{ type: expected === null ? chosen : other }],
          transports: {
            docker: Object.fromEntries(all.map((s) => [s, [{ type: s === expected ? chosen : other }]])),
          },
        }) as const;

      // Our answer first.
      const ours = requirementsForImage(
        parsePolicy(JSON.stringify(build('insecureAcceptAnything', 'reject'))),
        'docker',
        policyIdentity(ref),
        policyNamespaces(ref),
      );
      expect(ours.scope).toBe(expected);

      const conf = `[[registry]]\nprefix = "${referenceName(ref)}"\nlocation = "${registry.host}/probe/img"\ninsecure = true\n`;
      const accept = await skopeoCopy(build('insecureAcceptAnything', 'reject'), `docker://${refText}`, conf);
      expect(accept.code, accept.stderr).toBe(0);
      const reject = await skopeoCopy(build('reject', 'insecureAcceptAnything'), `docker://${refText}`, conf);
      expect(reject.code).not.toBe(0);
      // The rejection names the image as our `reject` does.
      expect(reject.stderr).toContain(
        `Source image rejected: Running image ${dockerImageName(ref)} is rejected by policy.`,
      );
    });
  }
});

describe('policy parsing agrees with skopeo', () => {
  const read = (f: string) => readFileSync(join(FIXTURES, f), 'utf8');
  // [policy text, same message expected?] — messages are compared where containers/image 5.23 and HEAD agree.
  const cases: [string, boolean][] = [
    ['{"default":[]}', true],
    ['{"default":null}', true],
    ['{}', true],
    ['{"default":[{"type":"reject"}],"x":1}', true],
    ['{"default":[{"type":"reject"}],"default":[{"type":"reject"}]}', true],
    ['{"default":[{"type":"nope"}]}', true],
    ['{"default":[{"type":"insecureAcceptAnything","x":1}]}', true],
    ['{"default":[{"type":"reject"}],"transports":{"dir":{"rel":[{"type":"reject"}]}}}', true],
    ['{"default":[{"type":"reject"}],"transports":{"dir":{"/a/../b":[{"type":"reject"}]}}}', true],
    [
      '{"default":[{"type":"sigstoreSigned","keyPath":"/k","signedIdentity":{"type":"remapIdentity","prefix":"repo_x","signedPrefix":"x.com"}}]}',
      true,
    ],
    ['{"default":[{"type":"sigstoreSigned","keyPath":"/k","signedIdentity":null}]}', true],
    // 5.23 prints the reference unquoted, HEAD quotes it.
    [
      '{"default":[{"type":"sigstoreSigned","keyPath":"/k","signedIdentity":{"type":"exactReference","dockerReference":"busybox"}}]}',
      false,
    ],
    ['{"default":[{"type":"signedBy","keyType":"bogus","keyPath":"/k"}]}', true],
    ['{"default":[{"type":"reject"}]} x', true],
    ['{"default":[{"type":"reject"}]', true],
    ['{"default":[{"type":"sigstoreSigned"}]}', false],
    ['{"default":[{"type":"sigstoreSigned","keyPath":"/a","keyData":"YQ=="}]}', false],
    ['{"default":[{"type":"sigstoreSigned","keyPath":"/k"}]}', false],
    [
      '{"default":[{"type":"sigstoreSigned","keyData":"YQ==","signedIdentity":{"type":"matchRepository"}}]}',
      false,
    ],
    ['{"default":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"/k"}]}', false],
    ['{"default":[{"type":"signedBaseLayer","baseLayerIdentity":{"type":"matchRepository"}}]}', false],
    [
      '{"default":[{"type":"reject"}],"transports":{"docker":{"not a ref at all":[{"type":"reject"}]},"atomic":{"x":[{"type":"reject"}]}}}',
      false,
    ],
    [read('policy.json'), false],
    [read('sample_kbc-policy.json'), false],
  ];

  for (const [text, sameMessage] of cases) {
    it(text.length > 100 ? `${text.slice(0, 100)}…` : text, async () => {
      let ours: string | undefined;
      try {
        parsePolicy(text);
      } catch (e) {
        ours = (e as Error).message;
      }
      const r = await skopeoCopy(text, `dir:${dirImage}`);
      const marker = `Error loading trust policy: invalid policy in \\"${r.policyFile}\\": `;
      const at = r.stderr.indexOf(marker);
      const theirs =
        at < 0
          ? undefined
          : r.stderr
              .slice(at + marker.length)
              .replace(/"\n?$/, '')
              .replace(/\\"/g, '"');
      expect(ours === undefined, `ours: ${ours} / skopeo: ${r.stderr}`).toBe(theirs === undefined);
      if (sameMessage && theirs !== undefined) expect(ours).toBe(theirs);
    });
  }

  it('signedBy and signedBaseLayer give containers/image verdicts at evaluation', async () => {
    const r = await skopeoCopy(
      '{"default":[{"type":"signedBaseLayer","baseLayerIdentity":{"type":"matchRepository"}}]}',
      `dir:${dirImage}`,
    );
    expect(r.stderr).toContain('Source image rejected: signedBaseLayer not implemented yet!');
  });
});
