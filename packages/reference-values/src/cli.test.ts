import { createHash, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryStorage } from '@broker/kv-storage';
import { createRvps } from '@broker/rvps-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { nodeReferenceValuesIo, referenceValuesMain } from './cli.js';
import { startTestRegistry, type TestRegistry } from './testing/registry.js';
import { makeRekorBundle } from './testing/rekor.js';

const dir = mkdtempSync(join(tmpdir(), 'refvals-'));
const INITDATA =
  'algorithm = "sha256"\nversion = "0.1.0"\n\n[data]\n"policy.rego" = \'\'\'\npackage agent_policy\n\'\'\'\n';
const initdata = join(dir, 'initdata.toml');
const mockSample = new URL('../../mock-tee/manifests/podvm-sample.json', import.meta.url).pathname;
const TAG = 'mock-podvm:0.1.0';
const pcr8 = createHash('sha256')
  .update(Buffer.alloc(32))
  .update(createHash('sha256').update(INITDATA).digest())
  .digest('hex');
const hex = (s: string) => createHash('sha256').update(s).digest('hex');
const caaManifest = Buffer.from(
  JSON.stringify({
    measurements: { sha256: { pcr03: hex('3'), pcr09: hex('9'), pcr11: hex('11'), pcr12: hex('12') } },
  }),
);

const signer = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const stranger = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rekor = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const signerPem = join(dir, 'cosign.pub');
const strangerPem = join(dir, 'stranger.pub');
const rekorPem = join(dir, 'rekor.pub');

let registry: TestRegistry;
let keyServer: Server;
let keyBase: string;

