/**
 * The `openpgp` library, evaluated on first use. Evaluating it costs a data
 * hub about 20 MB of heap for the rest of its life, yet only `signedBy`
 * checks and `pgp` layer keys need it; most pulls use neither. Every import
 * of the library's values goes through here (types may be imported
 * directly), so the bundler keeps its initialisation behind this call.
 */
import type * as Openpgp from 'openpgp';

export type OpenpgpModule = typeof Openpgp;

let loading: Promise<OpenpgpModule> | undefined;

export function openpgpModule(): Promise<OpenpgpModule> {
  loading ??= import('openpgp');
  return loading;
}
