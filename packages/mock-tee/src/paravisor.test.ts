// The paravisor's decisions that need no TPM behind it (the device tests run it over swtpm).
import {
  marshalCommand,
  marshalResponse,
  passwordSession,
  TPM_CC,
  TPM_RH,
  type TpmTransport,
} from '@broker/tpm';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { HCL_REPORT_NV_INDEX, HCL_USER_DATA_NV_INDEX } from './hcl.js';
import { Paravisor } from './paravisor.js';

function fakeUpstream(answer: (command: Uint8Array) => Uint8Array = () => marshalResponse({})) {
  const sent: Uint8Array[] = [];
  const transport: TpmTransport = {
    async send(command) {
      sent.push(command);
      return answer(command);
    },
    async close() {},
  };
  return { sent, transport };
}

const rc = (b: Uint8Array) => Buffer.from(b).readUInt32BE(6);
const silent = pino({ level: 'silent' });

describe('Paravisor.handle without a TPM', () => {
  it('answers malformed frames itself and never forwards them', async () => {
    const { sent, transport } = fakeUpstream();
    const p = new Paravisor({ upstream: transport, logger: silent });
    // Says 12 bytes, has 10.
    expect(rc(await p.handle(Buffer.from([0x80, 0x01, 0, 0, 0, 0x0c, 0, 0, 1, 0x7e])))).toBe(0x142);
    // Size field 0 on 12 bytes.
    expect(rc(await p.handle(Buffer.alloc(12)))).toBe(0x142);
    // Shorter than a header.
    expect(rc(await p.handle(Buffer.alloc(4)))).toBe(0x142);
    const unknown = Buffer.from(marshalCommand({ code: 0x1234 }));
    expect(rc(await p.handle(unknown))).toBe(0x143);
    expect(sent.length).toBe(0);
  });

  it('refuses the platform hierarchy in any handle position, naming the handle', async () => {
    const { sent, transport } = fakeUpstream();
    const p = new Paravisor({ upstream: transport, logger: silent });
    const first = marshalCommand({
      code: TPM_CC.NV_UndefineSpace,
      handles: [TPM_RH.PLATFORM, HCL_REPORT_NV_INDEX],
      sessions: [passwordSession()],
    });
    expect(rc(await p.handle(Buffer.from(first)))).toBe(0x185);
    // NV_UndefineSpaceSpecial(nvIndex, platform): the platform is handle 2.
    const second = marshalCommand({ code: 0x11f, handles: [HCL_REPORT_NV_INDEX, TPM_RH.PLATFORM] });
    expect(rc(await p.handle(Buffer.from(second)))).toBe(0x285);
    expect(sent.length).toBe(0);
  });

  it("forwards other commands as they are and returns swtpm's answer", async () => {
    const { sent, transport } = fakeUpstream(() => marshalResponse({ rc: 0x18b }));
    const p = new Paravisor({ upstream: transport, logger: silent });
    const cmd = Buffer.from(marshalCommand({ code: TPM_CC.ReadPublic, handles: [0x81000003] }));
    expect(rc(await p.handle(cmd))).toBe(0x18b);
    expect(sent.map((s) => Buffer.from(s).equals(cmd))).toEqual([true]);
  });

  it('keeps the user-data write successful when no report can be issued', async () => {
    const { transport } = fakeUpstream();
    const p = new Paravisor({ upstream: transport, logger: silent });
    const write = marshalCommand({
      code: TPM_CC.NV_Write,
      handles: [TPM_RH.OWNER, HCL_USER_DATA_NV_INDEX],
      sessions: [passwordSession()],
      parameters: Buffer.from([0, 1, 0xaa, 0, 0]),
    });
    expect(rc(await p.handle(Buffer.from(write)))).toBe(0);
    expect(p.report).toBeUndefined();
    expect(p.reportCount).toBe(0);
  });

  it('has no report to read before the first one is issued', async () => {
    const { sent, transport } = fakeUpstream();
    const p = new Paravisor({ upstream: transport, logger: silent });
    const read = marshalCommand({
      code: TPM_CC.NV_Read,
      handles: [TPM_RH.OWNER, HCL_REPORT_NV_INDEX],
      sessions: [passwordSession()],
      parameters: Buffer.from([0, 16, 0, 0]),
    });
    expect(rc(await p.handle(Buffer.from(read)))).toBe(0x14a);
    expect(sent.length).toBe(0);
  });
});
