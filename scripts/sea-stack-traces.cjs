// Prepended to each single-executable bundle by scripts/build.mjs. Stack traces name the TypeScript
// files and lines: the source map is an asset of the executable, read only when a stack is first
// formatted, so a start-up that never prints one pays nothing (Node's --enable-source-maps parsed
// the whole map at every start, ~50 ms). `__broker_bundle_path` is the bundle's path at build time,
// which V8 reports as the file of the bundle's frames.
(() => {
  let map;
  const sourceMap = () => {
    if (map === undefined) {
      map = null;
      try {
        const sea = require('node:sea');
        const { SourceMap } = require('node:module');
        if (sea.isSea()) map = new SourceMap(JSON.parse(sea.getAsset('bundle.map', 'utf8')));
      } catch {
        // No map: frames stay as V8 gives them.
      }
    }
    return map;
  };
  const frameText = (frame) => {
    const text = String(frame);
    const m = frame.getFileName() === __broker_bundle_path ? sourceMap() : null;
    if (m === null) return text;
    const entry = m.findEntry(frame.getLineNumber() - 1, frame.getColumnNumber() - 1);
    if (entry?.originalSource === undefined) return text;
    const where = `${entry.originalSource}:${entry.originalLine + 1}:${entry.originalColumn + 1}`;
    const fn = frame.getFunctionName();
    return `${frame.isAsync() ? 'async ' : ''}${fn ? `${fn} (${where})` : where}`;
  };
  Error.prepareStackTrace = (error, frames) => {
    let head;
    try {
      head = Error.prototype.toString.call(error);
    } catch {
      head = 'Error';
    }
    return head + frames.map((f) => `\n    at ${frameText(f)}`).join('');
  };
})();
