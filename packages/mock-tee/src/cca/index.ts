// A simulated Arm CCA realm for the attester's `cca` module: a configfs-tsm report root whose
// `arm_cca_guest` provider answers every inblob (the realm challenge) with a CCA attestation
// token, the CBOR collection of a platform token signed by the test CPAK and a realm token signed
// by the test RAK the platform token binds. Beside it, the TA store, RV store and CCA config file
// trustee's `cca` verifier reads (CCA_CONFIG_FILE), so a KBS accepts these tokens only when
// pointed at them. The keys are kept in the state folder across restarts.
import { createPrivateKey } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createTestCcaPlatform, type TestCcaPlatform } from '@broker/verifier/testing';
import { ConfigfsTsmResponder, type TsmProviderCallback } from '../configfs-tsm/index.js';
import { MockTeeError } from '../errors.js';

/** The provider name of the kernel's Arm CCA guest driver. */
export const CCA_GUEST_PROVIDER = 'arm_cca_guest';
/** The kernel's arm-cca-guest takes a challenge of 32 to 64 bytes and zero-pads it to 64. */
export const CCA_CHALLENGE_MIN = 32;
export const CCA_CHALLENGE_SIZE = 64;

/** Layout of the CCA device's state folder. */
export const CCA_STATE_FILES = Object.freeze({
  /** Platform (CPAK) and realm (RAK) attestation keys, PKCS#8 PEM, 0600. */
  cpak: 'cca/cpak.pem',
  rak: 'cca/rak.pem',
  /** trustee's `tastore.json`: the CPAK's public key by instance and implementation ID. */
  taStore: 'cca/tastore.json',
  /** trustee's `rvstore.json`: the platform's reference values. */
  rvStore: 'cca/rvstore.json',
  /** `{"cca-verifier":{"type":"local","ta-store","rv-store"}}`: what CCA_CONFIG_FILE names. */
  verifierConfig: 'cca/config.json',
  /** The configfs-tsm report root (`BROKER_TSM_REPORT_ROOT`). */
  tsmReport: 'sys/kernel/config/tsm/report',
} as const);

/** How the realm answers; can be changed while it runs (`device.config`). */
export interface MockCcaConfig {
  /** 64 bytes: the Realm Personalization Value the host set at creation (zeros by default). */
  personalizationValue: Uint8Array;
}

export interface StartMockCcaDeviceOptions {
  readonly stateDir: string;
  readonly personalizationValue?: Uint8Array;
  /** Called when a request cannot be answered (the guest then waits for an outblob in vain). */
  readonly onError?: (err: unknown, dir: string) => void;
}

export interface MockCcaDevice {
  readonly stateDir: string;
  readonly tsmRoot: string;
  /** Environment that points the `cca` attester (and the attestation agent) at this realm. */
  readonly env: { readonly BROKER_TSM_REPORT_ROOT: string };
  readonly platform: TestCcaPlatform;
  readonly taStorePath: string;
  readonly rvStorePath: string;
  /** The CCA verifier configuration file (set CCA_CONFIG_FILE to it in the KBS's environment). */
  readonly verifierConfigPath: string;
  readonly config: MockCcaConfig;
  /** Tokens issued so far. */
  readonly requests: number;
  /** The token the realm would answer for `challenge` (tests). */
  token(challenge: Uint8Array): Buffer;
  close(): void;
}

