import { existsSync, readFileSync, statSync } from 'node:fs';
import { cp, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { vector } from '@broker/cli/testing';
import { buildImage, buildLayer, pushImage, RegistryClient } from '@broker/image';
import { FakeRegistry } from '@broker/image/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ImageCliIo, imagePolicyMain, imagePullMain } from './cli.js';

const CI = vector('containers-image');
const SAMPLE = '192.168.64.2:5000/cosign-signed-single-sample';

function io(extra: Partial<ImageCliIo> = {}) {
  const out: string[] = [];
  const err: string[] = [];
  const progress: string[] = [];
  const value: ImageCliIo = {
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    env: {},
    progress: { write: (t: string) => progress.push(t), isTTY: false },
    ...extra,
  };
  return { io: value, out: () => out.join(''), err: () => err.join(''), progress: () => progress.join('') };
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'image-cli-'));
});

async function policyFile(policy: unknown): Promise<string> {
  const f = join(dir, `policy-${Math.random().toString(36).slice(2)}.json`);
  await writeFile(f, JSON.stringify(policy));
  return f;
}

describe('image-policy check with dir: images', () => {
  it('accepts the fixture signed by cosign.pub and prints the scope and verdicts', async () => {
    const policy = await policyFile({
      default: [{ type: 'reject' }],
      transports: {
        docker: {
          '192.168.64.2:5000': [
            {
              type: 'sigstoreSigned',
              keyPath: join(CI, 'cosign.pub'),
              signedIdentity: { type: 'matchRepository' },
            },
          ],
        },
      },
    });
    const t = io();
    const code = await imagePolicyMain(
      ['check', '--policy', policy, '--reference', SAMPLE, `dir:${join(CI, 'dir-img-cosign-valid')}`],
      t.io,
    );
    expect(code).toBe(0);
    expect(t.out()).toBe(
      [
        `image: docker://${SAMPLE}:latest`,
        'manifest: sha256:634a8f35b5f16dcf4aaa0822adc0b1964bb786fca12f6831de8ddc45e5986a00',
        'scope: transports.docker["192.168.64.2:5000"]',
        `requirement 1: sigstoreSigned (keyPath ${join(CI, 'cosign.pub')}; signedIdentity matchRepository): accepted (signature for ${SAMPLE})`,
        'decision: accepted',
        '',
      ].join('\n'),
    );
  });

  it('rejects with the wrong key (exit 1) and with the default reject', async () => {
    const policy = await policyFile({
      default: [{ type: 'reject' }],
      transports: {
        docker: {
          [SAMPLE]: [
            {
              type: 'sigstoreSigned',
              keyPath: join(CI, 'cosign2.pub'),
              signedIdentity: { type: 'matchRepository' },
            },
          ],
        },
      },
    });
    const t = io();
    expect(
      await imagePolicyMain(
        ['check', '--policy', policy, '--reference', SAMPLE, `dir:${join(CI, 'dir-img-cosign-valid')}`],
        t.io,
      ),
    ).toBe(1);
    expect(t.out()).toMatch(
      /requirement 1: sigstoreSigned .*: rejected: cryptographic signature verification failed/,
    );
    expect(t.out()).toMatch(/decision: rejected\n$/);
    const u = io();
    expect(
      await imagePolicyMain(
        [
          'check',
          '--policy',
          policy,
          '--reference',
          'other.example/x:y',
          `dir:${join(CI, 'dir-img-cosign-valid')}`,
        ],
        u.io,
      ),
    ).toBe(1);
    expect(u.out()).toMatch(
      /scope: default\nrequirement 1: reject: rejected: Running image docker:\/\/other.example\/x:y is rejected by policy.\n/,
    );
  });

  it('uses the dir transport scopes without --reference', async () => {
    const copy = join(dir, 'img');
    await cp(join(CI, 'dir-img-cosign-valid'), copy, { recursive: true });
    const policy = await policyFile({
      default: [{ type: 'reject' }],
      transports: { dir: { [dir]: [{ type: 'insecureAcceptAnything' }] } },
    });
    const t = io();
    expect(await imagePolicyMain(['check', '--policy', policy, `dir:${copy}`], t.io)).toBe(0);
    expect(t.out()).toContain(`scope: transports.dir[${JSON.stringify(dir)}]`);
  });

  it('resolves kbs:/// keys through the KBS reader, only when a signature needs them', async () => {
    const asked: string[] = [];
    const kbsKeyReader = async (path: string) => {
      asked.push(path);
      return readFileSync(join(CI, 'cosign.pub'));
    };
    const policy = await policyFile({
      default: [
        {
          type: 'sigstoreSigned',
          keyPath: 'kbs:///default/cosign-key/pub-key',
          signedIdentity: { type: 'matchRepository' },
        },
      ],
    });
    const t = io({ kbsKeyReader });
    expect(
      await imagePolicyMain(
        ['check', '--policy', policy, '--reference', SAMPLE, `dir:${join(CI, 'dir-img-cosign-valid')}`],
        t.io,
      ),
    ).toBe(0);
    expect(asked).toEqual(['kbs:///default/cosign-key/pub-key']);
    const noKbs = io();
    expect(
      await imagePolicyMain(
        ['check', '--policy', policy, '--reference', SAMPLE, `dir:${join(CI, 'dir-img-cosign-valid')}`],
        noKbs.io,
      ),
    ).toBe(1);
    expect(noKbs.out()).toContain('give --kbs-url');
  });

  it('usage errors exit 2, unreadable policies 1', async () => {
    for (const argv of [
      [],
      ['bogus'],
      ['check'],
      ['check', '--policy'],
      ['check', '--policy', 'p', 'nope:img'],
      ['check', '--nope'],
    ]) {
      const t = io();
      expect(await imagePolicyMain(argv, t.io), argv.join(' ')).toBe(2);
    }
    const bad = await policyFile({ default: [] });
    const t = io();
    expect(
      await imagePolicyMain(['check', '--policy', bad, `dir:${join(CI, 'dir-img-cosign-valid')}`], t.io),
    ).toBe(1);
    expect(t.err()).toContain('List of verification policy requirements must not be empty');
  });
});

