// The network RPCs against a real network namespace of our own (iproute2's `ip netns`), with a veth
// pair standing in for the pod's interface: what kata's runtime sends at sandbox start (UpdateInterface,
// UpdateRoutes, AddARPNeighbors) and what it lists, checked with `ip -json` in the namespace; and
// hostile values refused before `ip` runs. Root only.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { AGENT_METHODS } from '@broker/agent-policy';
import { Code, TtrpcClient, TtrpcError } from '@broker/ttrpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { codec, type Decoded } from './proto.js';
import { type RunningAgent, startSandboxAgent } from './server.js';
import { AGENT_SERVICE, RESPONSES } from './service.js';
import { agentCall, buildGoShim, runGoScript, SKIP_GO, tempDir } from './testing/index.js';

const IS_ROOT = process.getuid?.() === 0;
const NS = `sa-net-${process.pid}`;
const MAC = '02:42:ac:11:00:07';

const ip = (...args: string[]) => execFileSync('ip', ['-netns', NS, ...args], { encoding: 'utf8' });
const ipJson = (...args: string[]) => JSON.parse(ip('-json', ...args)) as Record<string, unknown>[];

describe.skipIf(!IS_ROOT)('the network RPCs, in a network namespace', () => {
  let cleanup: () => Promise<void>;
  let running: RunningAgent;
  let client: TtrpcClient;
  let socket: string;

  const call = async (rpc: string, req: Decoded = {}): Promise<Decoded> =>
    codec(RESPONSES[rpc] ?? 'Empty').decode(
      await client.call(AGENT_SERVICE, rpc, codec(AGENT_METHODS[rpc]!).encode(req)),
    );
  const failure = async (rpc: string, req: Decoded): Promise<TtrpcError> => {
    const e = await call(rpc, req).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(TtrpcError);
    return e as TtrpcError;
  };

  beforeAll(async () => {
    let dir: string;
    ({ dir, cleanup } = await tempDir());
    execFileSync('ip', ['netns', 'add', NS]);
    // A veth pair: the pod's interface and its other end, both up so the link has a carrier.
    ip('link', 'add', 'eth0', 'address', MAC, 'type', 'veth', 'peer', 'name', 'other');
    for (const link of ['lo', 'eth0', 'other']) ip('link', 'set', link, 'up');
    socket = join(dir, 'agent.sock');
    running = await startSandboxAgent({
      listen: [{ path: socket }],
      roots: [join(dir, 'kata')],
      stateDir: join(dir, 'state'),
      network: { netns: NS },
    });
    client = await TtrpcClient.connect({ path: join(dir, 'agent.sock') });
  });

  afterAll(async () => {
    client?.close();
    await running?.close();
    execFileSync('ip', ['netns', 'delete', NS]);
    await cleanup?.();
  });

  it('lists the interfaces with their MAC addresses, MTUs and addresses', async () => {
    const { Interfaces } = await call('ListInterfaces');
    const byName = new Map((Interfaces as Decoded[]).map((i) => [i.name, i]));
    expect([...byName.keys()].sort()).toEqual(['eth0', 'lo', 'other']);
    expect(byName.get('eth0')).toMatchObject({ hwAddr: MAC, mtu: 1500n });
    // Only the kernel's link-local IPv6 address, once it is there.
    for (const a of byName.get('eth0')!.IPAddresses as Decoded[]) {
      expect(a).toMatchObject({ family: 1, address: expect.stringMatching(/^fe80::/), mask: '64' });
    }
    expect(byName.get('lo')?.IPAddresses).toEqual([
      { family: 0, address: '127.0.0.1', mask: '8' },
      { family: 1, address: '::1', mask: '128' },
    ]);
  });

  it('updates the interface found by its MAC address: addresses, name (swapped with a link holding it), MTU, up', async () => {
    const iface = {
      name: 'other',
      hwAddr: MAC,
      mtu: 1400n,
      IPAddresses: [
        { family: 0, address: '10.88.0.7', mask: '24' },
        { family: 1, address: 'fd00:88::7', mask: '64' },
      ],
    };
    const answer = await call('UpdateInterface', { interface: iface });
    expect(answer).toMatchObject({ name: 'other', hwAddr: MAC });
    const [link] = ipJson('addr', 'show', 'dev', 'other');
    expect(link).toMatchObject({ address: MAC, mtu: 1400 });
    expect(link!.flags).toContain('UP');
    expect(
      (link!.addr_info as Decoded[])
        .filter((a) => a.scope === 'global')
        .map((a) => `${a.local}/${a.prefixlen}`),
    ).toEqual(['10.88.0.7/24', 'fd00:88::7/64']);
    // The link that had the name took the old one.
    expect(
      ipJson('link', 'show')
        .map((l) => l.ifname)
        .sort(),
    ).toEqual(['eth0', 'lo', 'other']);
    expect(ipJson('link', 'show', 'dev', 'eth0')[0]!.address).not.toBe(MAC);
  });

  it('replaces the routes (link routes first, then gateways) and lists them', async () => {
    ip('route', 'add', '10.99.0.0/16', 'dev', 'other'); // a stale route the update removes
    const { Routes } = await call('UpdateRoutes', {
      routes: {
        Routes: [
          { dest: '', gateway: '10.88.0.1', device: 'other', family: 0 },
          { dest: '10.88.0.0/24', device: 'other', source: '10.88.0.7', scope: 253, family: 0 },
          { dest: '10.77.0.0/16', gateway: '10.88.0.1', device: 'other', family: 0 },
          { dest: 'fd00:77::/64', gateway: 'fd00:88::1', device: 'other', family: 1 },
        ],
      },
    });
    const v4 = (Routes as Decoded[]).filter((r) => r.family === 0);
    expect(v4).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          dest: '',
          gateway: '10.88.0.1',
          device: 'other',
          source: '',
          scope: 0,
          family: 0,
        }),
        expect.objectContaining({
          dest: '10.77.0.0/16',
          gateway: '10.88.0.1',
          device: 'other',
          source: '',
          scope: 0,
          family: 0,
        }),
        expect.objectContaining({
          dest: '10.88.0.0/24',
          gateway: '',
          device: 'other',
          source: '10.88.0.7',
          scope: 253,
          family: 0,
        }),
      ]),
    );
    expect(v4.map((r) => r.dest)).not.toContain('10.99.0.0/16');
    expect(ipJson('-4', 'route', 'show', 'default')).toEqual([
      expect.objectContaining({ gateway: '10.88.0.1', dev: 'other' }),
    ]);
    expect(ipJson('-6', 'route', 'show', 'fd00:77::/64')).toEqual([
      expect.objectContaining({ gateway: 'fd00:88::1', dev: 'other' }),
    ]);
    const listed = await call('ListRoutes');
    expect(listed.Routes).toEqual(Routes);
  });

  it('adds ARP neighbours, PERMANENT unless a state is named', async () => {
    await call('AddARPNeighbors', {
      neighbors: {
        ARPNeighbors: [
          { toIPAddress: { address: '10.88.0.1' }, device: 'other', lladdr: '02:00:00:00:00:01' },
          {
            toIPAddress: { address: '10.88.0.2' },
            device: 'other',
            lladdr: '02:00:00:00:00:02',
            state: 0x04,
          },
        ],
      },
    });
    const neighbours = ipJson('neigh', 'show', 'dev', 'other');
    expect(neighbours).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ dst: '10.88.0.1', lladdr: '02:00:00:00:00:01', state: ['PERMANENT'] }),
        expect.objectContaining({ dst: '10.88.0.2', lladdr: '02:00:00:00:00:02', state: ['STALE'] }),
      ]),
    );
  });

  it.skipIf(SKIP_GO)(
    'answers a client we did not write: the Go shim reads the lists with gogo types',
    async () => {
      const shim = await buildGoShim();
      const [interfaces, routes] = await runGoScript(shim, socket, [
        agentCall('ListInterfaces'),
        agentCall('ListRoutes'),
      ]);
      expect(interfaces!.error).toBeUndefined();
      const other = (interfaces!.response!.Interfaces as Decoded[]).find((i) => i.name === 'other');
      expect(other).toMatchObject({ hwAddr: MAC, mtu: '1400' });
      expect((other!.IPAddresses as Decoded[]).map((a) => [a.family, a.address, a.mask])).toEqual(
        expect.arrayContaining([
          ['v4', '10.88.0.7', '24'],
          ['v6', 'fd00:88::7', '64'],
        ]),
      );
      expect(routes!.response!.Routes).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ dest: '', gateway: '10.88.0.1', device: 'other' }),
        ]),
      );
    },
    600_000,
  );

  it('refuses hostile values before ip runs, and names what is wrong', async () => {
    const good = { name: 'other', hwAddr: MAC, IPAddresses: [{ address: '10.88.0.7', mask: '24' }] };
    const cases: [string, Decoded, RegExp][] = [
      ['UpdateInterface', { interface: { ...good, name: '-help' } }, /invalid interface name "-help"/],
      ['UpdateInterface', { interface: { ...good, name: 'a-name-far-too-long' } }, /invalid interface name/],
      ['UpdateInterface', { interface: { ...good, hwAddr: 'zz:zz' } }, /invalid hardware address/],
      [
        'UpdateInterface',
        { interface: { ...good, IPAddresses: [{ address: '10.0.0.1 up', mask: '24' }] } },
        /invalid interface address/,
      ],
      [
        'UpdateInterface',
        { interface: { ...good, IPAddresses: [{ address: '10.0.0.1', mask: '33' }] } },
        /invalid prefix length "33"/,
      ],
      [
        'UpdateInterface',
        { interface: { ...good, IPAddresses: [{ address: '10.0.0.1', mask: '-1' }] } },
        /invalid prefix length/,
      ],
      [
        'UpdateRoutes',
        { routes: { Routes: [{ dest: '10.0.0.0/8', device: 'dev other' }] } },
        /invalid route device/,
      ],
      [
        'UpdateRoutes',
        { routes: { Routes: [{ dest: 'default', device: 'other' }] } },
        /invalid route destination/,
      ],
      [
        'UpdateRoutes',
        { routes: { Routes: [{ dest: '10.0.0.0/8', gateway: 'fd00::1', device: 'other' }] } },
        /mixes IPv4 and IPv6/,
      ],
      [
        'UpdateRoutes',
        { routes: { Routes: [{ dest: '10.0.0.0/8', device: 'other', scope: 256 }] } },
        /invalid route scope/,
      ],
      [
        'AddARPNeighbors',
        { neighbors: { ARPNeighbors: [{ toIPAddress: { address: 'x' }, device: 'other' }] } },
        /invalid neighbour address/,
      ],
      [
        'AddARPNeighbors',
        {
          neighbors: { ARPNeighbors: [{ toIPAddress: { address: '10.0.0.9' }, device: 'other', state: 3 }] },
        },
        /unsupported neighbour state 3/,
      ],
    ];
    for (const [rpc, req, message] of cases) {
      const e = await failure(rpc, req);
      expect([rpc, e.code, e.message]).toEqual([rpc, Code.INVALID_ARGUMENT, expect.stringMatching(message)]);
    }
    // Refused before anything changed: the routes are those of the last update.
    expect(ipJson('-4', 'route', 'show', 'default')).toEqual([
      expect.objectContaining({ gateway: '10.88.0.1' }),
    ]);
    const missing = await failure('UpdateInterface', { interface: { ...good, hwAddr: '02:00:00:00:00:99' } });
    expect([missing.code, missing.message]).toEqual([
      Code.NOT_FOUND,
      'no interface has the hardware address "02:00:00:00:00:99"',
    ]);
  });
});
