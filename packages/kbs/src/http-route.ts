// The `route` and `method` labels of the HTTP metrics: a template per endpoint, never the raw path (which
// names resources and grows without bound), so that an alert can group by endpoint.
import { BUILTIN_PLUGIN_NAMES } from './plugins/builtin-config.js';

/** Every path that is not one of the KBS's endpoints. */
export const OTHER_ROUTE = 'other';

const PREFIX = '/kbs/v0/';
/** trustee's own endpoints: `/kbs/v0/<name>` and, for some, `/kbs/v0/<name>/<id>`. */
const FIXED = new Set(['auth', 'attest', 'attestation-policy', 'reference-value', 'resource-policy']);
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

/** The method as a label: one of the usual ones, else `other`. */
export function methodLabel(method: string | undefined): string {
  return method !== undefined && METHODS.has(method) ? method : OTHER_ROUTE;
}

/** The route template of a request path (without its query). */
export function routeOf(path: string): string {
  if (path === '/metrics' || path === '/healthz' || path === '/console') return path;
  if (path.startsWith('/console/')) return '/console/{file}';
  if (!path.startsWith(PREFIX)) return OTHER_ROUTE;
  const segments = path.slice(PREFIX.length).split('/');
  const plugin = segments[0] ?? '';
  const n = segments.length;
  // Exactly `repository/type/tag`: any other resource path is refused.
  if (plugin === 'resource') return n === 4 ? `${PREFIX}resource/{repository}/{type}/{tag}` : OTHER_ROUTE;
  if (FIXED.has(plugin)) {
    if (n === 1) return `${PREFIX}${plugin}`;
    return n === 2 ? `${PREFIX}${plugin}/{id}` : OTHER_ROUTE;
  }
  if (plugin === 'external') return n >= 3 ? `${PREFIX}external/{plugin}/{path}` : OTHER_ROUTE;
  if (plugin === 'admin' || BUILTIN_PLUGIN_NAMES.includes(plugin)) {
    return n === 1 ? `${PREFIX}${plugin}` : `${PREFIX}${plugin}/{path}`;
  }
  return OTHER_ROUTE;
}
