/**
 * The peer check of api-server-rest: only loopback peers may call it (any
 * other gets 403). Upstream checks `ip.is_loopback()`: 127.0.0.0/8 and ::1.
 * IPv4-mapped loopback (`::ffff:127.0.0.1`, what a dual-stack socket reports
 * for an IPv4 loopback peer) is accepted too, since it is the same peer.
 */
import net from 'node:net';

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether `address` (as `socket.remoteAddress` reports it) is a loopback address; `undefined` is not. */
export function isLoopbackAddress(address: string | undefined): boolean {
  if (address === undefined) return false;
  // Drop an IPv6 zone id ("fe80::1%eth0"); BlockList does not take one.
  const bare = address.includes('%') ? address.slice(0, address.indexOf('%')) : address;
  const family = net.isIP(bare);
  if (family === 4) return LOOPBACK.check(bare, 'ipv4');
  if (family === 6) return LOOPBACK.check(bare, 'ipv6');
  return false;
}
