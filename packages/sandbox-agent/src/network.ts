/**
 * The guest's network as kata's runtime sets it up: ListInterfaces, UpdateInterface, ListRoutes,
 * UpdateRoutes and AddARPNeighbors, through iproute2's `ip` (its JSON output to read, its commands to
 * change). Every value from a request is checked before it becomes an argument: interface names,
 * MAC addresses, IP addresses, prefix lengths, scopes and neighbour states. `ip` runs without a shell.
 */
import { execFile } from 'node:child_process';
import { isIP } from 'node:net';
import { Code } from '@broker/ttrpc';
import { InvalidRequest, NotFound, RuntimeFailed } from './errors.js';
import { shown } from './paths.js';
import type { Decoded } from './proto.js';

/** kata's `types.IPFamily`. */
const V4 = 0;
const V6 = 1;
/** IFF_NOARP (linux/if.h): the interface does not use ARP. */
const IFF_NOARP = 0x80;
/** Neighbour states (NUD_*, linux/neighbour.h) by the name `ip neigh` takes. */
const NUD: Readonly<Record<number, string>> = {
  1: 'incomplete',
  2: 'reachable',
  4: 'stale',
  8: 'delay',
  16: 'probe',
  32: 'failed',
  64: 'noarp',
  128: 'permanent',
};
/** Route scopes by the name `ip -json` prints. */
const SCOPES: Readonly<Record<string, number>> = {
  global: 0,
  universe: 0,
  site: 200,
  link: 253,
  host: 254,
  nowhere: 255,
};

const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,14}$/;
const MAC = /^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$/;
const OUTPUT_LIMIT = 4 * 1024 * 1024;

export interface NetworkOptions {
  /** The `ip` executable [default: `ip` on PATH]. */
  readonly ip?: string;
  /** A named network namespace (`ip -netns NAME`) instead of the agent's own. */
  readonly netns?: string;
}

function checkName(name: string, what: string): string {
  if (!NAME.test(name)) throw new InvalidRequest(`invalid ${what} ${shown(name)}`);
  return name;
}

function checkAddress(address: string, what: string): { address: string; family: 4 | 6 } {
  const family = isIP(address);
  if (family !== 4 && family !== 6) throw new InvalidRequest(`invalid ${what} ${shown(address)}`);
  return { address, family };
}

function checkPrefixLength(text: string, family: 4 | 6, what: string): number {
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(text) || Number(text) > max)
    throw new InvalidRequest(`invalid ${what} ${shown(text)}`);
  return Number(text);
}

/** `a.b.c.d/len` or an address alone (a host route); empty for the default route. */
function checkPrefix(text: string, what: string): { prefix: string; family: 4 | 6 } | undefined {
  if (text === '') return undefined;
  const [address = '', length, ...rest] = text.split('/');
  if (rest.length > 0) throw new InvalidRequest(`invalid ${what} ${shown(text)}`);
  const { family } = checkAddress(address, what);
  const len = length === undefined ? (family === 4 ? 32 : 128) : checkPrefixLength(length, family, what);
  return { prefix: `${address}/${len}`, family };
}

function familyOf(n: number): 4 | 6 {
  return n === V6 ? 6 : 4;
}

export class Network {
  readonly #ip: string;
  readonly #prefix: readonly string[];

  constructor(options: NetworkOptions = {}) {
    this.#ip = options.ip ?? 'ip';
    if (options.netns !== undefined) checkName(options.netns, 'network namespace');
    this.#prefix = options.netns === undefined ? [] : ['-netns', options.netns];
  }

