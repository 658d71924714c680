// dist/bin/kbs serving a mounted resource that an operator rewrites in place (truncate, then write, as an
// editor or `cat > file` does) while guests fetch it and SIGHUPs ask for reloads. Kubernetes swaps a whole
// `..data` directory atomically, but a file edited by hand is half-written for a moment: a guest must only
// ever get a complete old or a complete new value, never the half.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jweDecrypt } from '@broker/protocol';
import { afterAll, describe, expect, it } from 'vitest';
import { binary, freePort, start, waitForListen } from './helpers/process.js';
import { sampleGuest } from './helpers/replicas.js';
import { makeServerCert } from './helpers/tls.js';

const dir = mkdtempSync(join(tmpdir(), 'broker-kbs-in-place-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Generation `n`'s content (the writer makes the same): large enough that half of it is a state of its own. */
const generation = (n: number) => `generation ${n} `.repeat(4096);
const ROUNDS = 30;

describe('mounted resource rewritten in place', () => {
  it('serves only whole values while the file is truncated and rewritten under reloads', async () => {
    const tls = makeServerCert(['127.0.0.1'], mkdtempSync(join(dir, 'tls-')));
    const root = join(dir, 'resources');
    const file = join(root, 'default', 'app', 'key');
    mkdirSync(join(root, 'default', 'app'), { recursive: true });
    writeFileSync(file, generation(0));
    const port = await freePort();
    const config = join(dir, 'kbs.toml');
    writeFileSync(
      config,
      `[http_server]
sockets = ["127.0.0.1:${port}"]
private_key = "${tls.keyPath}"
certificate = "${tls.certPath}"
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "DenyAll"
[[plugins]]
name = "resource"
[mounted_files]
resources = ["${root}"]
resource_policy = "${join(dir, 'policy.rego')}"
`,
    );
    writeFileSync(join(dir, 'policy.rego'), 'package policy\ndefault allow = true\n');
    const kbs = start(binary('kbs'), ['--config-file', config]);
    try {
      const url = `https://127.0.0.1:${port}`;
      await waitForListen({ port }, kbs);
      const guest = sampleGuest(tls.certPem);
      const auth = await guest.auth(url);
      const attest = await guest.attest(url, auth.cookie, auth.nonce);
      expect(attest.status, attest.body).toBe(200);
      const { token } = JSON.parse(attest.body) as { token: string };
      const fetchValue = async () => {
        const r = await guest.resource(url, 'default/app/key', { token });
        expect(r.status, r.body).toBe(200);
        return Buffer.from(jweDecrypt(JSON.parse(r.body), guest.key.privateKey)).toString();
      };
      expect(await fetchValue()).toBe(generation(0));

      const whole = new Set(Array.from({ length: ROUNDS + 1 }, (_, n) => generation(n)));
      // The operator, in a process of its own so that this one's fetches never slow it: truncate, write
      // the first half, a pause, the rest; again and again.
      const writer = spawn(
        process.execPath,
        [
          '-e',
          `const fs = require('node:fs');
const [file, rounds] = [process.argv[1], Number(process.argv[2])];
const pause = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
for (let n = 1; n <= rounds; n++) {
  const text = Buffer.from(\`generation \${n} \`.repeat(4096));
  const fd = fs.openSync(file, 'r+');
  fs.ftruncateSync(fd, 0);
  fs.writeSync(fd, text, 0, text.length >> 1, 0);
  pause(60);
  fs.writeSync(fd, text, text.length >> 1, text.length - (text.length >> 1), text.length >> 1);
  fs.closeSync(fd);
  pause(40);
}`,
          file,
          String(ROUNDS),
        ],
        { stdio: 'inherit' },
      );
      let writing = true;
      const wrote = new Promise<number | null>((resolve) =>
        writer.once('exit', (code) => {
          writing = false;
          resolve(code);
        }),
      );
      // Someone asking for reloads all the while (SIGHUP re-reads the mounted files at once).
      const hup = (async () => {
        while (writing) {
          kbs.child.kill('SIGHUP');
          await sleep(30);
        }
      })();
      let fetches = 0;
      let torn = 0;
      while (writing) {
        const v = await fetchValue();
        fetches++;
        if (!whole.has(v)) torn++;
      }
      expect(await wrote).toBe(0);
      await hup;
      expect(fetches).toBeGreaterThan(0);
      expect(torn, `${torn} of ${fetches} fetches were neither the old nor a new whole value`).toBe(0);
      // Once the file rests, its last version is served.
      for (;;) {
        kbs.child.kill('SIGHUP');
        if ((await fetchValue()) === generation(ROUNDS)) break;
        await sleep(100);
      }
    } finally {
      expect(await kbs.stop()).toBe(0);
    }
  });
});
