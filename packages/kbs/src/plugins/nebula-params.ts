// The query of `GET /kbs/v0/nebula-ca/credential` (trustee nebula_ca.rs NebulaCredentialParams):
// `name` and `ip` required, `duration`, `groups`, `subnets` optional, each becoming the `nebula-cert sign`
// flag of the same name. trustee forwards the strings unchecked; here each is parsed first, so a value
// the tool would misread (a path, an option, an address that is not one) never reaches it.
import { PluginRequestError } from './builtin.js';

export interface NebulaCredentialParams {
  readonly name: string;
  readonly ip: string;
  readonly duration?: string;
  readonly groups?: string;
  readonly subnets?: string;
}

const KNOWN = new Set(['name', 'ip', 'duration', 'groups', 'subnets']);
/** A hostname or pod name: DNS-label characters and dots, not starting with `-` or `.`. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$/;
const GROUP = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const OCTET = /^(?:0|[1-9][0-9]{0,2})$/;
/** Go's time.ParseDuration in the units trustee documents: hours, minutes, seconds, in that order. */
const DURATION = /^(?=\d)(?:\d{1,7}h)?(?:\d{1,9}m)?(?:\d{1,9}s)?$/;
const MAX_LIST = 32;

function refuse(message: string): never {
  throw new PluginRequestError(message);
}

const shown = (v: string) => JSON.stringify(v.length > 64 ? `${v.slice(0, 64)}…` : v);

/** `a.b.c.d/n`: four decimal octets without leading zeros, a prefix length 0..32. */
export function isIpv4Cidr(v: string): boolean {
  const slash = v.indexOf('/');
  if (slash < 0 || v.length > 18) return false;
  const octets = v.slice(0, slash).split('.');
  const prefix = v.slice(slash + 1);
  if (octets.length !== 4 || !/^(?:[0-9]|[12][0-9]|3[0-2])$/.test(prefix)) return false;
  return octets.every((o) => OCTET.test(o) && Number(o) <= 255);
}

function list(key: string, v: string, ok: (item: string) => boolean, what: string): string {
  const items = v.split(',');
  if (items.length > MAX_LIST) refuse(`${key}: at most ${MAX_LIST} entries`);
  for (const item of items) {
    if (!ok(item)) refuse(`${key}: ${shown(item)} is not ${what}`);
  }
  return v;
}

export function parseNebulaCredentialParams(query: Readonly<Record<string, string>>): NebulaCredentialParams {
  for (const key of Object.keys(query)) {
    if (!KNOWN.has(key))
      refuse(`unknown query parameter ${shown(key)} (known: name, ip, duration, groups, subnets)`);
  }
  const { name, ip, duration, groups, subnets } = query;
  if (name === undefined) refuse('missing field `name`');
  if (ip === undefined) refuse('missing field `ip`');
  if (!NAME.test(name) || name.includes('..')) {
    refuse(
      `name ${shown(name)} must be 1 to 253 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  if (!isIpv4Cidr(ip))
    refuse(`ip ${shown(ip)} is not an IPv4 address with a prefix length (e.g. 10.9.8.7/21)`);
  if (duration !== undefined && (duration === '' || !DURATION.test(duration))) {
    refuse(`duration ${shown(duration)} is not <hours>h<minutes>m<seconds>s (e.g. 8760h0m0s)`);
  }
  return {
    name,
    ip,
    ...(duration !== undefined && { duration }),
    ...(groups !== undefined && { groups: list('groups', groups, (g) => GROUP.test(g), 'a group name') }),
    ...(subnets !== undefined && {
      subnets: list('subnets', subnets, isIpv4Cidr, 'an IPv4 network in CIDR notation'),
    }),
  };
}

/** The `nebula-cert sign` arguments for the parameters, in trustee's order. */
export function signArguments(p: NebulaCredentialParams): string[] {
  const args = ['-name', p.name, '-ip', p.ip];
  if (p.duration !== undefined) args.push('-duration', p.duration);
  if (p.groups !== undefined) args.push('-groups', p.groups);
  if (p.subnets !== undefined) args.push('-subnets', p.subnets);
  return args;
}
