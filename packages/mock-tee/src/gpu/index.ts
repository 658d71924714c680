// A simulated NVIDIA Hopper GPU in confidential-computing mode, for the attester's `nvidia`
// module: a device identity chain under a test root (not NVIDIA's, so a verifier trusts it only
// when configured to), SPDM GET_MEASUREMENTS reports signed ECDSA P-384 by its attestation key
// over the requested nonce, and stand-ins for `nvidia-smi` and `nvattest` that ask this device
// over a Unix socket. The chain and key are kept in the state folder across restarts.
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { isSea } from 'node:sea';
import { createTestDevice, type TestDevice, testDeviceFromParts } from '@broker/verifier/testing';
import { MockTeeError } from '../errors.js';
import { toolScript, toolWrapper } from './client.js';
import {
  type CcStatus,
  type MockGpuConfig,
  type MockGpuIdentity,
  type MockGpuTool,
  nvattest,
  nvidiaSmi,
  type ToolAnswer,
} from './tools.js';

export { GPU_TOOL_COMMAND, runGpuTool } from './client.js';
export {
  type CcStatus,
  type MockGpuConfig,
  type MockGpuIdentity,
  type MockGpuTool,
  NVIDIA_SMI_EXIT,
  nvattest,
  nvidiaSmi,
  type ToolAnswer,
} from './tools.js';

/** Layout of the GPU's part of a state folder. */
export const GPU_STATE_FILES = Object.freeze({
  /** Attestation certificate, intermediate, test root (PEM). */
  chain: 'gpu/chain.pem',
  /** The attestation key (PKCS#8 PEM, 0600). */
  attestationKey: 'gpu/attestation-key.pem',
  /** The test root alone: what a KBS lists in `nvidia_verifier.trusted_root_paths`. */
  root: 'gpu/root.pem',
  socket: 'gpu/gpu.sock',
  /** `nvidia-smi` and `nvattest` stand-ins. */
  bin: 'bin',
} as const);

/** The attester's variables naming the tools' paths (it looks them up on PATH otherwise). */
export const GPU_TOOL_ENV = Object.freeze({ 'nvidia-smi': 'BROKER_NVIDIA_SMI', nvattest: 'BROKER_NVATTEST' });

export const DEFAULT_GPU_DRIVER_VERSION = '550.90.07';
const MAX_REQUEST_BYTES = 64 * 1024;

export interface StartMockGpuOptions {
  readonly stateDir: string;
  /** `ON` by default. */
  readonly ccStatus?: CcStatus;
  /** For a new device only: the driver version its reports carry. */
  readonly driverVersion?: string;
  readonly uuid?: string;
  /**
   * The Node binary the stand-in scripts run on; default this process's. In a single executable
   * the stand-ins are shell scripts that run the executable's own `mock-tee gpu-tool` instead.
   */
  readonly nodePath?: string;
  /** Called when a request cannot be answered. */
  readonly onError?: (err: unknown) => void;
}

export interface MockGpuCall {
  readonly tool: MockGpuTool;
  readonly argv: readonly string[];
}

export interface MockGpu {
  readonly stateDir: string;
  /** Folder with the `nvidia-smi` and `nvattest` stand-ins. */
  readonly binDir: string;
  /** `{ BROKER_NVIDIA_SMI, BROKER_NVATTEST }`: set it in the attestation agent's environment. */
  readonly env: { readonly BROKER_NVIDIA_SMI: string; readonly BROKER_NVATTEST: string };
  readonly device: TestDevice;
  readonly identity: MockGpuIdentity;
  /** The test root (PEM) and its file, for a verifier's trusted roots. */
  readonly rootPem: string;
  readonly rootPath: string;
  readonly config: MockGpuConfig;
  /** Every tool run answered so far, in order. */
  readonly calls: readonly MockGpuCall[];
  /** Answers the next run of `tool` with `answer` instead of simulating it. */
  once(tool: MockGpuTool, answer: ToolAnswer): void;
  close(): Promise<void>;
}

