// Reading and writing multi-document YAML with limits: inputs are operator files, but an alias bomb or
// a huge file must fail fast rather than exhaust memory.
import { type Document, parseAllDocuments, stringify } from 'yaml';
import { InputError } from './errors.js';

/** Largest YAML input read (bytes). BrokerConfigs, Secrets and pod specs are far smaller. */
export const MAX_YAML_BYTES = 4 * 1024 * 1024;
/** Largest number of documents in one stream. */
export const MAX_YAML_DOCUMENTS = 1000;
const MAX_ALIASES = 100;

/** Parses every document of a YAML stream to plain data; empty documents (`---` alone, `~`) are skipped. */
export function parseYamlDocuments(text: string, source: string): unknown[] {
  const out: unknown[] = [];
  for (const [i, d] of parseYamlStream(text, source).entries()) {
    let v: unknown;
    try {
      v = d.toJS({ maxAliasCount: MAX_ALIASES });
    } catch (e) {
      throw new InputError(`${source}: document ${i + 1}: ${(e as Error).message}`, { cause: e });
    }
    if (v !== null && v !== undefined) out.push(v);
  }
  return out;
}

/** Parses a YAML stream into documents that keep comments and layout (for in-place edits). */
export function parseYamlStream(text: string, source: string): Document[] {
  if (Buffer.byteLength(text, 'utf8') > MAX_YAML_BYTES) {
    throw new InputError(`${source}: larger than ${MAX_YAML_BYTES} bytes`);
  }
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true, strict: true });
  if (!Array.isArray(docs)) {
    // An empty stream parses to an EmptyStream object.
    return [];
  }
  if (docs.length > MAX_YAML_DOCUMENTS) {
    throw new InputError(`${source}: more than ${MAX_YAML_DOCUMENTS} YAML documents`);
  }
  const out: Document[] = [];
  for (const [i, d] of docs.entries()) {
    const err = d.errors[0];
    if (err !== undefined) {
      throw new InputError(`${source}: document ${i + 1} is not valid YAML: ${err.message}`, { cause: err });
    }
    if (d.contents === null) continue;
    out.push(d);
  }
  return out;
}

/** Multi-document YAML of plain objects, in order, each starting with `---`. */
export function stringifyYamlDocuments(objects: readonly unknown[]): string {
  return objects.map((o) => `---\n${stringify(o, { lineWidth: 0, aliasDuplicateObjects: false })}`).join('');
}
