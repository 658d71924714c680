import { access } from 'node:fs/promises';
import { isAbsolute, join } from 'node:path';
import type { PlatformContext, PlatformOptions } from './attester.js';

export function platformContext(options: PlatformOptions = {}): PlatformContext {
  const root = options.root ?? '/';
  const env = options.env ?? process.env;
  return {
    env,
    async exists(absolutePath: string): Promise<boolean> {
      if (!isAbsolute(absolutePath)) throw new TypeError(`probe path must be absolute: ${absolutePath}`);
      try {
        await access(join(root, absolutePath));
        return true;
      } catch {
        return false;
      }
    },
  };
}
