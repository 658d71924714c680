import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRvps, MemoryStorage } from '@broker/kbs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rvpsToolMain } from './cli.js';
import { type RunningRvpsServer, startRvpsServer } from './server.js';
import { sampleMessage } from './testing/index.js';

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: (t: string) => void out.push(t), err: (t: string) => void err.push(t) }, out, err };
}

describe('rvps-tool', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rvps-tool-'));
  let server: RunningRvpsServer;
  let addr: string;
  beforeAll(async () => {
    server = await startRvpsServer({ rvps: createRvps(new MemoryStorage()), address: '127.0.0.1:0' });
    addr = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('registers a message file and queries the value back, with trustee options', async () => {
    const file = join(dir, 'message.json');
    writeFileSync(file, sampleMessage({ 'svn.x': [7] }));
    const reg = capture();
    expect(await rvpsToolMain(['register', '--path', file, '-a', addr], reg.io)).toBe(0);
    const q = capture();
    expect(await rvpsToolMain(['query', '-r', 'svn.x', '--addr', addr], q.io)).toBe(0);
    expect(q.out.join('')).toBe('[7]\n');
    const missing = capture();
    expect(await rvpsToolMain(['query', '--reference-value-id', 'nope', '-a', addr], missing.io)).toBe(0);
    expect(missing.out).toEqual([]);
    expect(missing.err.join('')).toMatch(/No reference values found/);
  });

  it('reports a refused message as a runtime failure (1) and usage mistakes as 2', async () => {
    const file = join(dir, 'bad.json');
    writeFileSync(file, sampleMessage({ a: 1 }, '9.9.9'));
    const c = capture();
    expect(await rvpsToolMain(['register', '-p', file, '-a', addr], c.io)).toBe(1);
    expect(c.err.join('')).toMatch(/^rvps-tool: .*Register reference value/);
    expect(await rvpsToolMain(['register', '-a', addr], capture().io)).toBe(2);
    expect(await rvpsToolMain(['query', '-r', 'x', '-a', '127.0.0.1:1'], capture().io)).toBe(1);
  });
});
