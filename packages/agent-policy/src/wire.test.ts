import { describe, expect, it } from 'vitest';
import { REQUEST_TYPES } from './agent-proto.js';
import { policyInputFromBytes } from './requests.js';
import { kataRequests } from './testing/helpers.js';
import {
  decodeRequest,
  encodeRequest,
  RequestDecodeError,
  RequestEncodeError,
  rustFieldName,
  rustVariantName,
  toPolicyJson,
} from './wire.js';

// biome-ignore lint/suspicious/noExplicitAny: tests walk into decoded JSON of known shape
type J = any;

/** Wire-format building blocks for hand-made messages. */
function varint(n: bigint | number): number[] {
  let x = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    let b = Number(x & 0x7fn);
    x >>= 7n;
    if (x !== 0n) b |= 0x80;
    out.push(b);
  } while (x !== 0n);
  return out;
}
const tag = (id: number, wt: number) => varint(id * 8 + wt);
const len = (id: number, body: number[]) => [...tag(id, 2), ...varint(body.length), ...body];
const str = (id: number, s: string) => len(id, [...new TextEncoder().encode(s)]);
const bytes = (...parts: number[][]) => new Uint8Array(parts.flat());

function decodeError(type: string, b: Uint8Array): string {
  try {
    decodeRequest(type, b);
  } catch (e) {
    expect(e).toBeInstanceOf(RequestDecodeError);
    return (e as Error).message;
  }
  throw new Error('expected a decode error');
}

describe('names', () => {
  it('escapes Rust keywords as rust-protobuf does and camel-cases oneof variants', () => {
    expect(rustFieldName('type')).toBe('type_');
    expect(rustFieldName('container_id')).toBe('container_id');
    expect(rustFieldName('OCI')).toBe('OCI');
    expect(rustVariantName('errnoret')).toBe('Errnoret');
    expect(rustVariantName('some_field_name')).toBe('SomeFieldName');
  });
});

