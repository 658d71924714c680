// Graph builtins: graph.reachable and graph.reachable_paths. A graph is an object from each node to its
// neighbours (an array or a set; any other value means no neighbours); nodes absent from the graph are
// not reached.

import { type ObjectValue, SetValue, type Value } from '../value.js';
import { argObject, type BuiltinTable, typeErrorOneOf } from './api.js';

function vertices(v: Value | undefined): readonly Value[] {
  if (Array.isArray(v)) return v;
  if (v instanceof SetValue) return [...v.values()];
  return [];
}

function initial(name: string, args: readonly Value[]): readonly Value[] {
  const v = args[1] ?? null;
  if (!Array.isArray(v) && !(v instanceof SetValue)) throw typeErrorOneOf(name, 2, ['array', 'set'], v);
  return vertices(v);
}

/** Adds to `out` every path from `node` (appended to `path`) until a leaf, a missing node or a cycle. */
function paths(graph: ObjectValue, node: Value, path: readonly Value[], seen: SetValue, out: SetValue): void {
  const edges = graph.get(node);
  if (edges === undefined) {
    out.add(path);
    return;
  }
  const here = [...path, node];
  const next = vertices(edges);
  if (next.length === 0) {
    out.add(here);
    return;
  }
  const reached = seen.clone();
  reached.add(node);
  for (const n of next) {
    if (reached.has(n)) out.add(here);
    else paths(graph, n, here, reached, out);
  }
}

export const graphBuiltins: BuiltinTable = {
  'graph.reachable': {
    arity: 2,
    fn: (args) => {
      const graph = argObject('graph.reachable', args, 0);
      const queue = [...initial('graph.reachable', args)];
      const reached = new SetValue();
      for (let i = 0; i < queue.length; i++) {
        const node = queue[i]!;
        const edges = graph.get(node);
        if (edges === undefined) continue;
        for (const n of vertices(edges)) if (!reached.has(n)) queue.push(n);
        reached.add(node);
      }
      return reached;
    },
  },
  'graph.reachable_paths': {
    arity: 2,
    fn: (args) => {
      const graph = argObject('graph.reachable_paths', args, 0);
      const out = new SetValue();
      for (const node of initial('graph.reachable_paths', args)) {
        const edges = graph.get(node);
        if (edges === undefined) continue;
        const next = vertices(edges);
        if (next.length === 0) {
          out.add([node]);
          continue;
        }
        const seen = new SetValue();
        seen.add(node);
        for (const n of next) paths(graph, n, [node], seen, out);
      }
      return out;
    },
  },
};
