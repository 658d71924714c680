// Hot reload applies a mounted policy through the same checks as the admin API: a resource policy without
// `allow`, or one whose evaluation exceeds a limit on the representative request, is refused and logged,
// and the previous policy keeps being served.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { parseKbsConfigText } from '../config.js';
import { startKbs } from '../kbs.js';
import { BUILTIN_RESOURCE_POLICIES } from '../policy/resource-policy.js';
import { handshake, send } from '../testing/client.js';
import { kubeMount } from '../testing/mount.js';

const tmp = mkdtempSync(join(tmpdir(), 'kbs-reload-checks-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The first log line, from `from` on, that says the mounted policy file was applied or refused. */
async function outcome(lines: string[], from: number): Promise<string> {
  for (;;) {
    const line = lines
      .slice(from)
      .find((l) => l.includes('mounted file applied') || l.includes('mounted file not applied'));
    if (line !== undefined) return line;
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Polls `probe` until it returns true; the test's own timeout bounds the wait. */
async function eventually(probe: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await probe())) await new Promise((r) => setTimeout(r, 20));
}

describe('hot reload of the mounted resource policy', () => {
  it('refuses and logs a policy without `allow` or over a limit, and keeps serving the previous one', async () => {
    const policyDir = join(tmp, 'resource-policy');
    kubeMount(policyDir, { 'policy.rego': BUILTIN_RESOURCE_POLICIES.allow_all });
    const lines: string[] = [];
    const kbs = await startKbs(
      parseKbsConfigText(`
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[[plugins]]
name = "resource"
[mounted_files]
resource_policy = "${policyDir}"
`),
      {
        logger: pino({ level: 'info' }, { write: (s: string) => lines.push(s) }),
        watch: { debounceMs: 20, pollMs: 0 },
      },
    );
    try {
      const base = kbs.urls[0] as string;
      expect((await send(`${base}/kbs/v0/resource/default/k/t`, { method: 'POST', body: 'x' })).status).toBe(
        200,
      );
      const { token } = await handshake(base);
      const fetch = async () =>
        (await send(`${base}/kbs/v0/resource/default/k/t`, { headers: { authorization: `Bearer ${token}` } }))
          .status;
      expect(await fetch()).toBe(200);

      let from = lines.length;
      kubeMount(policyDir, { 'policy.rego': 'package policy\n' });
      const missing = await outcome(lines, from);
      expect(missing).toContain('mounted file not applied');
      expect(missing).toContain('no `allow` rule');
      expect(await fetch()).toBe(200);

      from = lines.length;
      kubeMount(policyDir, {
        'policy.rego': `package policy
pad := sprintf("%08192d", [0])
bomb := {s | some i in numbers.range(1, 1000000); s := sprintf("%d%s", [i, pad])}
allow if count(bomb) > 0
`,
      });
      const over = await outcome(lines, from);
      expect(over).toContain('mounted file not applied');
      expect(over).toContain('memory limit');
      expect(await fetch()).toBe(200);

      // A good policy is applied again.
      kubeMount(policyDir, { 'policy.rego': BUILTIN_RESOURCE_POLICIES.deny_all });
      await eventually(async () => (await fetch()) === 401);
    } finally {
      await kbs.close();
    }
  });

  it('refuses and logs a mounted attestation policy without trust_claims, keeping the previous one', async () => {
    const policies = join(tmp, 'attestation-policy');
    const policy = (executables: number) =>
      `package policy\nimport rego.v1\ntrust_claims := {"executables": ${executables}}\n`;
    kubeMount(policies, { 'default_cpu.rego': policy(33) });
    const lines: string[] = [];
    const kbs = await startKbs(
      parseKbsConfigText(`
[http_server]
sockets = ["127.0.0.1:0"]
insecure_http = true
[attestation_token]
insecure_header_jwk = true
[admin]
authorization_mode = "InsecureAllowAll"
[mounted_files]
attestation_policies = ["${policies}"]
`),
      {
        logger: pino({ level: 'info' }, { write: (s: string) => lines.push(s) }),
        watch: { debounceMs: 20, pollMs: 0 },
      },
    );
    try {
      const base = kbs.urls[0] as string;
      const executables = async () => {
        const { token } = await handshake(base);
        const payload = JSON.parse(Buffer.from(token.split('.')[1] as string, 'base64url').toString());
        return payload.submods.cpu0['ear.trustworthiness-vector'].executables as number;
      };
      expect(await executables()).toBe(33);
      const from = lines.length;
      kubeMount(policies, { 'default_cpu.rego': 'package policy\nimport rego.v1\nexecutables := 2\n' });
      const missing = await outcome(lines, from);
      expect(missing).toContain('mounted file not applied');
      expect(missing).toContain('no `trust_claims` rule');
      expect(await executables()).toBe(33);
    } finally {
      await kbs.close();
    }
  });
});