describe('decodeRequest: the serde form kata gives the policy', () => {
  it('fills every field: defaults, [] for repeated, null for unset messages', () => {
    expect(decodeRequest('CreateContainerRequest', new Uint8Array(0))).toEqual({
      container_id: '',
      exec_id: '',
      string_user: null,
      devices: [],
      storages: [],
      OCI: null,
      sandbox_pidns: false,
      shared_mounts: [],
      stdin_port: 0,
      stdout_port: 0,
      stderr_port: 0,
    });
  });

  it('decodes every request type of the service from empty bytes', () => {
    for (const t of REQUEST_TYPES) expect(decodeRequest(t, new Uint8Array(0))).toBeTypeOf('object');
    expect(REQUEST_TYPES).toContain('ReadStreamRequest');
    expect(REQUEST_TYPES).toHaveLength(41);
  });

  it('uses Rust field names (type → type_) and verbatim proto names elsewhere', () => {
    const { bytes: b } = encodeRequest('CreateContainerRequest', {
      devices: [{ id: 'd', type_: 'blk', vm_path: '/dev/vda', container_path: '/dev/x', options: ['a'] }],
      OCI: { Mounts: [{ destination: '/d', source: '/s', type_: 'bind', options: ['rbind'] }] },
    });
    const d = decodeRequest('CreateContainerRequest', b) as J;
    expect(d.devices[0]).toEqual({
      id: 'd',
      type_: 'blk',
      vm_path: '/dev/vda',
      container_path: '/dev/x',
      options: ['a'],
    });
    expect(d.OCI.Mounts[0]).toEqual({ destination: '/d', source: '/s', type_: 'bind', options: ['rbind'] });
    expect(d.OCI.Process).toBeNull();
    expect(d.OCI.Annotations).toEqual({});
  });

  it('writes a oneof as {"<Variant>": value} when set (even to 0) and null when not', () => {
    const syscall = (errno: number[]) => len(4, [...str(1, 'mkdir'), ...str(2, 'SCMP_ACT_ERRNO'), ...errno]);
    const spec = (sc: number[]) => len(6, len(8, len(8, sc)));
    const set0 = decodeRequest('CreateContainerRequest', bytes(spec(syscall([...tag(3, 0), 0])))) as J;
    expect(set0.OCI.Linux.Seccomp.Syscalls[0]).toEqual({
      Names: ['mkdir'],
      Action: 'SCMP_ACT_ERRNO',
      ErrnoRet: { Errnoret: 0 },
      Args: [],
    });
    const unset = decodeRequest('CreateContainerRequest', bytes(spec(syscall([])))) as J;
    expect(unset.OCI.Linux.Seccomp.Syscalls[0].ErrnoRet).toBeNull();
    const { bytes: again } = encodeRequest('CreateContainerRequest', {
      OCI: { Linux: { Seccomp: { Syscalls: [{ Names: ['x'], ErrnoRet: { Errnoret: 38 } }] } } },
    });
    expect(
      (decodeRequest('CreateContainerRequest', again) as J).OCI.Linux.Seccomp.Syscalls[0].ErrnoRet,
    ).toEqual({
      Errnoret: 38,
    });
  });

  it('writes proto3 optional fields as null when absent and as given when present', () => {
    expect(decodeRequest('MemAgentMemcgConfig', new Uint8Array(0))).toEqual({
      disabled: null,
      swap: null,
      swappiness_max: null,
      period_secs: null,
      period_psi_percent_limit: null,
      eviction_psi_percent_limit: null,
      eviction_run_aging_count_min: null,
    });
    const b = bytes(tag(2, 0), [0], tag(4, 0), varint(60));
    expect(decodeRequest('MemAgentMemcgConfig', b)).toMatchObject({
      disabled: null,
      swap: false,
      period_secs: 60,
    });
  });

  it('keeps enums as integers, including values the schema does not name', () => {
    const b = bytes(
      len(1, [...len(3, [...tag(1, 0), 1, ...str(2, 'fe80::1')]), ...len(3, [...tag(1, 0), 7])]),
    );
    const d = decodeRequest('UpdateInterfaceRequest', b) as J;
    expect(d.interface.IPAddresses.map((a: J) => a.family)).toEqual([1, 7]);
    const neg = decodeRequest(
      'UpdateInterfaceRequest',
      bytes(len(1, len(3, [...tag(1, 0), ...varint(-2)]))),
    ) as J;
    expect(neg.interface.IPAddresses[0].family).toBe(-2);
  });

  it('keeps 64-bit integers exact', () => {
    const b = bytes(tag(1, 0), varint(2n ** 63n - 1n), tag(2, 0), varint(-1));
    expect(decodeRequest('SetGuestDateTimeRequest', b)).toEqual({ Sec: 9223372036854775807n, Usec: -1 });
    const probe = bytes(len(1, [...varint(2n ** 64n - 1n), ...varint(4096)]));
    expect(decodeRequest('MemHotplugByProbeRequest', probe)).toEqual({
      memHotplugProbeAddr: [18446744073709551615n, 4096],
    });
  });

  it('gives bytes as Uint8Array, and toPolicyJson turns them into number arrays as serde does', () => {
    const d = decodeRequest('WriteStreamRequest', bytes(str(1, 'c'), len(3, [0, 255, 10])));
    expect(d.data).toEqual(new Uint8Array([0, 255, 10]));
    expect(toPolicyJson(d)).toEqual({ container_id: 'c', exec_id: '', data: [0, 255, 10] });
  });

  it('keeps map keys such as __proto__ as plain members', () => {
    const entry = len(7, [...str(1, '__proto__'), ...str(2, 'x')]);
    const d = decodeRequest('CreateContainerRequest', bytes(len(6, entry))) as J;
    expect(Object.getPrototypeOf(d.OCI.Annotations)).toBe(Object.prototype);
    expect(Object.keys(d.OCI.Annotations)).toEqual(['__proto__']);
    expect(Object.getOwnPropertyDescriptor(d.OCI.Annotations, '__proto__')?.value).toBe('x');
    const policyJson = toPolicyJson(d) as J;
    expect(Object.getOwnPropertyDescriptor(policyJson.OCI.Annotations, '__proto__')?.value).toBe('x');
  });

  it('keeps a leading byte-order mark in strings (Rust does)', () => {
    const d = decodeRequest('StartContainerRequest', bytes(len(1, [0xef, 0xbb, 0xbf, 0x61])));
    expect(d.container_id).toBe('\ufeffa');
  });

  it('accepts packed and unpacked repeated scalars alike', () => {
    const packed = bytes(len(1, [1, 2, ...varint(300)]));
    const unpacked = bytes(tag(1, 0), [1], tag(1, 0), [2], tag(1, 0), varint(300));
    expect(decodeRequest('AddSwapRequest', packed)).toEqual({ PCIPath: [1, 2, 300] });
    expect(decodeRequest('AddSwapRequest', unpacked)).toEqual({ PCIPath: [1, 2, 300] });
  });

  it('skips unknown fields of every wire type', () => {
    const b = bytes(
      tag(9, 0),
      varint(5),
      tag(10, 1),
      [1, 2, 3, 4, 5, 6, 7, 8],
      str(11, 'x'),
      tag(12, 5),
      [1, 2, 3, 4],
      str(1, 'cid'),
    );
    expect(decodeRequest('StartContainerRequest', b)).toEqual({ container_id: 'cid' });
  });

  it("equals the inputs kata recorded under the 3.3 profile, apart from the Microsoft fork's missing ports", () => {
    // The regorus suites were recorded with agents of the kata 3.3–3.14 period. Four of them come from
    // Microsoft's fork of that time, whose agent.proto lacked the passfd stdio ports (upstream 3.3.0).
    const versionSkew = new Set([
      'CreateContainerRequest.stdin_port',
      'CreateContainerRequest.stdout_port',
      'CreateContainerRequest.stderr_port',
      'ExecProcessRequest.stdin_port',
      'ExecProcessRequest.stdout_port',
      'ExecProcessRequest.stderr_port',
    ]);
    let compared = 0;
    for (const suite of [
      'k8s-policy-job',
      'k8s-policy-rc',
      'pod-cm2',
      'pod-lifecycle',
      'pod-persistent-volumes',
      'web',
    ]) {
      for (const [ep, recorded] of kataRequests(suite)) {
        if (ep === 'AllowRequestsFailingPolicy' || ep === 'CopyFileRequest') continue;
        const { bytes: b, ignored } = encodeRequest(ep, recorded, '3.3');
        const decoded = toPolicyJson(decodeRequest(ep, b, '3.3'));
        const strip = (v: unknown, path: string): unknown => {
          if (Array.isArray(v)) return v.map((x) => strip(x, path));
          if (v && typeof v === 'object') {
            return Object.fromEntries(
              Object.entries(v)
                .filter(([k]) => !versionSkew.has(`${path}.${k}`))
                .map(([k, x]) => [k, strip(x, `${path}.${k}`)]),
            );
          }
          return v;
        };
        expect(strip(decoded, ep), `${suite} ${ep}`).toEqual(strip(recorded, ep));
        for (const f of ignored) expect(versionSkew.has(f.replace(/\[\d+\]/g, '')), f).toBe(true);
        compared++;
      }
    }
    expect(compared).toBe(74);
  });
});

