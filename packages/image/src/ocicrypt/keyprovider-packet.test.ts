// The `attestation-agent` key provider's packet (coco-keyprovider's JSON): layers it wraps are opened
// with the KEK fetched by `kid`, in both byte encodings (number arrays, base64), and every hostile or
// wrong packet is refused with its reason: a kid that is not a kbs:/// URI, a wrong IV length, an
// unknown wrap type, bytes out of range, a wrong KEK, a KEK the KBS does not release.
import { createCipheriv, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildLayer, writeDirImage } from '../build.js';
import { openDirImage } from '../dir-image.js';
import { ImagePullError, pullImage } from '../pull.js';
import { buildAnnotatedImage, encryptLayer, type KeyWrapper } from './encrypt.js';
import {
  ATTESTATION_AGENT_PROTOCOL,
  attestationAgentUnwrapper,
  attestationAgentWrapper,
  parseAnnotationPacket,
  unwrapAnnotationPacket,
} from './keyprovider-packet.js';

const KID = 'kbs:///default/image-kek/app';
const kek = randomBytes(32);
const UNWRAP =
  'Errors happened when pulling image: Failed to decrypt layer: Failed to decrypt the image layer, please ensure that the decryption key is placed and correct';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyprovider-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A packet wrapper whose JSON is rewritten by `edit` (valid A256GCM wrapping underneath). */
function packetWrapper(edit: (p: Record<string, unknown>) => unknown, key: Uint8Array = kek): KeyWrapper {
  const inner = attestationAgentWrapper(KID, key);
  return {
    protocol: ATTESTATION_AGENT_PROTOCOL,
    wrap: async (bytes) =>
      Buffer.from(JSON.stringify(edit(JSON.parse(Buffer.from(await inner.wrap(bytes)).toString('utf8'))))),
  };
}

async function pullWith(wrapper: KeyWrapper, getKek: (kid: string) => Promise<Uint8Array>) {
  const layer = await buildLayer([{ name: 'app/secret.txt', content: 'sealed by the KBS\n' }], 'gzip');
  const src = join(dir, 'image');
  await writeDirImage(src, buildAnnotatedImage({ layers: [await encryptLayer(layer, [wrapper])] }));
  const asked: string[] = [];
  const result = await pullImage(await openDirImage(src), join(dir, 'bundle'), {
    decryption: [
      attestationAgentUnwrapper(async (kid) => {
        asked.push(kid);
        return getKek(kid);
      }),
    ],
  }).then(
    (r) => r,
    (e: unknown) => e,
  );
  return { result, asked };
}

async function refusal(wrapper: KeyWrapper, getKek: (kid: string) => Promise<Uint8Array> = async () => kek) {
  const { result, asked } = await pullWith(wrapper, getKek);
  expect(result).toBeInstanceOf(ImagePullError);
  expect(existsSync(join(dir, 'bundle', 'rootfs'))).toBe(false);
  return { message: (result as ImagePullError).message, asked };
}

describe('the attestation-agent key provider', () => {
  it('opens layers wrapped as coco-keyprovider writes them (number arrays) and as base64 strings', async () => {
    const b64 = packetWrapper((p) => ({
      ...p,
      wrapped_data: Buffer.from(p.wrapped_data as number[]).toString('base64'),
      iv: Buffer.from(p.iv as number[]).toString('base64'),
      version: '0.1.0',
      provider: 'kbs',
      provider_settings: {},
      annotations: {},
    }));
    for (const wrapper of [attestationAgentWrapper(KID, kek), b64]) {
      await rm(join(dir, 'bundle'), { recursive: true, force: true });
      await rm(join(dir, 'image'), { recursive: true, force: true });
      const { result, asked } = await pullWith(wrapper, async () => kek);
      expect(asked).toEqual([KID]);
      const rootfs = (result as { rootfs: string }).rootfs;
      expect(await readFile(join(rootfs, 'app/secret.txt'), 'utf8')).toBe('sealed by the KBS\n');
    }
  });

  it('opens the A256CTR wrapping the CDH also accepts', () => {
    const iv = randomBytes(16);
    const c = createCipheriv('aes-256-ctr', kek, iv);
    const wrapped = Buffer.concat([c.update('{"x":1}'), c.final()]);
    const packet = parseAnnotationPacket(
      Buffer.from(
        JSON.stringify({ kid: KID, wrapped_data: [...wrapped], iv: [...iv], wrap_type: 'A256CTR' }),
      ),
    );
    expect(Buffer.from(unwrapAnnotationPacket(packet, kek)).toString()).toBe('{"x":1}');
  });

  it('fails with image-rs text when the KBS does not release the KEK, and with a wrong KEK', async () => {
    const denied = await refusal(attestationAgentWrapper(KID, kek), async () => {
      throw new Error('Get resource failed: KBS returned 401: policy denied');
    });
    expect(denied.message).toBe(
      `${UNWRAP} (provider.attestation-agent: Get resource failed: KBS returned 401: policy denied)`,
    );
    const wrong = await refusal(attestationAgentWrapper(KID, kek), async () => randomBytes(32));
    expect(wrong.message).toBe(
      `${UNWRAP} (provider.attestation-agent: the KEK ${KID} does not open the AnnotationPacket (GCM tag mismatch))`,
    );
    const short = await refusal(attestationAgentWrapper(KID, kek), async () => randomBytes(16));
    expect(short.message).toContain(`the KEK ${KID} has 16 bytes, expected 32`);
  });

  it('refuses hostile packets before asking the KBS', async () => {
    const cases: [(p: Record<string, unknown>) => unknown, string][] = [
      [
        (p) => ({ ...p, kid: '/default/image-kek/app' }),
        'malwared AnnotationPacket format: kid "/default/image-kek/app" is not a kbs:///<repository>/<type>/<tag> resource URI',
      ],
      [
        (p) => ({ ...p, kid: 'https://kbs/default/image-kek/app' }),
        'is not a kbs:///<repository>/<type>/<tag> resource URI',
      ],
      [
        (p) => ({ ...p, kid: 'kbs:///default/../app' }),
        'is not a kbs:///<repository>/<type>/<tag> resource URI',
      ],
      [(p) => ({ ...p, iv: [...randomBytes(16)] }), 'AnnotationPacket iv has 16 bytes, A256GCM needs 12'],
      [
        (p) => ({ ...p, wrap_type: 'A128KW' }),
        'unsupported AnnotationPacket wrap_type "A128KW" (A256GCM or A256CTR)',
      ],
      [(p) => ({ ...p, wrapped_data: [256, 1] }), 'AnnotationPacket "wrapped_data" is not bytes'],
      [(p) => ({ ...p, wrapped_data: 'not base64' }), 'AnnotationPacket "wrapped_data" is not base64'],
      [(p) => ({ ...p, wrapped_data: [1, 2, 3] }), 'wrapped_data is shorter than a GCM tag'],
      [(p) => ({ ...p, kid: undefined }), 'malwared AnnotationPacket format: no "kid"'],
      [() => [1], 'malwared AnnotationPacket format: not a JSON object'],
    ];
    for (const [edit, reason] of cases) {
      await rm(join(dir, 'image'), { recursive: true, force: true });
      const { message, asked } = await refusal(packetWrapper(edit));
      expect(message.startsWith(UNWRAP)).toBe(true);
      expect(message).toContain(reason);
      expect(asked).toEqual([]);
    }
  });
});
