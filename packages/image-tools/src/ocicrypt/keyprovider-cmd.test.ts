// `image-policy keyprovider`: ocicrypt's key-provider protocol for a `cmd` provider. keywrap with the
// parameters as Go's ocicrypt sends them (base64 []byte) makes a packet the data hub's unwrapper opens;
// keyunwrap opens it again (annotation as number array or base64); bad requests exit 1 with the reason.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { attestationAgentUnwrapper } from '@broker/image';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ImageCliIo, imagePolicyMain } from '../cli.js';

const KID = 'kbs:///default/image-kek/cmd';
const OPTS = Buffer.from('{"symkey":"a","digest":"","cipheroptions":{"nonce":"b"}}');
const kek = randomBytes(32);
let dir: string;
let kekFile: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyprovider-cmd-'));
  kekFile = join(dir, 'kek.bin');
  await writeFile(kekFile, kek);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function keyprovider(request: unknown): Promise<{ status: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: ImageCliIo = {
    stdout: (s) => {
      out += s;
    },
    stderr: (s) => {
      err += s;
    },
    env: {},
    stdin: async () => Buffer.from(typeof request === 'string' ? request : JSON.stringify(request)),
  };
  const status = await imagePolicyMain(['keyprovider'], io);
  return { status, out, err };
}

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
const params = (text: string) => ({ Parameters: { 'attestation-agent': [b64(text)] } });

describe('image-policy keyprovider', () => {
  it('wraps as Go asks and unwraps what it wrapped; the data hub opens the packet too', async () => {
    const wrap = await keyprovider({
      op: 'keywrap',
      keywrapparams: {
        ec: { ...params(`keyid=${KID}::keypath=${kekFile}`), DecryptConfig: { Parameters: {} } },
        optsdata: b64(OPTS),
      },
      keyunwrapparams: {},
    });
    expect(wrap.err).toBe('');
    expect(wrap.status).toBe(0);
    const annotation = (JSON.parse(wrap.out) as { keywrapresults: { annotation: number[] } }).keywrapresults
      .annotation;
    const packet = JSON.parse(Buffer.from(annotation).toString('utf8')) as Record<string, unknown>;
    expect(packet.kid).toBe(KID);
    expect(packet.wrap_type).toBe('A256GCM');
    expect(await attestationAgentUnwrapper(async () => kek).unwrap(Buffer.from(annotation))).toEqual(OPTS);
    for (const form of [annotation, b64(Buffer.from(annotation))]) {
      const unwrap = await keyprovider({
        op: 'keyunwrap',
        keywrapparams: {},
        keyunwrapparams: { dc: params(`keypath=${kekFile}`), annotation: form },
      });
      expect(unwrap.status).toBe(0);
      const optsdata = (JSON.parse(unwrap.out) as { keyunwrapresults: { optsdata: number[] } })
        .keyunwrapresults.optsdata;
      expect(Buffer.from(optsdata)).toEqual(OPTS);
    }
  });

  it('refuses bad requests with the reason', async () => {
    const cases: [unknown, string][] = [
      ['{"op":', 'the request is not JSON'],
      [{ op: 'sign' }, 'unknown op "sign" (keywrap or keyunwrap)'],
      [
        { op: 'keywrap', keywrapparams: { ec: { Parameters: {} }, optsdata: [] } },
        'keywrapparams.ec.Parameters has no "attestation-agent" entry',
      ],
      [
        { op: 'keywrap', keywrapparams: { ec: params(`keypath=${kekFile}`), optsdata: [] } },
        'no keyid=kbs:///… kid',
      ],
      [{ op: 'keywrap', keywrapparams: { ec: params(`keyid=${KID}`), optsdata: [] } }, 'no keypath=KEK file'],
      [
        {
          op: 'keywrap',
          keywrapparams: { ec: params(`keyid=/default/k/x::keypath=${kekFile}`), optsdata: [] },
        },
        'malwared AnnotationPacket format: kid "/default/k/x"',
      ],
      [
        { op: 'keyunwrap', keyunwrapparams: { dc: params(`keypath=${kekFile}`), annotation: [300] } },
        'keyunwrapparams.annotation is not bytes',
      ],
    ];
    for (const [request, reason] of cases) {
      const r = await keyprovider(request);
      expect(r.status).toBe(1);
      expect(r.err).toContain(`image-policy keyprovider: `);
      expect(r.err).toContain(reason);
    }
    const big = await keyprovider('x'.repeat(1024 * 1024 + 1));
    expect(big.err).toContain('the request exceeds 1048576 bytes');
  });
});
