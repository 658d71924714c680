// Prepended to each single-executable bundle by scripts/build.mjs. Stack traces name the TypeScript
// files and lines: the source map is an asset of the executable, read only when a stack is first
// formatted, so a start-up that never prints one pays nothing (Node's --enable-source-maps parsed
// the whole map at every start, ~50 ms). `__broker_bundle_path` is the bundle's path at build time,
// which V8 reports as the file of the bundle's frames; `__broker_stack_assets` names its map's assets.
//
// The map is not handed to node:module's SourceMap: that one expands every mapping into its own
// array, ~80 MiB of heap for the guest bundle's map, which a daemon then kept for the rest of its life
// after its first formatted stack (an error any library creates and reads). The build stores the map
// as two assets, its `sources` (JSON) and its `mappings` text (`<name>.stack-sources.json`,
// `<name>.stack-mappings.txt`); the mappings are read in place from the
// executable (sea.getRawAsset: no copy, file pages the kernel may drop) and the heap keeps only a
// checkpoint of the decoder's state every CHECKPOINT_EVERY segments (a few hundred KiB). A frame is
// found by a binary search over the checkpoints and decoding at most that many segments.
(() => {
  const CHECKPOINT_EVERY = 64;
  // Checkpoint fields: text offset after the segment, generated line, generated column, source index,
  // original line, original column, and whether the segment names a source (1 or 4 values).
  const FIELDS = 7;
  const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const DIGIT = new Int8Array(128).fill(-1);
  for (let i = 0; i < BASE64.length; i++) DIGIT[BASE64.charCodeAt(i)] = i;

  /** A decoder over `mappings` (source map v3, as bytes): `next()` reads one segment into `state`. */
  const decoder = (mappings) => {
    const state = { pos: 0, line: 0, col: 0, source: 0, origLine: 0, origCol: 0, fields: 0 };
    const vlq = () => {
      let result = 0;
      let shift = 0;
      for (;;) {
        const c = mappings[state.pos++];
        const digit = c !== undefined && c < 128 ? DIGIT[c] : -1;
        if (digit < 0) throw new Error('bad VLQ in source map');
        result += (digit & 31) * 2 ** shift;
        if ((digit & 32) === 0) break;
        shift += 5;
        if (shift > 30) throw new Error('VLQ overflow in source map');
      }
      return result % 2 === 1 ? -(result - 1) / 2 : result / 2;
    };
    const next = () => {
      for (;;) {
        if (state.pos >= mappings.length) return false;
        const c = mappings[state.pos];
        if (c === 59 /* ; */) {
          state.line++;
          state.col = 0;
          state.pos++;
        } else if (c === 44 /* , */) {
          state.pos++;
        } else break;
      }
      state.col += vlq();
      state.fields = 1;
      const c = mappings[state.pos];
      if (state.pos < mappings.length && c !== 44 && c !== 59) {
        state.source += vlq();
        state.origLine += vlq();
        state.origCol += vlq();
        state.fields = 4;
        const d = mappings[state.pos];
        if (state.pos < mappings.length && d !== 44 && d !== 59) vlq(); // name index: unused
      }
      return true;
    };
    return { state, next };
  };

  const indexMap = (sources, mappings) => {
    if (!Array.isArray(sources) || !(mappings instanceof Uint8Array)) return null;
    const { state, next } = decoder(mappings);
    const points = [];
    for (let n = 0; next(); n++) {
      if (n % CHECKPOINT_EVERY === 0) {
        points.push(
          state.pos,
          state.line,
          state.col,
          state.source,
          state.origLine,
          state.origCol,
          state.fields,
        );
      }
    }
    return { sources: sources.map(String), mappings, checkpoints: Int32Array.from(points) };
  };

  /** The original position of generated (line, column), both 0-based, or undefined. */
  const lookup = (index, line, column) => {
    const cp = index.checkpoints;
    const before = (i) => {
      const l = cp[i * FIELDS + 1];
      return l < line || (l === line && cp[i * FIELDS + 2] <= column);
    };
    let lo = 0;
    let hi = cp.length / FIELDS - 1;
    if (hi < 0 || !before(0)) return undefined;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (before(mid)) lo = mid;
      else hi = mid - 1;
    }
    const { state, next } = decoder(index.mappings);
    const at = lo * FIELDS;
    state.pos = cp[at];
    state.line = cp[at + 1];
    state.col = cp[at + 2];
    state.source = cp[at + 3];
    state.origLine = cp[at + 4];
    state.origCol = cp[at + 5];
    state.fields = cp[at + 6];
    // The checkpoint's own segment is the best candidate so far; a later one on the line may be closer.
    const snapshot = () => ({
      line: state.line,
      fields: state.fields,
      source: state.source,
      origLine: state.origLine,
      origCol: state.origCol,
    });
    let found = snapshot();
    while (next()) {
      if (state.line > line || (state.line === line && state.col > column)) break;
      found = snapshot();
    }
    if (found.line !== line || found.fields < 4) return undefined;
    const source = index.sources[found.source];
    if (source === undefined) return undefined;
    return { source, line: found.origLine, column: found.origCol };
  };

  let map;
  const sourceMap = () => {
    if (map === undefined) {
      map = null;
      try {
        const sea = require('node:sea');
        if (sea.isSea()) {
          map = indexMap(
            JSON.parse(sea.getAsset(`${__broker_stack_assets}.stack-sources.json`, 'utf8')),
            new Uint8Array(sea.getRawAsset(`${__broker_stack_assets}.stack-mappings.txt`)),
          );
        }
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
    let entry;
    try {
      entry = lookup(m, frame.getLineNumber() - 1, frame.getColumnNumber() - 1);
    } catch {
      return text;
    }
    if (entry === undefined) return text;
    const where = `${entry.source}:${entry.line + 1}:${entry.column + 1}`;
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
