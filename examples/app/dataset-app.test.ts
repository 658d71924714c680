import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DatasetError,
  DEFAULT_BUNDLED_DATASET,
  decryptDataset,
  encryptDataset,
  evaluateCsv,
  evaluateFromEnv,
  MAGIC,
} from './dataset-app.js';

const HERE = import.meta.dirname;
const NODE = resolve(HERE, '../../node_modules/.bin/node');
const work = mkdtempSync(join(tmpdir(), 'dataset-app-'));
const key = randomBytes(32);
const keyPath = join(work, 'dataset.key');
const confidential = readFileSync(join(HERE, 'data/confidential.csv'));
const served = new Map<string, Buffer>();
let server: Server;
let base: string;

beforeAll(async () => {
  writeFileSync(keyPath, key);
  served.set('/dataset.enc', encryptDataset(key, confidential));
  server = createServer((req, res) => {
    const body = served.get(req.url ?? '');
    if (body === undefined) res.writeHead(404).end();
    else res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(body);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((r) => server.close(() => r()));
  rmSync(work, { recursive: true, force: true });
});

/** Statistics computed independently of the app, from the CSV text. */
function expected(csv: Buffer, column: string) {
  const [header, ...rows] = csv.toString().trim().split('\n');
  const c = (header ?? '').split(',').indexOf(column);
  const xs = rows.map((r) => Number(r.split(',')[c]));
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / (xs.length - 1));
  return {
    count: xs.length,
    mean: Number(mean.toFixed(3)),
    stddev: Number(sd.toFixed(3)),
    min: Math.min(...xs),
    max: Math.max(...xs),
  };
}

describe('evaluation', () => {
  it('uses the bundled dataset when DECRYPTION_KEY_PATH is not set', async () => {
    const report = await evaluateFromEnv({});
    const sample = readFileSync(DEFAULT_BUNDLED_DATASET);
    expect(report.source).toBe(`bundled:${DEFAULT_BUNDLED_DATASET}`);
    expect(report.rows).toBe(24);
    expect(report.groups).toEqual({ north: 6, south: 6, east: 6, west: 6 });
    expect(report.columns.temperature_c).toMatchObject(expected(sample, 'temperature_c'));
  });

  it('downloads, decrypts and evaluates the dataset when DECRYPTION_KEY_PATH is set', async () => {
    const report = await evaluateFromEnv({
      DECRYPTION_KEY_PATH: keyPath,
      DATASET_URL: `${base}/dataset.enc`,
    });
    expect(report.source).toBe(`${base}/dataset.enc`);
    expect(report.rows).toBe(96);
    for (const col of ['temperature_c', 'humidity_pct', 'pm25_ugm3']) {
      expect(report.columns[col]).toMatchObject(expected(confidential, col));
    }
  });

  it('refuses a wrong key, a changed download, a short key and a missing URL', async () => {
    const wrong = join(work, 'wrong.key');
    writeFileSync(wrong, randomBytes(32));
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: wrong, DATASET_URL: `${base}/dataset.enc` }),
    ).rejects.toThrow(/does not decrypt/);
    const tampered = Buffer.from(served.get('/dataset.enc') as Buffer);
    tampered[40] = (tampered[40] ?? 0) ^ 1;
    served.set('/tampered.enc', tampered);
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: keyPath, DATASET_URL: `${base}/tampered.enc` }),
    ).rejects.toThrow(/does not decrypt/);
    const short = join(work, 'short.key');
    writeFileSync(short, `${key.toString('hex')}\n`);
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: short, DATASET_URL: `${base}/dataset.enc` }),
    ).rejects.toThrow(/must be 32 bytes, got 65/);
    await expect(evaluateFromEnv({ DECRYPTION_KEY_PATH: keyPath })).rejects.toThrow(/DATASET_URL is not/);
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: keyPath, DATASET_URL: `${base}/missing` }),
    ).rejects.toThrow(/HTTP 404/);
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: keyPath, DATASET_URL: 'file:///etc/passwd' }),
    ).rejects.toThrow(/http or https/);
    await expect(
      evaluateFromEnv({ DECRYPTION_KEY_PATH: join(work, 'none'), DATASET_URL: `${base}/dataset.enc` }),
    ).rejects.toThrow(/ENOENT/);
  });
});

describe('encrypted format', () => {
  it('is DSE1 ‖ nonce ‖ AES-256-GCM ciphertext ‖ tag, and round-trips', () => {
    const sealed = encryptDataset(key, Buffer.from('a,b\n1,2\n'), Buffer.alloc(12, 7));
    expect(sealed.subarray(0, 4)).toEqual(MAGIC);
    expect(sealed.length).toBe(4 + 12 + 8 + 16);
    expect(decryptDataset(key, sealed).toString()).toBe('a,b\n1,2\n');
    // The magic is authenticated: another header does not decrypt.
    const other = Buffer.from(sealed);
    other.write('DSE2', 0, 'latin1');
    expect(() => decryptDataset(key, other)).toThrow(/not an encrypted dataset/);
    for (let cut = 0; cut < sealed.length; cut++) {
      expect(() => decryptDataset(key, sealed.subarray(0, cut))).toThrow(DatasetError);
    }
  });

  it('refuses CSV it cannot evaluate', () => {
    const bad: [string, RegExp][] = [
      ['', /no header/],
      ['a,b\n', /no rows/],
      ['a,b\n1\n', /row 2 has 1 fields/],
      ['a,b\nx,y\n', /no numeric column/],
      [',b\n1,2\n', /no header/],
    ];
    for (const [csv, msg] of bad) expect(() => evaluateCsv(Buffer.from(csv), 't')).toThrow(msg);
    expect(() => evaluateCsv(Buffer.from([0x61, 0xff]), 't')).toThrow(/UTF-8/);
  });
});

describe('the program, as the container runs it', () => {
  const run = (args: string[], env: Record<string, string>) =>
    new Promise<{ code: number; out: string; err: string }>((res) => {
      execFile(
        NODE,
        [join(HERE, 'dataset-app.ts'), ...args],
        { env: { PATH: process.env.PATH ?? '', ...env } },
        (e, out, err) => res({ code: e ? ((e as { code?: number }).code ?? 1) : 0, out, err }),
      );
    });

  it('runs both ways and with the demo encryption script', async () => {
    const bundled = await run([], {});
    expect(bundled.code).toBe(0);
    expect(JSON.parse(bundled.out).rows).toBe(24);

    const demoKey = join(work, 'demo.key');
    const enc = join(work, 'demo.enc');
    const script = await new Promise<string>((res) =>
      execFile(
        resolve(HERE, '../encrypt-dataset.sh'),
        [demoKey, join(HERE, 'data/confidential.csv'), enc],
        (e, _o, err) => res(e ? `failed: ${err}` : 'ok'),
      ),
    );
    expect(script).toBe('ok');
    expect(readFileSync(demoKey)).toHaveLength(32);
    served.set('/demo.enc', readFileSync(enc));
    const decrypted = await run([], { DECRYPTION_KEY_PATH: demoKey, DATASET_URL: `${base}/demo.enc` });
    expect(decrypted.err).toBe('');
    expect(decrypted.code).toBe(0);
    expect(JSON.parse(decrypted.out).rows).toBe(96);

    const denied = await run([], { DECRYPTION_KEY_PATH: keyPath, DATASET_URL: `${base}/demo.enc` });
    expect(denied.code).toBe(1);
    expect(denied.err).toMatch(/does not decrypt/);
  });
});
