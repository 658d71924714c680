// The nebula-cert runner's bounds, with stand-in executables: a deadline, an output cap, the tool's
// own complaint as the error, arguments passed verbatim (no shell).
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NebulaCert } from './nebula-cert.js';

let dir: string;
function tool(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
  return path;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'nebula-cert-runner-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('NebulaCert', () => {
  it('passes each argument verbatim, with no shell in between', async () => {
    const echo = new NebulaCert(tool('echo-args', 'for a in "$@"; do printf "%s\\n" "$a"; done'));
    const args = ['sign', '-name', '$(id);`id`|x', '-ip', '1.2.3.4/8 && rm -rf /'];
    expect(await echo.run(args)).toBe(`${args.join('\n')}\n`);
  });

  it("reports the tool's complaint and its real version", async () => {
    const failing = new NebulaCert(tool('fails', 'echo "Error: refusing to sign" >&2; exit 1'));
    await expect(failing.run(['sign'])).rejects.toThrow(/fails sign: Error: refusing to sign$/);
    expect(await new NebulaCert('/usr/bin/nebula-cert').version()).toMatch(/^\d+\.\d+\.\d+$/);
    await expect(new NebulaCert(tool('odd', 'echo hello')).version()).rejects.toThrow(/unexpected output/);
  });

  it('kills a tool that does not finish by the deadline', async () => {
    const stuck = new NebulaCert(tool('stuck', 'exec sleep 600'), 200);
    await expect(stuck.run(['ca'])).rejects.toThrow(/stuck ca: did not finish within 200 ms/);
  });

  it('refuses a tool that prints more than 64 KiB', async () => {
    const chatty = new NebulaCert(tool('chatty', 'head -c 200000 /dev/zero'));
    await expect(chatty.run(['print'])).rejects.toThrow(/chatty print: printed more than 65536 bytes/);
  });
});
