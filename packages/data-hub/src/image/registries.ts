/**
 * Where to pull an image from: image-rs' `RegistryHandler` over
 * containers-registries.conf(5) settings (`[image.registry_config]` or
 * `registry_configuration_uri`). The result is an ordered list of attempts:
 * each mirror of the best-matching `[[registry]]`, then its `location`
 * (or the reference unchanged), each with its own `insecure` (plain http).
 *
 * - A `docker.io` reference is first expanded over
 *   `unqualified-search-registries` (image-rs cannot tell `busybox` from
 *   `docker.io/library/busybox`, and neither can we after normalisation).
 * - The longest matching `prefix` wins (the last one of equal length, as
 *   image-rs). A prefix must match at the start of the reference, as in
 *   containers/image; image-rs finds it anywhere in the string.
 * - `blocked` registries give no attempt; when nothing is left the pull is
 *   refused: `Image <ref> is blocked by registry rule.`
 */

import type { RegistryConfig, RegistryEntry } from '../config.js';
import { DataHubError } from '../errors.js';

export interface PullAttempt {
  /** The reference to pull (and to judge by the signature policy), in full form. */
  readonly reference: string;
  /** Use plain http for this attempt's registry. */
  readonly insecure: boolean;
}

export class RegistryConfigError extends DataHubError {
  override readonly name: string = 'RegistryConfigError';
  override readonly code = 'REGISTRY_CONFIG_INVALID';
}

/** image-rs `validate_and_tidy`: an empty prefix is the location; no empty mirror locations. */
export function tidyRegistryConfig(config: RegistryConfig): RegistryConfig {
  const registry = config.registry.map((r): RegistryEntry => {
    let prefix = r.prefix;
    if (prefix === '') {
      if (r.location === '')
        throw new RegistryConfigError('illegal Registry Config: both location and prefix are empty');
      prefix = r.location;
    }
    if (prefix.startsWith('*.') && r.location === '') {
      throw new RegistryConfigError('illegal Registry Config: location is unset and prefix is with wildcard');
    }
    if (r.mirror.some((m) => m.location === ''))
      throw new RegistryConfigError('illegal Registry Config: mirror location is empty');
    return { ...r, prefix };
  });
  return { unqualifiedSearchRegistries: config.unqualifiedSearchRegistries, registry };
}

/** Length of the matched prefix, or -1. */
function matchPrefix(reference: string, prefix: string): number {
  let end: number;
  if (prefix.startsWith('*.')) {
    const suffix = prefix.slice(1);
    const at = reference.indexOf(suffix);
    if (at < 0 || reference.slice(0, at).includes('/')) return -1;
    end = at + suffix.length;
  } else {
    if (!reference.startsWith(prefix)) return -1;
    end = prefix.length;
  }
  if (end === reference.length) return end;
  const next = reference[end];
  return next === ':' || next === '/' || next === '@' ? end : -1;
}

/**
 * The attempts for `reference` (full form `domain/path[:tag|@digest]`),
 * split by the caller into domain, path and tag/digest.
 */
export function pullAttempts(
  reference: { domain: string; path: string; suffix: string },
  config: RegistryConfig | null,
): PullAttempt[] {
  const full = `${reference.domain}/${reference.path}${reference.suffix}`;
  if (config === null) return [{ reference: full, insecure: false }];
  let originals: string[];
  if (reference.domain !== 'docker.io') originals = [full];
  else {
    originals = config.unqualifiedSearchRegistries.map((registry) => {
      if (registry === 'docker.io') return full;
      const path = reference.path.startsWith('library/')
        ? reference.path.slice('library/'.length)
        : reference.path;
      return `${registry}/${path}${reference.suffix}`;
    });
  }
  const attempts: PullAttempt[] = [];
  for (const original of originals) {
    let best: { length: number; rule: RegistryEntry } | undefined;
    for (const rule of config.registry) {
      const length = matchPrefix(original, rule.prefix);
      if (length >= 0 && (best === undefined || length >= best.length)) best = { length, rule };
    }
    if (best === undefined) {
      attempts.push({ reference: original, insecure: false });
      continue;
    }
    const rest = original.slice(best.length);
    if (best.rule.blocked) continue;
    for (const m of best.rule.mirror)
      attempts.push({ reference: `${m.location}${rest}`, insecure: m.insecure });
    if (best.rule.location !== '')
      attempts.push({ reference: `${best.rule.location}${rest}`, insecure: best.rule.insecure });
    else attempts.push({ reference: original, insecure: false });
  }
  if (attempts.length === 0) throw new RegistryConfigError(`Image ${full} is blocked by registry rule.`);
  return attempts;
}