describe('agent.proto profiles', () => {
  const storage = len(3, [...str(1, 'blk'), ...str(6, '/m'), ...tag(8, 0), 1]);

  it('current has Storage.shared; 3.3 has no such field, so it is absent from the input, not false', () => {
    const cur = decodeRequest('CreateSandboxRequest', bytes(storage)) as J;
    expect(cur.storages[0].shared).toBe(true);
    const empty = decodeRequest('CreateSandboxRequest', bytes(len(3, str(1, 'blk')))) as J;
    expect(empty.storages[0].shared).toBe(false);
    const old = decodeRequest('CreateSandboxRequest', bytes(storage), '3.3') as J;
    // Field 8 is unknown to a 3.3 agent: skipped, as rust-protobuf skips it.
    expect(Object.keys(old.storages[0])).toEqual([
      'driver',
      'driver_options',
      'source',
      'fstype',
      'options',
      'mount_point',
      'fs_group',
    ]);
    expect(old.storages[0].mount_point).toBe('/m');
    const enc = encodeRequest('CreateSandboxRequest', { storages: [{ driver: 'x', shared: true }] }, '3.3');
    expect(enc.ignored).toEqual(['CreateSandboxRequest.storages[0].shared']);
  });

  it('3.3 names Interface field 6 pciPath and has no Route flags or mtu', () => {
    const iface = bytes(len(1, [...str(1, 'eth0'), ...str(6, '01/02')]));
    expect((decodeRequest('UpdateInterfaceRequest', iface) as J).interface.devicePath).toBe('01/02');
    const old = decodeRequest('UpdateInterfaceRequest', iface, '3.3') as J;
    expect(old.interface.pciPath).toBe('01/02');
    expect(Object.hasOwn(old.interface, 'devicePath')).toBe(false);
    const route = bytes(
      len(1, len(1, [...str(1, '10.0.0.0/8'), ...tag(7, 0), 4, ...tag(8, 0), ...varint(1400)])),
    );
    expect((decodeRequest('UpdateRoutesRequest', route) as J).routes.Routes[0]).toMatchObject({
      flags: 4,
      mtu: 1400,
    });
    const oldRoute = (decodeRequest('UpdateRoutesRequest', route, '3.3') as J).routes.Routes[0];
    expect(oldRoute.dest).toBe('10.0.0.0/8');
    expect(Object.hasOwn(oldRoute, 'flags') || Object.hasOwn(oldRoute, 'mtu')).toBe(false);
  });

  it('3.3 gives the policy the whole CopyFileRequest (data included); current reduces it', () => {
    const link = encodeRequest('CopyFileRequest', {
      path: '/run/x/link',
      file_mode: 0o120777,
      data: [...new TextEncoder().encode('..data/f')],
    }).bytes;
    expect(policyInputFromBytes('CopyFileRequest', link)).toMatchObject({
      file_type: 'Symlink',
      symlink_target: '..data/f',
    });
    const old = policyInputFromBytes('CopyFileRequest', link, '3.3') as J;
    expect(old.data).toEqual([...new TextEncoder().encode('..data/f')]);
    expect(Object.hasOwn(old, 'file_type') || Object.hasOwn(old, 'symlink_target')).toBe(false);
    expect(old.path).toBe('/run/x/link');
  });

  it('keeps the strict checks in an older profile', () => {
    expect(() =>
      decodeRequest('CreateSandboxRequest', bytes(len(3, [...str(1, 'a'), ...str(1, 'b')])), '3.3'),
    ).toThrow(RequestDecodeError);
  });
});