describe('with a registry', () => {
  let registry: FakeRegistry;
  let keyPrefix: string;
  beforeAll(async () => {
    registry = await FakeRegistry.start({ auth: { kind: 'bearer' } });
    const client = new RegistryClient({ insecure: () => true });
    const img = buildImage({
      layers: [
        await buildLayer([
          { name: 'hello.txt', content: 'hello\n' },
          { name: 'bin/', type: 'directory' },
        ]),
      ],
    });
    await pushImage(client, { domain: registry.host, path: 'signed/app' }, 'v1', img);
    await pushImage(client, { domain: registry.host, path: 'unsigned/app' }, 'v1', img);
    client.close();
    keyPrefix = join(dir, 'cosign');
  });
  afterAll(async () => {
    await registry.close();
  });

  it('generate-key, sign, check and pull', async () => {
    const g = io();
    expect(await imagePolicyMain(['generate-key', keyPrefix], g.io)).toBe(0);
    expect(statSync(`${keyPrefix}.key`).mode & 0o777).toBe(0o600);
    const s = io();
    expect(
      await imagePolicyMain(
        [
          'sign',
          '--key',
          `${keyPrefix}.key`,
          '--insecure-registry',
          registry.host,
          `docker://${registry.host}/signed/app:v1`,
        ],
        s.io,
      ),
    ).toBe(0);
    expect(s.out()).toMatch(/^sha256:[0-9a-f]{64}\n$/);

    const policy = await policyFile({
      default: [{ type: 'reject' }],
      transports: {
        docker: {
          [`${registry.host}/signed`]: [
            {
              type: 'sigstoreSigned',
              keyPath: `${keyPrefix}.pub`,
              signedIdentity: { type: 'matchRepository' },
            },
          ],
        },
      },
    });
    const c = io();
    expect(
      await imagePolicyMain(
        ['check', '--policy', policy, '--plain-http', `docker://${registry.host}/signed/app:v1`],
        c.io,
      ),
    ).toBe(0);
    expect(c.out()).toContain(`scope: transports.docker["${registry.host}/signed"]`);

    const dest = join(dir, 'bundle');
    const p = io();
    expect(
      await imagePullMain(
        [
          '--policy',
          policy,
          '--insecure-registry',
          registry.host,
          `docker://${registry.host}/signed/app:v1`,
          dest,
        ],
        p.io,
      ),
    ).toBe(0);
    expect(p.out()).toBe(s.out());
    expect(readFileSync(join(dest, 'rootfs/hello.txt'), 'utf8')).toBe('hello\n');
    expect(p.progress()).toMatch(/Layer 1\/1 sha256:[0-9a-f]{12}: done/);

    const dest2 = join(dir, 'bundle2');
    const r = io();
    expect(
      await imagePullMain(
        ['--policy', policy, '--insecure-registry', registry.host, `${registry.host}/unsigned/app:v1`, dest2],
        r.io,
      ),
    ).toBe(1);
    expect(r.err()).toContain(
      `image-pull: Image policy rejected: Denied by policy: Policy \`reject\` rejects image ${registry.host}/unsigned/app:v1 (reason: Running image docker://${registry.host}/unsigned/app:v1 is rejected by policy.)\n`,
    );
    // Refused before anything is written: not even the bundle folder is made.
    expect(existsSync(dest2)).toBe(false);
  });

  it('image-pull usage errors', async () => {
    const t = io();
    expect(await imagePullMain(['only-one-arg'], t.io)).toBe(2);
    expect(await imagePullMain(['--platform', 'bad', 'a', 'b'], t.io)).toBe(2);
    const h = io();
    expect(await imagePullMain(['--help'], h.io)).toBe(0);
    expect(h.out()).toContain('Usage:');
  });
});
