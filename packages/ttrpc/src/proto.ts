/**
 * Protobuf messages from `.proto` text, via protobufjs reflection.
 *
 * Field names are kept verbatim (`keepCase`) because the services we speak
 * (kata agent, attestation agent, CDH) are matched field-for-field by name
 * in policies and JSON, and their protos mix snake_case and PascalCase.
 */
import protobuf from 'protobufjs';
import { ProtoDecodeError, ProtoEncodeError, ProtoSchemaError } from './errors.js';

export type ProtoRoot = protobuf.Root;

/** Typed encoder/decoder of one message type. */
export interface MessageCodec<T> {
  /** Fully qualified name without the leading dot, e.g. `api.GetResourceRequest`. */
  readonly typeName: string;
  /**
   * Encodes `value`. Absent or `null` members are not written; 64-bit
   * integers may be `bigint`, `number` or decimal strings; `bytes` are Uint8Arrays.
   */
  encode(value: T): Uint8Array;
  /**
   * Decodes bytes into a plain object with proto3 defaults filled in: scalars
   * get their zero value, repeated fields `[]`, maps `{}`, unset message
   * fields `null`, enums their number, 64-bit integers `bigint`, bytes
   * Uint8Arrays. proto3 `optional` fields stay absent when unset.
   * Throws `ProtoDecodeError` for malformed input.
   */
  decode(bytes: Uint8Array): T;
}

/**
 * Parses `.proto` sources (one `package` each) into a new root. Imports of
 * Google's well-known types (`google/protobuf/empty.proto`, `any.proto`,
 * `struct.proto`, `wrappers.proto`, `duration.proto`, `timestamp.proto`, …)
 * are satisfied from protobufjs' built-in copies; any other import must be
 * given as another source. Throws `ProtoSchemaError` on syntax errors or
 * unresolved types.
 */
export function defineProto(...sources: string[]): ProtoRoot {
  const root = new protobuf.Root();
  const imports = new Set<string>();
  for (const source of sources) {
    let parsed: protobuf.IParserResult;
    try {
      parsed = protobuf.parse(source, root, { keepCase: true, alternateCommentMode: true });
    } catch (e) {
      throw new ProtoSchemaError(`invalid .proto text: ${(e as Error).message}`, { cause: e });
    }
    for (const name of [...(parsed.imports ?? []), ...(parsed.weakImports ?? [])]) imports.add(name);
  }
  for (const name of imports) {
    const wellKnown = protobuf.common.get(name) as {
      nested?: Record<string, protobuf.AnyNestedObject>;
    } | null;
    if (wellKnown?.nested) root.addJSON(wellKnown.nested);
  }
  try {
    root.resolveAll();
  } catch (e) {
    throw new ProtoSchemaError(`unresolved .proto types: ${(e as Error).message}`, { cause: e });
  }
  return root;
}

const decodeOptions: protobuf.IConversionOptions = {
  longs: BigInt,
  defaults: true,
  arrays: true,
  objects: true,
};

/** Codec for message `typeName` (`pkg.Msg`) of `root`. Throws `ProtoSchemaError` if it does not exist. */
export function messageCodec<T>(root: ProtoRoot, typeName: string): MessageCodec<T> {
  let type: protobuf.Type;
  try {
    type = root.lookupType(typeName);
  } catch (e) {
    throw new ProtoSchemaError(`no message type ${typeName}`, { cause: e });
  }
  const name = type.fullName.replace(/^\./, '');
  return {
    typeName: name,
    encode(value: T): Uint8Array {
      let message: protobuf.Message;
      try {
        message = type.fromObject(value as Record<string, unknown>);
      } catch (e) {
        throw new ProtoEncodeError(name, (e as Error).message, { cause: e });
      }
      return type.encode(message).finish();
    },
    decode(bytes: Uint8Array): T {
      try {
        return type.toObject(type.decode(bytes), decodeOptions) as T;
      } catch (e) {
        throw new ProtoDecodeError(name, (e as Error).message, { cause: e });
      }
    },
  };
}