describe('decodeRequest refuses encodings rust-protobuf could read differently', () => {
  it('a known field with another wire type (rust-protobuf would skip it as unknown)', () => {
    expect(decodeError('StartContainerRequest', bytes(tag(1, 0), [5]))).toMatch(/unexpected wire type 0/);
    expect(decodeError('RemoveContainerRequest', bytes(tag(2, 2), [1, 1]))).toMatch(/unexpected wire type 2/);
  });

  it('a singular field given twice (rust-protobuf merges messages, decoders differ)', () => {
    expect(decodeError('StartContainerRequest', bytes(str(1, 'a'), str(1, 'b')))).toMatch(/more than once/);
    const spec = len(6, str(1, '1.0'));
    expect(decodeError('CreateContainerRequest', bytes(spec, spec))).toMatch(
      /OCI: field given more than once/,
    );
  });

  it('32-bit and boolean varints outside their range', () => {
    expect(decodeError('RemoveContainerRequest', bytes(tag(2, 0), varint(2n ** 32n)))).toMatch(
      /uint32 value out/,
    );
    expect(decodeError('CopyFileRequest', bytes(tag(5, 0), varint(2n ** 31n)))).toMatch(/int32 value out/);
    expect(decodeError('GetIPTablesRequest', bytes(tag(1, 0), [2]))).toMatch(/neither 0 nor 1/);
    expect(decodeError('GetIPTablesRequest', bytes(tag(1, 0), varint(2n ** 32n)))).toMatch(/neither 0 nor 1/);
    expect(decodeRequest('CopyFileRequest', bytes(tag(5, 0), varint(-5))).uid).toBe(-5);
  });

  it('invalid UTF-8 in a string', () => {
    expect(decodeError('StartContainerRequest', bytes(len(1, [0xc3, 0x28])))).toMatch(/invalid UTF-8/);
    expect(decodeError('StartContainerRequest', bytes(len(1, [0xed, 0xa0, 0x80])))).toMatch(/invalid UTF-8/);
  });

  it('truncation, overlong varints, field number 0 and groups', () => {
    expect(decodeError('StartContainerRequest', bytes(tag(1, 2), [10], [0x61]))).toMatch(/truncated field/);
    expect(decodeError('StartContainerRequest', bytes([0x80]))).toMatch(/truncated varint/);
    expect(decodeError('SetGuestDateTimeRequest', bytes(tag(1, 0), Array(10).fill(0xff), [1]))).toMatch(
      /overflows|longer/,
    );
    expect(decodeError('StartContainerRequest', bytes([0x02, 0x00]))).toMatch(/field number 0/);
    expect(decodeError('StartContainerRequest', bytes(tag(9, 3)))).toMatch(/wire type 3/);
    expect(decodeError('AddSwapRequest', bytes(len(1, [0x80])))).toMatch(/truncated varint/);
  });

  it('random bytes either decode or fail with RequestDecodeError, never anything else', () => {
    let seed = 0x9e3779b9;
    const rand = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return (seed >>> 0) / 2 ** 32;
    };
    const { bytes: valid } = encodeRequest('CreateContainerRequest', {
      container_id: 'c',
      OCI: { Version: '1.1.0', Process: { Args: ['sh'], Env: ['A=1'] }, Annotations: { a: 'b' } },
      storages: [{ driver: 'local', options: ['x'], fs_group: { group_id: 1, group_change_policy: 1 } }],
    });
    let decoded = 0;
    let refused = 0;
    for (let i = 0; i < 3000; i++) {
      let b: Uint8Array;
      if (i % 2 === 0) {
        b = new Uint8Array(Math.floor(rand() * 64));
        for (let j = 0; j < b.length; j++) b[j] = Math.floor(rand() * 256);
      } else {
        b = valid.slice();
        for (let k = 0; k < 3; k++) b[Math.floor(rand() * b.length)] = Math.floor(rand() * 256);
      }
      const type = REQUEST_TYPES[i % REQUEST_TYPES.length]!;
      try {
        decodeRequest(i % 2 === 0 ? type : 'CreateContainerRequest', b);
        decoded++;
      } catch (e) {
        expect(e).toBeInstanceOf(RequestDecodeError);
        refused++;
      }
    }
    expect(decoded).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });
});

