/**
 * The build's identity. scripts/build.mjs replaces `__BROKER_GIT_DESCRIBE__` with the output of
 * `git describe` (esbuild `define`); run from source (tests, tsx), the identifier is not defined
 * and the build reads as `dev`.
 */
declare const __BROKER_GIT_DESCRIBE__: string | undefined;

export const BUILD_DESCRIPTION: string =
  typeof __BROKER_GIT_DESCRIBE__ === 'string' && __BROKER_GIT_DESCRIBE__ !== ''
    ? __BROKER_GIT_DESCRIBE__
    : 'dev';

/** The one version line every command prints: `<command> <version> (broker <git describe>)`. */
export function versionLine(command: string, version: string): string {
  return `${command} ${version} (broker ${BUILD_DESCRIPTION})`;
}
