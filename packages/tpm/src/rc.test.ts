import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { decodeResponseCode, TPM_CC, TPM_RC, TpmError } from './index.js';
import { requirePrograms } from './testing/swtpm.js';

const run = promisify(execFile);

describe('decodeResponseCode', () => {
  it('decodes format-1 codes with the handle, parameter or session they blame', () => {
    expect(decodeResponseCode(0x18b)).toMatchObject({
      format: 1,
      code: TPM_RC.HANDLE,
      handle: 1,
      name: 'TPM_RC_HANDLE',
    });
    expect(decodeResponseCode(0x28b)).toMatchObject({ handle: 2 });
    expect(decodeResponseCode(0x1c4)).toMatchObject({ code: TPM_RC.VALUE, parameter: 1 });
    expect(decodeResponseCode(0x5d5)).toMatchObject({ code: TPM_RC.SIZE, parameter: 5 });
    expect(decodeResponseCode(0x9a2)).toMatchObject({ code: TPM_RC.BAD_AUTH, session: 1 });
    expect(decodeResponseCode(0x98e).text).toBe(
      'TPM_RC_AUTH_FAIL, session 1: the authorization HMAC check failed and DA counter incremented',
    );
  });

  it('decodes format-0 errors, warnings, vendor codes and TSS layers', () => {
    expect(decodeResponseCode(0)).toMatchObject({ kind: 'success' });
    expect(decodeResponseCode(0x100)).toMatchObject({ kind: 'error', format: 0, name: 'TPM_RC_INITIALIZE' });
    expect(decodeResponseCode(0x14c)).toMatchObject({ code: TPM_RC.NV_DEFINED });
    expect(decodeResponseCode(0x922)).toMatchObject({
      kind: 'warning',
      code: TPM_RC.RETRY,
      name: 'TPM_RC_RETRY',
    });
    expect(decodeResponseCode(0x911)).toMatchObject({ name: 'TPM_RC_REFERENCE_H1' });
    expect(decodeResponseCode(0x500)).toMatchObject({ kind: 'vendor' });
    expect(decodeResponseCode(0x0001)).toMatchObject({ kind: 'tpm1.2' });
    expect(decodeResponseCode(0x0b0143)).toMatchObject({
      kind: 'layer',
      layer: 'resource manager (kernel)',
      name: 'TPM_RC_COMMAND_CODE',
    });
    expect(decodeResponseCode(0x17f)).toMatchObject({ name: undefined, description: 'unknown error' });
  });

  it('names the command in TpmError', () => {
    const err = new TpmError(0x28b, TPM_CC.NV_Read);
    expect(err.message).toBe(
      'TPM2_NV_Read failed: TPM_RC 0x28b (TPM_RC_HANDLE, handle 2: the handle is not correct for the use)',
    );
    expect(err.code).toBe(TPM_RC.HANDLE);
    expect(new TpmError(0x100, 0x1234).command).toBe('command 0x00001234');
  });

  it('agrees with tpm2_rc_decode on what is blamed and why', async () => {
    await requirePrograms('tpm2_rc_decode');
    const codes = [
      0x100, 0x101, 0x143, 0x146, 0x14a, 0x14b, 0x14c, 0x184, 0x18b, 0x28b, 0x1c4, 0x2d5, 0x1d5, 0x98e, 0x9a2,
      0xa8e, 0x902, 0x908, 0x90a, 0x910, 0x91e, 0x921, 0x922, 0x923, 0x197, 0x1a6, 0x1a7, 0x19b, 0x1c3, 0x9a2,
    ];
    for (const rc of codes) {
      const { stdout } = await run('tpm2_rc_decode', [`0x${rc.toString(16)}`]);
      // e.g. "tpm:handle(1):the handle is not correct for the use" or "tpm:warn(2.0): out of memory ..."
      const m = /^tpm:(\w+)\(([\d.]+)\):\s*(.*)$/.exec(stdout.trim());
      expect(m, stdout).not.toBeNull();
      const [, kind, num, text] = m!;
      const d = decodeResponseCode(rc);
      // Same words; punctuation differs between the specification and tpm2-tss ("self-tests", "Shutdown(STATE)").
      const norm = (t: string) => t.toLowerCase().replace(/[^a-z0-9]/g, '');
      expect(norm(d.description), `0x${rc.toString(16)}`).toBe(norm(text!));
      if (kind === 'handle') expect(d.handle).toBe(Number(num));
      else if (kind === 'parameter') expect(d.parameter).toBe(Number(num));
      else if (kind === 'session') expect(d.session).toBe(Number(num));
      else if (kind === 'warn') expect(d.kind).toBe('warning');
      else expect(d.kind).toBe('error');
    }
  });
});