describe('encodeRequest', () => {
  it('round-trips through decodeRequest', () => {
    const input = {
      container_id: 'c1',
      exec_id: 'e1',
      string_user: { uid: '0', gid: '0', additionalGids: ['1'] },
      process: {
        Args: ['/bin/sh'],
        User: { UID: 1000, GID: 1000, AdditionalGids: [], Username: '' },
        OOMScoreAdj: -999,
      },
    };
    const d = decodeRequest('ExecProcessRequest', encodeRequest('ExecProcessRequest', input).bytes) as J;
    expect(d.string_user).toEqual(input.string_user);
    expect(d.process.Args).toEqual(['/bin/sh']);
    expect(d.process.OOMScoreAdj).toBe(-999);
    expect(d.process.User.UID).toBe(1000);
  });

  it('reports members the message does not have and refuses values of the wrong type', () => {
    expect(encodeRequest('StartContainerRequest', { container_id: 'x', bogus: 1 }).ignored).toEqual([
      'StartContainerRequest.bogus',
    ]);
    expect(() => encodeRequest('StartContainerRequest', { container_id: 5 })).toThrow(RequestEncodeError);
    expect(() => encodeRequest('RemoveContainerRequest', { timeout: -1 })).toThrow(/out of range/);
    expect(() => encodeRequest('WriteStreamRequest', { data: [256] })).toThrow(RequestEncodeError);
    expect(() => encodeRequest('CreateContainerRequest', { OCI: 'x' })).toThrow(/expected an object/);
  });
});