beforeAll(async () => {
  writeFileSync(initdata, INITDATA);
  writeFileSync(signerPem, signer.publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(strangerPem, stranger.publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(rekorPem, rekor.publicKey.export({ type: 'spki', format: 'pem' }));
  registry = await startTestRegistry();
  keyServer = createServer((req, res) => {
    if (req.url === '/api/v1/log/publicKey' || req.url === '/rekor.pub') {
      res.writeHead(200, { 'content-type': 'application/x-pem-file' }).end(readFileSync(rekorPem));
    } else res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => keyServer.listen(0, '127.0.0.1', resolve));
  keyBase = `http://127.0.0.1:${(keyServer.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await registry.close();
  await new Promise<void>((resolve) => keyServer.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

async function run(...argv: string[]) {
  return runWith({}, ...argv);
}

async function runWith(extra: Partial<typeof nodeReferenceValuesIo>, ...argv: string[]) {
  let out = '';
  let err = '';
  const code = await referenceValuesMain(argv, {
    ...nodeReferenceValuesIo,
    ...extra,
    out: (s) => {
      out += s;
    },
    err: (s) => {
      err += s;
    },
  });
  return { code, out, err };
}

const base = ['--platform', 'azure', '--tee', 'az-snp-vtpm', '--initdata', initdata];

function provenance(messageJson: string): Record<string, string[]> {
  const m = JSON.parse(messageJson) as { version: string; type: string; payload: string };
  expect(m.version).toBe('0.1.0');
  expect(m.type).toBe('sample');
  return JSON.parse(Buffer.from(m.payload, 'base64').toString());
}

/** The `provenance` member of a written message. */
function origin(messageJson: string): unknown {
  return (JSON.parse(messageJson) as { provenance?: unknown }).provenance;
}

/** What our RVPS keeps for `name` after registering the message as written. */
async function kept(messageJson: string, name: string) {
  const rvps = createRvps(new MemoryStorage());
  await rvps.register(messageJson.trim());
  return rvps.get(name);
}

describe('reference-values with a manifest file', () => {
  it('prints the ConfigMap with the mock sample PCRs and PCR8', async () => {
    const r = await run(
      ...base,
      '--measurements',
      mockSample,
      '--image-tag',
      '0.1.0',
      '--name',
      'broker',
      '--namespace',
      'kbs',
    );
    expect(r.err).toBe('');
    expect(r.code).toBe(0);
    const cm = parse(r.out);
    expect(cm.metadata.name).toBe('broker-rvps-reference-values');
    expect(cm.metadata.annotations['broker.confidentialcontainers.org/pod-vm-image-tag']).toBe('0.1.0');
    expect(cm.metadata.annotations['broker.confidentialcontainers.org/initdata-sha256']).toBe(
      createHash('sha256').update(INITDATA).digest('hex'),
    );
    const [message] = JSON.parse(cm.data['reference-values.json']);
    const values = provenance(JSON.stringify(message));
    expect(Object.keys(values)).toEqual(['snp_pcr03', 'snp_pcr08', 'snp_pcr09', 'snp_pcr11', 'snp_pcr12']);
    expect(values.snp_pcr08).toEqual([pcr8]);
    const sample = JSON.parse(readFileSync(mockSample, 'utf8')) as { pcrs: Record<string, string[]> };
    let pcr3 = Buffer.alloc(32);
    for (const d of sample.pcrs['3'] ?? [])
      pcr3 = createHash('sha256').update(pcr3).update(Buffer.from(d, 'hex')).digest();
    expect(values.snp_pcr03).toEqual([pcr3.toString('hex')]);
  });

  it('prints the RVPS message, with tdx names for az-tdx-vtpm', async () => {
    const r = await run(
      '--platform',
      'azure',
      '--tee',
      'az-tdx-vtpm',
      '--initdata',
      initdata,
      '--measurements',
      mockSample,
      '--image-tag',
      TAG,
      '--format',
      'rvps-message',
    );
    expect(r.code).toBe(0);
    expect(Object.keys(provenance(r.out))).toEqual([
      'tdx_pcr03',
      'tdx_pcr08',
      'tdx_pcr09',
      'tdx_pcr11',
      'tdx_pcr12',
    ]);
  });

  it('writes both files to --output-dir', async () => {
    const out = join(dir, 'both');
    const r = await run(
      ...base,
      '--measurements',
      mockSample,
      '--image-tag',
      TAG,
      '--format',
      'both',
      '--output-dir',
      out,
      '--name',
      'cfg',
      '--namespace',
      'ns',
    );
    expect(r.code).toBe(0);
    const message = readFileSync(join(out, 'rvps-message.json'), 'utf8');
    const cm = parse(readFileSync(join(out, 'cfg-rvps-reference-values.yaml'), 'utf8'));
    expect(JSON.parse(cm.data['reference-values.json'])).toEqual([JSON.parse(message)]);
  });

  it('gives the message a provenance (image tag, TEE, initdata digest) that the RVPS keeps with each value', async () => {
    const r = await run(
      ...base,
      '--measurements',
      mockSample,
      '--image-tag',
      TAG,
      '--format',
      'rvps-message',
    );
    expect(r.code).toBe(0);
    const expected = {
      image_tag: TAG,
      tee: 'az-snp-vtpm',
      initdata_digest: createHash('sha256').update(INITDATA).digest('hex'),
      initdata_algorithm: 'sha256',
    };
    expect(origin(r.out)).toEqual(expected);
    const stored = await kept(r.out, 'snp_pcr08');
    expect(stored?.value).toEqual([pcr8]);
    expect(stored?.provenance).toEqual(expected);
    // The ConfigMap's message carries the same, as the KBS registers it from the mounted file.
    const cm = await run(
      ...base,
      '--measurements',
      mockSample,
      '--image-tag',
      TAG,
      '--name',
      'b',
      '--namespace',
      'n',
    );
    const [message] = JSON.parse(parse(cm.out).data['reference-values.json']);
    expect(message.provenance).toEqual(expected);
  });

  it('changes PCR8, and only PCR8, when the initdata changes', async () => {
    const other = join(dir, 'other.toml');
    writeFileSync(other, INITDATA.replace('agent_policy', 'agent_policy\n'));
    const a = provenance(
      (await run(...base, '--measurements', mockSample, '--image-tag', TAG, '--format', 'rvps-message')).out,
    );
    const b = provenance(
      (
        await run(
          '--platform',
          'azure',
          '--tee',
          'az-snp-vtpm',
          '--initdata',
          other,
          '--measurements',
          mockSample,
          '--image-tag',
          TAG,
          '--format',
          'rvps-message',
        )
      ).out,
    );
    expect(b.snp_pcr08).not.toEqual(a.snp_pcr08);
    expect({ ...b, snp_pcr08: a.snp_pcr08 }).toEqual(a);
  });

  it('refuses another image tag and a manifest that lacks a PCR (exit 1)', async () => {
    const wrongTag = await run(
      ...base,
      '--measurements',
      mockSample,
      '--image-tag',
      '0.2.0',
      '--format',
      'rvps-message',
    );
    expect(wrongTag.code).toBe(1);
    expect(wrongTag.err).toMatch(/describes image "mock-podvm:0.1.0", not --image-tag "0.2.0"/);
    const partial = join(dir, 'partial.json');
    writeFileSync(partial, JSON.stringify({ image_tag: '1', pcrs: { '3': [hex('x')], '9': [], '11': [] } }));
    const missing = await run(
      ...base,
      '--measurements',
      partial,
      '--image-tag',
      '1',
      '--format',
      'rvps-message',
    );
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/no value for PCR 12/);
    expect(missing.out).toBe('');
  });

  it('refuses a CAA manifest file without a tag, which cannot prove the image', async () => {
    const caa = join(dir, 'caa.json');
    writeFileSync(caa, caaManifest);
    const r = await run(...base, '--measurements', caa, '--image-tag', '1.0', '--format', 'rvps-message');
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/names no image tag/);
  });

  it('refuses registry and Rekor flags with a local file, rather than ignoring them', async () => {
    for (const extra of [
      ['--rekor-url', 'https://rekor.sigstore.dev'],
      ['--rekor-pub-key-url', 'https://example/rekor.pub'],
      ['--authfile', '/x'],
      ['--signature-key', signerPem],
    ]) {
      const r = await run(
        ...base,
        '--measurements',
        mockSample,
        '--image-tag',
        TAG,
        '--format',
        'rvps-message',
        ...extra,
      );
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/applies to an artifact pulled with --image/);
    }
  });

  it('answers usage errors with exit 2', async () => {
    const cases: [string[], RegExp][] = [
      [['--platform', 'azure', '--tee', 'az-snp-vtpm'], /--initdata is required/],
      [[...base, '--image-tag', TAG, '--format', 'rvps-message'], /exactly one of --measurements/],
      [[...base, '--measurements', mockSample, '--format', 'rvps-message'], /--image-tag is required/],
      [[...base, '--measurements', mockSample, '--image-tag', TAG], /needs --name/],
      [
        [
          ...base,
          '--measurements',
          mockSample,
          '--image-tag',
          TAG,
          '--format',
          'both',
          '--name',
          'a',
          '--namespace',
          'b',
        ],
        /--output-dir/,
      ],
      [[...base, '--measurements', mockSample, '--image-tag', TAG, '--format', 'yaml'], /--format must be/],
      [['--platform', 'azure', '--tee', 'snp', '--initdata', initdata], /--platform baremetal/],
      [[...base, '--bogus'], /unknown option '--bogus'/],
      [[...base, 'extra'], /unexpected argument/],
    ];
    for (const [argv, msg] of cases) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toMatch(msg);
    }
  });
});

describe('reference-values with an OCI artifact', () => {
  const repo = 'measurements/azure/podvm';
  const image = () => `${registry.host}/${repo}`;
  const pull = (...extra: string[]) =>
    run(...base, '--plain-http', registry.host, '--format', 'rvps-message', ...extra);

  it('pulls a signed CAA-form artifact by tag and takes the tag from it', async () => {
    const digest = registry.artifact(repo, '1.11.1', caaManifest);
    registry.sign(repo, digest, signer.privateKey, image());
    const r = await pull('--image', `${image()}:1.11.1`, '--signature-key', signerPem);
    expect(r.err).toMatch(/cosign signature verified/);
    expect(r.code).toBe(0);
    const values = provenance(r.out);
    expect(values.snp_pcr11).toEqual([hex('11')]);
    expect(values.snp_pcr08).toEqual([pcr8]);
    // On a terminal, image-pull's progress lines; on anything else (a log, a pipe), none.
    for (const isTTY of [true, false]) {
      let drawn = '';
      const progress = {
        isTTY,
        columns: 100,
        write: (t: string) => {
          drawn += t;
        },
      };
      const shown = await runWith(
        { progress },
        ...base,
        '--plain-http',
        registry.host,
        '--format',
        'rvps-message',
        ...['--image', `${image()}:1.11.1`, '--signature-key', signerPem],
      );
      expect(shown.code).toBe(0);
      if (isTTY) {
        expect(drawn).toContain(`Pulling ${image()}:1.11.1 (manifest ${digest.slice(0, 19)})\n`);
        expect(drawn).toMatch(
          /\r\x1b\[KLayer 1\/1 sha256:[0-9a-f]{12} \[=+\] [0-9.]+ K?i?B \/ [0-9.]+ K?i?B\n$/,
        );
      } else {
        expect(drawn).toBe('');
      }
    }
    // The same with the tag given separately.
    const again = await pull('--image', image(), '--image-tag', '1.11.1', '--signature-key', signerPem);
    expect(again.out).toBe(r.out);
    // The provenance names the image measured: its reference, the manifest digest pulled, the tag.
    const expected = {
      image_tag: '1.11.1',
      image: `${image()}:1.11.1`,
      image_digest: digest,
      tee: 'az-snp-vtpm',
      initdata_digest: createHash('sha256').update(INITDATA).digest('hex'),
      initdata_algorithm: 'sha256',
    };
    expect(origin(r.out)).toEqual(expected);
    expect((await kept(r.out, 'snp_pcr11'))?.provenance).toEqual(expected);
  });

  it('refuses an unsigned artifact and a signature by another key', async () => {
    registry.artifact(repo, 'unsigned', caaManifest);
    const unsigned = await pull('--image', `${image()}:unsigned`, '--signature-key', signerPem);
    expect(unsigned.code).toBe(1);
    expect(unsigned.err).toMatch(/no cosign signature/);

    const d2 = registry.artifact(
      repo,
      'stranger',
      Buffer.from(JSON.stringify({ image_tag: 'stranger', pcrs: { '3': [], '9': [], '11': [], '12': [] } })),
    );
    registry.sign(repo, d2, stranger.privateKey, image());
    const wrongKey = await pull('--image', `${image()}:stranger`, '--signature-key', signerPem);
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.err).toMatch(/no signature of sha256:[0-9a-f]{64} is acceptable/);
  });

  it('refuses a signature whose payload names another manifest digest', async () => {
    const victim = registry.artifact(repo, 'victim', caaManifest);
    const other = registry.artifact(repo, 'other', caaManifest);
    // A genuine signature of `other`, stored where `victim`'s signatures are looked up.
    registry.sign(repo, victim, signer.privateKey, image(), undefined, other);
    const r = await pull('--image', `${image()}:victim`, '--signature-key', signerPem);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(new RegExp(`signature is for ${other}, not ${victim}`));
  });

  it('refuses a signature for another repository', async () => {
    const d = registry.artifact(repo, 'elsewhere', caaManifest);
    registry.sign(repo, d, signer.privateKey, `${registry.host}/some/other`);
    const r = await pull('--image', `${image()}:elsewhere`, '--signature-key', signerPem);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/signature is for .*some\/other/);
  });

  it('accepts --allow-unsigned and says the signature was not checked', async () => {
    registry.artifact(repo, 'local', caaManifest);
    const r = await pull('--image', `${image()}:local`, '--allow-unsigned');
    expect(r.code).toBe(0);
    expect(r.err).toMatch(/signature NOT checked/);
    const both = await pull('--image', `${image()}:local`, '--allow-unsigned', '--signature-key', signerPem);
    expect(both.code).toBe(2);
    const neither = await pull('--image', `${image()}:local`);
    expect(neither.code).toBe(2);
    expect(neither.err).toMatch(/needs --signature-key/);
  });

  it('requires a valid Rekor SET when a Rekor key is given (by URL or from the log)', async () => {
    const d = registry.artifact(repo, 'logged', caaManifest);
    registry.sign(repo, d, signer.privateKey, image(), (payload, b64) => ({
      'dev.sigstore.cosign/bundle': makeRekorBundle(
        rekor.privateKey,
        rekor.publicKey,
        signer.publicKey,
        b64,
        payload,
      ),
    }));
    for (const flags of [
      ['--rekor-pub-key-url', `${keyBase}/rekor.pub`],
      ['--rekor-url', keyBase],
      ['--rekor-pub-key-url', `file://${rekorPem}`],
    ]) {
      const r = await pull('--image', `${image()}:logged`, '--signature-key', signerPem, ...flags);
      expect(r.err).toMatch(/Rekor SET verified, logged 2025-/);
      expect(r.code).toBe(0);
    }
    // Signed but never logged.
    const u = registry.artifact(repo, 'unlogged', caaManifest);
    registry.sign(repo, u, signer.privateKey, image());
    const unlogged = await pull(
      '--image',
      `${image()}:unlogged`,
      '--signature-key',
      signerPem,
      '--rekor-url',
      keyBase,
    );
    expect(unlogged.code).toBe(1);
    expect(unlogged.err).toMatch(/no Rekor bundle/);
    // Logged by another log.
    const f = registry.artifact(repo, 'forged', caaManifest);
    registry.sign(repo, f, signer.privateKey, image(), (payload, b64) => ({
      'dev.sigstore.cosign/bundle': makeRekorBundle(
        stranger.privateKey,
        stranger.publicKey,
        signer.publicKey,
        b64,
        payload,
      ),
    }));
    const forged = await pull(
      '--image',
      `${image()}:forged`,
      '--signature-key',
      signerPem,
      '--rekor-url',
      keyBase,
    );
    expect(forged.code).toBe(1);
    expect(forged.err).toMatch(/Rekor SET/);
    const badUrl = await pull(
      '--image',
      `${image()}:logged`,
      '--signature-key',
      signerPem,
      '--rekor-pub-key-url',
      `${keyBase}/missing`,
    );
    expect(badUrl.code).toBe(1);
    expect(badUrl.err).toMatch(/HTTP 404/);
  });

  it('refuses a tag that disagrees with --image-tag, a digest reference and an ambiguous artifact', async () => {
    const mismatch = await pull(
      '--image',
      `${image()}:1.11.1`,
      '--image-tag',
      '1.11.2',
      '--signature-key',
      signerPem,
    );
    expect(mismatch.code).toBe(1);
    expect(mismatch.err).toMatch(/--image has tag 1.11.1, but --image-tag is 1.11.2/);
    const byDigest = await pull(
      '--image',
      `${image()}@sha256:${'a'.repeat(64)}`,
      '--signature-key',
      signerPem,
    );
    expect(byDigest.code).toBe(1);
    expect(byDigest.err).toMatch(/by tag/);
    const d = registry.artifact(repo, 'two-files', caaManifest, 2);
    registry.sign(repo, d, signer.privateKey, image());
    const two = await pull('--image', `${image()}:two-files`, '--signature-key', signerPem);
    expect(two.code).toBe(1);
    expect(two.err).toMatch(/2 of them are JSON/);
    const missing = await pull('--image', `${image()}:nope`, '--signature-key', signerPem);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/reading .*:nope/);
  });

  it('refuses an artifact whose tag does not match the image_tag inside it', async () => {
    const d = registry.artifact(repo, '2.0.0', readFileSync(mockSample));
    registry.sign(repo, d, signer.privateKey, image());
    const r = await pull('--image', `${image()}:2.0.0`, '--signature-key', signerPem);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/not --image-tag "2.0.0"/);
  });
});
