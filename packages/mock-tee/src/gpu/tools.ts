// What the simulated GPU's stand-ins for NVIDIA's command-line tools answer: `nvidia-smi`
// (`conf-compute -f`, `-grs`, `-srs`, `-L`) and `nvattest collect-evidence`, with the texts and the
// JSON the real tools print (see the attester README for the exact forms parsed). Pure functions
// of the arguments and the device's state, so tests can check them without processes.
import { randomBytes } from 'node:crypto';
import type { TestDevice } from '@broker/verifier/testing';

/** NVML's confidential-compute feature states as `nvidia-smi conf-compute -f` prints them. */
export type CcStatus = 'ON' | 'OFF';

/** The simulated GPU as the tools see it; every member can be changed while the device runs. */
export interface MockGpuConfig {
  /** False: the driver finds no GPU (`No devices were found`). */
  present: boolean;
  ccStatus: CcStatus;
  /** The ready state `conf-compute -srs` sets and `-grs` reads. */
  ready: boolean;
}

/** What the GPU is: fixed for the device's life (the report's opaque data carries the same versions). */
export interface MockGpuIdentity {
  readonly uuid: string;
  readonly name: string;
  readonly driverVersion: string;
  /** As nvidia-smi prints it, e.g. `96.00.9F.00.01`. */
  readonly vbiosVersion: string;
}

export interface ToolAnswer {
  readonly stdout: string;
  readonly stderr?: string;
  readonly code: number;
}

export type MockGpuTool = 'nvidia-smi' | 'nvattest';

/** nvidia-smi's exit codes for the cases simulated (NVSMI's documented return values). */
export const NVIDIA_SMI_EXIT = Object.freeze({ ok: 0, invalidArgument: 2, notFound: 6 } as const);

const NO_DEVICES: ToolAnswer = { stdout: 'No devices were found\n', code: NVIDIA_SMI_EXIT.notFound };

export function nvidiaSmi(argv: readonly string[], config: MockGpuConfig, id: MockGpuIdentity): ToolAnswer {
  const args = argv.join(' ');
  if (args === '-L' || args === '--list-gpus') {
    if (!config.present) return NO_DEVICES;
    return { stdout: `GPU 0: ${id.name} (UUID: ${id.uuid})\n`, code: 0 };
  }
  if (argv[0] === 'conf-compute') {
    if (!config.present) return NO_DEVICES;
    const sub = argv.slice(1).join(' ');
    if (sub === '-f' || sub === '--get-cc-feature')
      return { stdout: `CC status: ${config.ccStatus}\n`, code: 0 };
    if (sub === '-grs' || sub === '--get-gpus-ready-state') {
      return {
        stdout: `Confidential Compute GPUs Ready state: ${config.ready ? 'ready' : 'not-ready'}\n`,
        code: 0,
      };
    }
    const set = /^(?:-srs|--set-gpus-ready-state) ([01])$/.exec(sub);
    if (set !== null) {
      if (config.ccStatus === 'OFF') {
        return { stdout: 'Setting GPUs ready state is not supported when CC is off\n', code: 3 };
      }
      config.ready = set[1] === '1';
      return { stdout: `Confidential Compute GPUs Ready state set to: ${set[1]}\n`, code: 0 };
    }
  }
  return {
    stdout: '',
    stderr: "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n",
    code: NVIDIA_SMI_EXIT.invalidArgument,
  };
}

function nvattestFailure(code: number, message: string): ToolAnswer {
  return {
    stdout: `${JSON.stringify({ evidences: [], result_code: code, result_message: message })}\n`,
    code: 1,
  };
}

/** `nvattest collect-evidence [--device gpu] [--nonce HEX]` and `nvattest version`. */
export function nvattest(
  argv: readonly string[],
  config: MockGpuConfig,
  id: MockGpuIdentity,
  device: TestDevice,
): ToolAnswer {
  if (argv.length === 1 && argv[0] === 'version') {
    return { stdout: `${JSON.stringify({ nvattest: '1.0' })}\n`, code: 0 };
  }
  if (argv[0] !== 'collect-evidence') {
    return { stdout: '', stderr: `The following argument was not expected: ${argv[0] ?? ''}\n`, code: 109 };
  }
  let deviceKind = 'gpu';
  let nonceHex: string | undefined;
  for (let i = 1; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) return { stdout: '', stderr: `${flag} requires an argument\n`, code: 109 };
    if (flag === '--device') deviceKind = value;
    else if (flag === '--nonce') nonceHex = value;
    else return { stdout: '', stderr: `The following argument was not expected: ${flag}\n`, code: 109 };
  }
  if (deviceKind !== 'gpu' && deviceKind !== 'switch' && deviceKind !== 'nvswitch') {
    return { stdout: '', stderr: `--device: ${deviceKind} not in {gpu,switch}\n`, code: 109 };
  }
  if (nonceHex !== undefined && !/^[0-9a-fA-F]{64}$/.test(nonceHex)) {
    return nvattestFailure(3, 'Invalid argument: the nonce must be 32 bytes of hex');
  }
  if (deviceKind !== 'gpu') return nvattestFailure(11, 'NSCQ not available: no NVSwitch found');
  if (!config.present) return nvattestFailure(12, 'NVML error: no GPU found');
  if (config.ccStatus === 'OFF') {
    return nvattestFailure(13, 'GPU is not in confidential computing mode');
  }
  const nonce = nonceHex !== undefined ? Buffer.from(nonceHex, 'hex') : randomBytes(32);
  const evidence = {
    version: '1.0',
    arch: 'HOPPER',
    nonce: nonce.toString('hex'),
    vbios_version: id.vbiosVersion,
    driver_version: id.driverVersion,
    evidence: device.report(nonce).toString('base64'),
    certificate: Buffer.from(device.chainPem).toString('base64'),
  };
  return {
    stdout: `${JSON.stringify({ evidences: [evidence], result_code: 0, result_message: 'Ok' }, null, 2)}\n`,
    code: 0,
  };
}
