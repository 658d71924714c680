// The console's static files under `/console/`, from the strings bundled in assets.gen.ts, with a strict
// CSP: scripts, styles and connections from this origin only, no inline script, no framing.
import type { Reply } from '../reply.js';
import { CONSOLE_ASSETS } from './assets.gen.js';

export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cache-control': 'no-store',
};

export function consolePage(method: string, path: string): Reply {
  if (path === '/console') return { status: 308, headers: { location: '/console/' }, body: '' };
  if (method !== 'GET' && method !== 'HEAD') return { status: 405, headers: { allow: 'GET' }, body: '' };
  const name = path === '/console/' ? 'index.html' : path.slice('/console/'.length);
  const asset = Object.hasOwn(CONSOLE_ASSETS, name) ? CONSOLE_ASSETS[name] : undefined;
  if (asset === undefined) return { status: 404, headers: SECURITY_HEADERS, body: '' };
  return { status: 200, headers: { ...SECURITY_HEADERS, 'content-type': asset.type }, body: asset.body };
}