  #run(args: readonly string[], what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      execFile(
        this.#ip,
        [...this.#prefix, ...args],
        { timeout: 30_000, maxBuffer: OUTPUT_LIMIT },
        (err, stdout, stderr) => {
          if (err) reject(new RuntimeFailed(`${what}: ${(stderr || err.message).trim()}`, { cause: err }));
          else resolve(stdout);
        },
      );
    });
  }

  async #json(args: readonly string[], what: string): Promise<Record<string, unknown>[]> {
    const out = await this.#run(['-json', ...args], what);
    if (out.trim() === '') return [];
    const parsed = JSON.parse(out) as unknown;
    if (!Array.isArray(parsed)) throw new RuntimeFailed(`${what}: ip printed no list`);
    return parsed as Record<string, unknown>[];
  }

  /** ListInterfaces: each link's name, MAC address, MTU and addresses (family, address, prefix length). */
  async listInterfaces(): Promise<Decoded[]> {
    const links = await this.#json(['addr', 'show'], 'listing interfaces');
    return links.map((l) => ({
      name: String(l.ifname ?? ''),
      hwAddr: String(l.address ?? ''),
      mtu: BigInt(Number(l.mtu ?? 0)),
      IPAddresses: ((l.addr_info ?? []) as Record<string, unknown>[]).map((a) => ({
        family: a.family === 'inet6' ? V6 : V4,
        address: String(a.local ?? ''),
        mask: String(a.prefixlen ?? ''),
      })),
    }));
  }

  async #linkByMac(mac: string): Promise<Record<string, unknown>> {
    const links = await this.#json(['link', 'show'], 'listing interfaces');
    const link = links.find((l) => String(l.address ?? '').toLowerCase() === mac.toLowerCase());
    if (!link) throw new NotFound(Code.NOT_FOUND, `no interface has the hardware address ${shown(mac)}`);
    return link;
  }

  /**
   * UpdateInterface, as kata's agent does it: the link with the request's MAC address is brought down,
   * loses its addresses, gets the request's, is renamed (a link already holding the name swaps names
   * with it), gets the MTU and ARP setting, and is brought up. Everything is checked before anything
   * changes.
   */
  async updateInterface(iface: Decoded | null): Promise<Decoded> {
    if (!iface) throw new InvalidRequest('UpdateInterface without an interface');
    const mac = String(iface.hwAddr ?? '');
    if (!MAC.test(mac)) throw new InvalidRequest(`invalid hardware address ${shown(mac)}`);
    const name = checkName(String(iface.name ?? ''), 'interface name');
    const mtu = Number(iface.mtu ?? 0);
    if (!Number.isInteger(mtu) || mtu < 0 || mtu > 65535) throw new InvalidRequest(`invalid MTU ${mtu}`);
    const addresses = ((iface.IPAddresses ?? []) as Decoded[]).map((a) => {
      const { address, family } = checkAddress(String(a.address ?? ''), 'interface address');
      return `${address}/${checkPrefixLength(String(a.mask ?? ''), family, 'prefix length')}`;
    });
    const noarp = (Number(iface.raw_flags ?? 0) & IFF_NOARP) !== 0;

    const link = await this.#linkByMac(mac);
    const current = String(link.ifname);
    await this.#run(['link', 'set', 'dev', current, 'down'], `bringing ${current} down`);
    await this.#run(['addr', 'flush', 'dev', current], `removing the addresses of ${current}`);
    for (const a of addresses)
      await this.#run(['addr', 'add', a, 'dev', current], `adding ${a} to ${current}`);
    let swapped: string | undefined;
    if (current !== name) {
      const taken = (await this.#json(['link', 'show'], 'listing interfaces')).some((l) => l.ifname === name);
      if (taken) {
        swapped = `${name.slice(0, 10)}_temp`;
        await this.#run(['link', 'set', 'dev', name, 'name', swapped], `renaming ${name}`);
      }
      await this.#run(['link', 'set', 'dev', current, 'name', name], `renaming ${current} to ${name}`);
      if (swapped !== undefined) {
        await this.#run(
          ['link', 'set', 'dev', swapped, 'name', current],
          `renaming ${swapped} to ${current}`,
        );
      }
    }
    const settings = [...(mtu > 0 ? ['mtu', String(mtu)] : []), 'arp', noarp ? 'off' : 'on', 'up'];
    await this.#run(['link', 'set', 'dev', name, ...settings], `setting ${name} up`);
    return iface;
  }

  /**
   * ListRoutes: the main table's IPv4 and IPv6 routes. `dest` is the destination prefix (empty for the
   * default route), `source` the preferred source address, `scope` and `family` as numbers.
   */
  async listRoutes(): Promise<Decoded[]> {
    const routes: Decoded[] = [];
    for (const family of [4, 6] as const) {
      for (const r of await this.#json([`-${family}`, 'route', 'show', 'table', 'main'], 'listing routes')) {
        const dst = String(r.dst ?? 'default');
        const scope = typeof r.scope === 'string' ? (SCOPES[r.scope] ?? Number(r.scope)) : 0;
        routes.push({
          dest: dst === 'default' ? '' : dst.includes('/') ? dst : `${dst}/${family === 4 ? 32 : 128}`,
          gateway: String(r.gateway ?? ''),
          device: String(r.dev ?? ''),
          source: String(r.prefsrc ?? ''),
          scope: Number.isInteger(scope) ? scope : 0,
          family: family === 6 ? V6 : V4,
        });
      }
    }
    return routes;
  }

  /**
   * UpdateRoutes, as kata's agent does it: every route of the main table that the kernel did not make
   * for an address (and none on `lo`) is deleted, then the request's routes are added, those without a
   * gateway first. A route that already exists is not an error. Answers the routes then in the table.
   */
  async updateRoutes(list: readonly Decoded[]): Promise<Decoded[]> {
    const wanted = list.map((r) => {
      const device = checkName(String(r.device ?? ''), 'route device');
      const dest = checkPrefix(String(r.dest ?? ''), 'route destination');
      const gateway = r.gateway ? checkAddress(String(r.gateway), 'route gateway') : undefined;
      const source = r.source ? checkAddress(String(r.source), 'route source') : undefined;
      const family = dest?.family ?? gateway?.family ?? source?.family ?? familyOf(Number(r.family ?? 0));
      for (const other of [dest?.family, gateway?.family, source?.family]) {
        if (other !== undefined && other !== family)
          throw new InvalidRequest(`route to ${shown(String(r.dest ?? ''))} mixes IPv4 and IPv6 addresses`);
      }
      const scope = Number(r.scope ?? 0);
      if (!Number.isInteger(scope) || scope < 0 || scope > 255)
        throw new InvalidRequest(`invalid route scope ${scope}`);
      return { device, dest, gateway, source, family, scope };
    });
    for (const family of [4, 6] as const) {
      const current = await this.#json([`-${family}`, 'route', 'show', 'table', 'main'], 'listing routes');
      for (const r of current) {
        if (r.protocol === 'kernel' || r.dev === 'lo') continue;
        const args = [`-${family}`, 'route', 'del', String(r.dst ?? 'default')];
        if (r.gateway) args.push('via', String(r.gateway));
        if (r.dev) args.push('dev', String(r.dev));
        await this.#run([...args, 'table', 'main'], `deleting the route to ${String(r.dst)}`);
      }
    }
    const ordered = [...wanted.filter((r) => !r.gateway), ...wanted.filter((r) => r.gateway)];
    for (const r of ordered) {
      const args = [`-${r.family}`, 'route', 'add', r.dest?.prefix ?? 'default'];
      if (r.gateway) args.push('via', r.gateway.address);
      args.push('dev', r.device);
      if (r.source) args.push('src', r.source.address);
      args.push('scope', String(r.scope), 'proto', 'boot', 'table', 'main');
      try {
        await this.#run(args, `adding the route to ${r.dest?.prefix ?? 'default'}`);
      } catch (e) {
        if (!/File exists/.test((e as Error).message)) throw e;
      }
    }
    return this.listRoutes();
  }

  /** AddARPNeighbors: `ip neigh replace` of each neighbour, PERMANENT unless the request names a state. */
  async addArpNeighbors(list: readonly Decoded[]): Promise<void> {
    const neighbours = list.map((n) => {
      const { address } = checkAddress(String(n.toIPAddress?.address ?? ''), 'neighbour address');
      const device = checkName(String(n.device ?? ''), 'neighbour device');
      const lladdr = String(n.lladdr ?? '');
      if (lladdr !== '' && !MAC.test(lladdr))
        throw new InvalidRequest(`invalid neighbour lladdr ${shown(lladdr)}`);
      const state = Number(n.state ?? 0) === 0 ? 0x80 : Number(n.state);
      const nud = NUD[state];
      if (nud === undefined) throw new InvalidRequest(`unsupported neighbour state ${state}`);
      if (Number(n.flags ?? 0) !== 0)
        throw new InvalidRequest(`unsupported neighbour flags ${Number(n.flags)}`);
      return { address, device, lladdr, nud };
    });
    for (const n of neighbours) {
      const args = [
        'neigh',
        'replace',
        n.address,
        ...(n.lladdr ? ['lladdr', n.lladdr] : []),
        'dev',
        n.device,
      ];
      await this.#run([...args, 'nud', n.nud], `adding the neighbour ${n.address}`);
    }
  }
}
