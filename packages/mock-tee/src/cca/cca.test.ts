import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadCcaConfig, loadCcaStores, parseCcaToken, verifyCcaToken } from '@broker/verifier';
import { afterAll, describe, expect, it } from 'vitest';
import { ccaTsmProvider, loadOrCreateCcaPlatform } from './index.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-mock-cca-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('simulated CCA realm', () => {
  it("takes the kernel's 32 to 64 byte challenge and answers a token its stores verify", async () => {
    const platform = await loadOrCreateCcaPlatform(dir);
    const respond = ccaTsmProvider(platform, { personalizationValue: Buffer.alloc(64) });
    const request = (n: number) => ({ dir, inblob: Buffer.alloc(n, 7), generation: 1 });
    expect(() => respond(request(31))).toThrow('arm_cca_guest needs a challenge of 32 to 64 bytes, got 31');
    const answer = await respond(request(32));
    const token = parseCcaToken(Buffer.from(answer.outblob));
    expect(token.realmClaims.challenge).toEqual(Buffer.concat([Buffer.alloc(32, 7), Buffer.alloc(32)]));
    const config = loadCcaConfig(join(dir, 'cca', 'config.json'));
    if (config.type !== 'local') throw new Error('expected a local config');
    expect(() => verifyCcaToken(token, loadCcaStores(config))).not.toThrow();
    expect(JSON.parse(readFileSync(join(dir, 'cca', 'tastore.json'), 'utf8'))).toHaveLength(1);
  });
});