/** The GPU kept in `stateDir`, made (and written) on first use. */
export async function loadOrCreateGpuDevice(
  stateDir: string,
  options: { readonly driverVersion?: string } = {},
): Promise<TestDevice> {
  const driver = { driverVersion: options.driverVersion ?? DEFAULT_GPU_DRIVER_VERSION };
  const chainPath = join(stateDir, GPU_STATE_FILES.chain);
  const keyPath = join(stateDir, GPU_STATE_FILES.attestationKey);
  let chainPem: string | undefined;
  try {
    chainPem = await readFile(chainPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (chainPem !== undefined) {
    try {
      return testDeviceFromParts({ chainPem, attestationKeyPem: await readFile(keyPath, 'utf8') }, driver);
    } catch (err) {
      throw new MockTeeError('STATE_INVALID', `the GPU in ${stateDir} cannot be restored`, { cause: err });
    }
  }
  const device = createTestDevice(driver);
  await mkdir(join(stateDir, 'gpu'), { recursive: true });
  await writeFile(keyPath, device.parts.attestationKeyPem, { mode: 0o600 });
  await writeFile(join(stateDir, GPU_STATE_FILES.root), device.rootPem);
  // The chain last: its presence says the device is complete.
  await writeFile(chainPath, device.chainPem);
  return device;
}

function parseCall(line: string): MockGpuCall {
  const msg = JSON.parse(line) as { tool?: unknown; argv?: unknown };
  if (
    (msg.tool !== 'nvidia-smi' && msg.tool !== 'nvattest') ||
    !Array.isArray(msg.argv) ||
    !msg.argv.every((a) => typeof a === 'string')
  ) {
    throw new MockTeeError('USAGE', 'a GPU tool request names a known tool and string arguments');
  }
  return { tool: msg.tool, argv: msg.argv as string[] };
}

/** Starts the GPU: its tools answer until `close()`. */
export async function startMockGpu(options: StartMockGpuOptions): Promise<MockGpu> {
  const { stateDir } = options;
  const device = await loadOrCreateGpuDevice(stateDir, {
    ...(options.driverVersion !== undefined && { driverVersion: options.driverVersion }),
  });
  const identity: MockGpuIdentity = {
    uuid: options.uuid ?? 'GPU-5e1f7c1a-0000-4000-8000-000000000001',
    name: 'NVIDIA H100 80GB HBM3',
    driverVersion: options.driverVersion ?? DEFAULT_GPU_DRIVER_VERSION,
    vbiosVersion: '96.00.9F.00.01',
  };
  const config: MockGpuConfig = { present: true, ccStatus: options.ccStatus ?? 'ON', ready: false };
  const calls: MockGpuCall[] = [];
  const pending = new Map<MockGpuTool, ToolAnswer[]>();

  const answer = (call: MockGpuCall): ToolAnswer => {
    calls.push(call);
    const queued = pending.get(call.tool)?.shift();
    if (queued !== undefined) return queued;
    return call.tool === 'nvidia-smi'
      ? nvidiaSmi(call.argv, config, identity)
      : nvattest(call.argv, config, identity, device);
  };

  const serve = (socket: Socket) => {
    let buffered = '';
    let answered = false;
    socket.setEncoding('utf8');
    socket.on('error', () => undefined);
    socket.on('data', (chunk: string) => {
      if (answered) return;
      buffered += chunk;
      if (buffered.length > MAX_REQUEST_BYTES) socket.destroy();
      const end = buffered.indexOf('\n');
      if (end < 0) return;
      answered = true;
      let reply: ToolAnswer;
      try {
        reply = answer(parseCall(buffered.slice(0, end)));
      } catch (err) {
        options.onError?.(err);
        reply = { stdout: '', stderr: `simulated GPU: ${(err as Error).message}\n`, code: 70 };
      }
      socket.end(JSON.stringify(reply));
    });
  };

  const socketPath = join(stateDir, GPU_STATE_FILES.socket);
  await rm(socketPath, { force: true });
  const server: Server = createServer(serve);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });

  const binDir = join(stateDir, GPU_STATE_FILES.bin);
  await mkdir(binDir, { recursive: true });
  // A single executable cannot run a script: its stand-ins run its own `mock-tee gpu-tool`.
  const viaExecutable = options.nodePath === undefined && isSea();
  for (const tool of ['nvidia-smi', 'nvattest'] as const) {
    const path = join(binDir, tool);
    await writeFile(
      path,
      viaExecutable
        ? toolWrapper(tool, socketPath, process.execPath)
        : toolScript(tool, socketPath, options.nodePath ?? process.execPath),
    );
    await chmod(path, 0o755);
  }

  return {
    stateDir,
    binDir,
    env: { BROKER_NVIDIA_SMI: join(binDir, 'nvidia-smi'), BROKER_NVATTEST: join(binDir, 'nvattest') },
    device,
    identity,
    rootPem: device.rootPem,
    rootPath: join(stateDir, GPU_STATE_FILES.root),
    config,
    calls,
    once(tool, reply) {
      const queue = pending.get(tool) ?? [];
      queue.push(reply);
      pending.set(tool, queue);
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
      }),
  };
}
