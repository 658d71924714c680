import { generateKeyPairSync } from 'node:crypto';
import { TeeKeyPair } from '@broker/kbs-client';
import { TtrpcClosedError } from '@broker/ttrpc';
import { describe, expect, it } from 'vitest';
import { type AaTokenClient, AaTokenProvider, parseReply } from './aa-token.js';
import { AaTokenProviderError } from './errors.js';

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const TOKEN = `${b64({ alg: 'ES256' })}.${b64({ exp: 4102444800 })}.c2ln`;
const KEY_PEM = TeeKeyPair.generate().toPem();
const reply = (v: unknown) => Buffer.from(JSON.stringify(v));

function providerError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(AaTokenProviderError);
    return (e as Error).message;
  }
  throw new Error('expected AaTokenProviderError');
}

describe('parseReply', () => {
  it('reads {"token","tee_keypair"} and ignores other members, as upstream', () => {
    const r = parseReply(reply({ token: TOKEN, tee_keypair: KEY_PEM, extra: 1 }));
    expect(r.token).toBe(TOKEN);
    expect(r.teeKeyPair.publicJwk).toMatchObject({ kty: 'EC', crv: 'P-256' });
  });

  it('accepts an RSA PKCS#1 key, the form upstream writes for RSA', () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const pem = privateKey.export({ format: 'pem', type: 'pkcs1' }).toString();
    expect(parseReply(reply({ token: TOKEN, tee_keypair: pem })).teeKeyPair.publicJwk.kty).toBe('RSA');
  });

  it('refuses hostile replies with a message that never echoes the key', () => {
    const cases: [Uint8Array, RegExp][] = [
      [Buffer.from(''), /deserialize attestation-agent reply failed/],
      [Buffer.from('{"token":'), /deserialize attestation-agent reply failed/],
      [Buffer.from([0xff, 0xfe, 0x7b]), /deserialize attestation-agent reply failed/],
      [reply([TOKEN, KEY_PEM]), /not a JSON object/],
      [reply(null), /not a JSON object/],
      [reply({ token: TOKEN }), /must be strings/],
      [reply({ token: 1, tee_keypair: KEY_PEM }), /must be strings/],
      [Buffer.alloc(300 * 1024, 0x20), /larger than/],
      [
        reply({ token: 'not-a-jwt', tee_keypair: KEY_PEM }),
        /^Attestation Agent token provider error: deserialize token failed: /,
      ],
      [reply({ token: `a.${b64({ exp: 'soon' })}.c`, tee_keypair: KEY_PEM }), /deserialize token failed/],
      [reply({ token: TOKEN, tee_keypair: 'not a key' }), /deserialize tee keypair failed/],
      [
        reply({
          token: TOKEN,
          tee_keypair: '-----BEGIN PRIVATE KEY-----\nMIIBroken\n-----END PRIVATE KEY-----\n',
        }),
        /deserialize tee keypair failed/,
      ],
      [reply({ token: TOKEN, tee_keypair: 'x'.repeat(20_000) }), /deserialize tee keypair failed/],
    ];
    for (const [bytes, why] of cases) {
      const message = providerError(() => parseReply(bytes));
      expect(message).toMatch(why);
      expect(message).not.toContain('PRIVATE KEY');
    }
  });
});

class ScriptedClient implements AaTokenClient {
  closed = false;
  readonly answers: (() => Promise<Uint8Array>)[];
  constructor(answers: (() => Promise<Uint8Array>)[]) {
    this.answers = answers;
  }
  getToken(tokenType: string): Promise<Uint8Array> {
    expect(tokenType).toBe('kbs');
    const next = this.answers.shift();
    if (next === undefined) throw new Error('no more answers');
    return next();
  }
  close(): void {
    this.closed = true;
  }
}

describe('AaTokenProvider', () => {
  const good = async () => reply({ token: TOKEN, tee_keypair: KEY_PEM });

  it('keeps one connection and reconnects after it drops', async () => {
    const first = new ScriptedClient([
      good,
      async () => {
        first.closed = true;
        throw new TtrpcClosedError();
      },
    ]);
    const second = new ScriptedClient([good]);
    const clients = [first, second];
    let connects = 0;
    const provider = new AaTokenProvider({
      address: { path: '/nonexistent/aa.sock' },
      connect: async () => {
        connects++;
        return clients.shift() as AaTokenClient;
      },
    });
    expect((await provider.getToken()).token).toBe(TOKEN);
    await expect(provider.getToken()).rejects.toThrow(
      /^Attestation Agent token provider error: cal ttrpc failed: ttrpc: closed/,
    );
    expect((await provider.getToken()).token).toBe(TOKEN);
    expect(connects).toBe(2);
    provider.close();
    expect(second.closed).toBe(true);
    await expect(provider.getToken()).rejects.toThrow(/closed/);
  });

  it('shares one connection attempt between concurrent callers', async () => {
    let connects = 0;
    const provider = new AaTokenProvider({
      address: { path: '/x' },
      connect: async () => {
        connects++;
        return new ScriptedClient([good, good, good]);
      },
    });
    await Promise.all([provider.getToken(), provider.getToken(), provider.getToken()]);
    expect(connects).toBe(1);
  });

  it('names the socket it cannot reach', async () => {
    const provider = new AaTokenProvider({ address: { path: '/nonexistent/dir/aa.sock' } });
    await expect(provider.getToken()).rejects.toThrow(
      /^Attestation Agent token provider error: ttrpc connect failed: cannot reach the attestation agent at unix:\/\/\/nonexistent\/dir\/aa\.sock: /,
    );
  });
});