async function readIfPresent(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/** The platform kept in `stateDir`, made (and its stores written) on first use. */
export async function loadOrCreateCcaPlatform(stateDir: string): Promise<TestCcaPlatform> {
  const cpakPath = join(stateDir, CCA_STATE_FILES.cpak);
  const rakPath = join(stateDir, CCA_STATE_FILES.rak);
  const [cpakPem, rakPem] = [await readIfPresent(cpakPath), await readIfPresent(rakPath)];
  let platform: TestCcaPlatform;
  if (cpakPem !== undefined && rakPem !== undefined) {
    try {
      platform = createTestCcaPlatform({ cpak: createPrivateKey(cpakPem), rak: createPrivateKey(rakPem) });
    } catch (err) {
      throw new MockTeeError('STATE_INVALID', `the CCA keys in ${stateDir} cannot be read`, { cause: err });
    }
  } else {
    platform = createTestCcaPlatform();
    await mkdir(join(stateDir, 'cca'), { recursive: true });
    const pem = (k: TestCcaPlatform['cpak']) => k.export({ type: 'pkcs8', format: 'pem' }) as string;
    await writeFile(rakPath, pem(platform.rak), { mode: 0o600 });
    await writeFile(cpakPath, pem(platform.cpak), { mode: 0o600 });
  }
  // The stores follow from the keys; written at every start so they always match them.
  const taStore = join(stateDir, CCA_STATE_FILES.taStore);
  const rvStore = join(stateDir, CCA_STATE_FILES.rvStore);
  await writeFile(taStore, platform.taStoreJson);
  await writeFile(rvStore, platform.rvStoreJson);
  await writeFile(
    join(stateDir, CCA_STATE_FILES.verifierConfig),
    `${JSON.stringify({ 'cca-verifier': { type: 'local', 'ta-store': taStore, 'rv-store': rvStore } }, null, 2)}\n`,
  );
  return platform;
}

function exactly(bytes: Uint8Array, len: number, what: string): Buffer {
  if (bytes.length !== len)
    throw new MockTeeError('USAGE', `${what} must be ${len} bytes, got ${bytes.length}`);
  return Buffer.from(bytes);
}

/** The `arm_cca_guest` provider callback: the kernel's challenge rule, then a token for it. */
export function ccaTsmProvider(platform: TestCcaPlatform, config: MockCcaConfig): TsmProviderCallback {
  return (request) => {
    const n = request.inblob.length;
    if (n < CCA_CHALLENGE_MIN || n > CCA_CHALLENGE_SIZE) {
      throw new MockTeeError(
        'USAGE',
        `arm_cca_guest needs a challenge of ${CCA_CHALLENGE_MIN} to ${CCA_CHALLENGE_SIZE} bytes, got ${n}`,
      );
    }
    return { outblob: platform.token(request.inblob, config.personalizationValue) };
  };
}

/** Starts serving the realm under `stateDir`. */
export async function startMockCcaDevice(options: StartMockCcaDeviceOptions): Promise<MockCcaDevice> {
  const { stateDir } = options;
  const platform = await loadOrCreateCcaPlatform(stateDir);
  const config: MockCcaConfig = {
    personalizationValue: exactly(
      options.personalizationValue ?? Buffer.alloc(CCA_CHALLENGE_SIZE),
      CCA_CHALLENGE_SIZE,
      'personalization value',
    ),
  };
  const tsmRoot = join(stateDir, CCA_STATE_FILES.tsmReport);
  // Folders left by an earlier run would be served again; start from an empty root.
  await rm(tsmRoot, { recursive: true, force: true });
  const responder = await ConfigfsTsmResponder.start({
    root: tsmRoot,
    provider: CCA_GUEST_PROVIDER,
    respond: ccaTsmProvider(platform, config),
    ...(options.onError !== undefined && { onError: options.onError }),
  });
  return {
    stateDir,
    tsmRoot,
    env: { BROKER_TSM_REPORT_ROOT: tsmRoot },
    platform,
    taStorePath: join(stateDir, CCA_STATE_FILES.taStore),
    rvStorePath: join(stateDir, CCA_STATE_FILES.rvStore),
    verifierConfigPath: join(stateDir, CCA_STATE_FILES.verifierConfig),
    config,
    get requests() {
      return responder.requests;
    },
    token: (challenge) => platform.token(challenge, config.personalizationValue),
    close: () => responder.close(),
  };
}
