// trustee's `sample` plugin in a real KBS over HTTP: every method and path answers its fixed body,
// behind admin credentials, unencrypted.
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { type RunningKbs, startKbs } from '../kbs.js';
import { send } from '../testing/client.js';

const running: RunningKbs[] = [];
afterEach(async () => {
  while (running.length > 0) await running.pop()?.close();
});

async function kbsWithSample(adminMode: string): Promise<string> {
  const toml = `[http_server]\nsockets = ["127.0.0.1:0"]\ninsecure_http = true\n[attestation_token]\ninsecure_header_jwk = true\n[admin]\nauthorization_mode = "${adminMode}"\n[[plugins]]\nname = "sample"\nitem = "test-value"\n`;
  const kbs = await startKbs(parseKbsConfigText(toml), { logger: pino({ level: 'silent' }) });
  running.push(kbs);
  return kbs.urls[0] as string;
}

describe('sample plugin', () => {
  it('answers GET and POST on any path with "sample plugin response" (text/xml) to an admin', async () => {
    const base = await kbsWithSample('InsecureAllowAll');
    for (const [method, path] of [
      ['GET', 'sample'],
      ['GET', 'sample/a/b?x=1'],
      ['POST', 'sample/item'],
    ] as const) {
      const r = await send(`${base}/kbs/v0/${path}`, {
        method,
        body: method === 'POST' ? 'body' : undefined,
      });
      expect([r.status, r.headers['content-type'], r.text]).toEqual([
        200,
        'text/xml',
        'sample plugin response',
      ]);
    }
    const metrics = await (await send(`${base}/metrics`)).text;
    expect(metrics).toMatch(/kbs_plugin_requests_total\{plugin_name="sample"\} 3/);
  });

  it('is admin-gated (validate_auth true): refused when the admin API denies the caller', async () => {
    const base = await kbsWithSample('DenyAll');
    const r = await send(`${base}/kbs/v0/sample/x`);
    expect(r.status).toBe(401);
    expect((r.json() as { type: string }).type).toMatch(/\/AdminAuthInitialization$/);
    expect(r.text).not.toContain('sample plugin response');
  });

  it('needs `item`, as trustee', () => {
    expect(() =>
      parseKbsConfigText(
        '[http_server]\ninsecure_http = true\n[admin]\nauthorization_mode = "DenyAll"\n[[plugins]]\nname = "sample"\n',
      ),
    ).toThrow(/item is required/);
  });
});
