// The verdict log's scrubbing as an attacker would probe it (verdicts.test.ts has the ordinary cases):
// a claim exactly as long as the shortest secret (the length shortcut must still look at it), secrets
// hidden in claim names, and guests with interleaved tokens whose cached scrubbed claims must never be
// shown under the other's verdict.
import { describe, expect, it } from 'vitest';
import { VerdictLog } from './log.js';
import { VerdictRecorder } from './recorder.js';
import { REDACTED, scrubClaims, secretValues } from './scrub.js';

function deepFreeze<T>(v: T): T {
  if (typeof v === 'object' && v !== null) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

describe('scrubbing, attacked', () => {
  it('still checks strings exactly as long as the shortest secret, and claim names', () => {
    const secret = '0123456789abcdef'; // the shortest length kept as a secret
    const secrets = secretValues(secret, { x: 'a-much-longer-secret-coordinate-value' });
    expect(secrets).toEqual([secret, 'a-much-longer-secret-coordinate-value']);
    const out = scrubClaims(
      { exact: secret, shorter: secret.slice(1), inside: `<${secret}>`, [secret]: 'named by it' },
      secrets,
    );
    expect(out).toEqual({
      exact: REDACTED,
      shorter: secret.slice(1),
      inside: REDACTED,
      [REDACTED]: 'named by it',
    });
  });

  it("never shows one token's scrubbed claims under another's verdict, however their fetches interleave", async () => {
    const log = new VerdictLog(10, () => 0);
    const recorder = new VerdictRecorder(log);
    const guest = (name: string) => {
      const key = `tee-key-of-guest-${name}-0123456789`;
      return {
        token: `header.token-of-guest-${name}-long-enough.signature`,
        key,
        claims: deepFreeze({
          submods: { cpu0: { 'ear.veraison.annotated-evidence': { sample: { guest: name, echo: key } } } },
          'ear.veraison.key-attestation': { akpub: key },
        }),
      };
    };
    const a = guest('a');
    const b = guest('b');
    const order = [a, b, a, b, b, a];
    for (const g of order) {
      recorder.resource({
        method: 'GET',
        resource: 'r/t/g',
        token: g.token,
        claims: g.claims,
        status: 'allowed',
      });
    }
    const verdicts = (await log.list()).reverse();
    expect(verdicts).toHaveLength(order.length);
    verdicts.forEach((v, i) => {
      const g = order[i];
      const shown = JSON.stringify(v.claims);
      expect(shown).toContain(`"guest":"${g?.token === a.token ? 'a' : 'b'}"`);
      for (const other of [a, b]) {
        expect(shown).not.toContain(other.key);
        expect(shown).not.toContain(other.token);
      }
    });
  });
});
