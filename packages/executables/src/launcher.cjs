// The main script of a single executable built with one bundle per command (scripts/build.mjs,
// `commandBundles`): it picks the bundle of the command being run and compiles only that one, from an
// asset of the executable, with the code cache the build made for it. A daemon thus holds one
// command's code, not every command's (the guest's full bundle is ~2 MiB of source in each heap).
// The build prepends `const __broker_launch = {...}`: the executable's name, and each bundle's path as
// its stack frames name it, by command. Anything else (no command, --help, --together, a command
// without its own bundle, an executable renamed) runs the full bundle, `all`, which dispatches as
// always.
(() => {
  const sea = require('node:sea');
  const { basename } = require('node:path');
  const { Script, constants: vmConstants } = require('node:vm');
  const launch = __broker_launch;

  /** The bundle for this command line: the same reading of argv0 and argv as dispatch.ts. */
  const pick = () => {
    const invokedAs = basename(process.argv0 || process.argv[1] || '');
    if (invokedAs !== 'all' && Object.hasOwn(launch.bundles, invokedAs)) return invokedAs;
    if (invokedAs !== launch.self) return 'all';
    const first = process.argv[2];
    if (first !== undefined && first !== 'all' && Object.hasOwn(launch.bundles, first)) return first;
    return 'all';
  };

  const key = pick();
  const filename = launch.bundles[key];
  const source = sea.getAsset(`${key}.cjs`, 'utf8');
  let cachedData;
  try {
    cachedData = new Uint8Array(sea.getRawAsset(`${key}.cache`));
  } catch {
    // No cache: V8 compiles the bundle lazily, as it would any script.
  }
  // A bundle may still `import()` a built-in module (esbuild keeps those); a vm script has no
  // loader for that unless it is given the main context's.
  const importModuleDynamically = vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
  const script = new Script(
    `(function (exports, require, module, __filename, __dirname) {${source}\n})`,
    cachedData === undefined
      ? { filename, importModuleDynamically }
      : { filename, cachedData, importModuleDynamically },
  );
  if (process.env.BROKER_LAUNCH_DEBUG === '1') {
    process.stderr.write(
      `launcher: bundle ${key}, code cache ${script.cachedDataRejected ? 'rejected' : 'used'}\n`,
    );
  }
  script.runInThisContext()(module.exports, require, module, __filename, __dirname);
})();
