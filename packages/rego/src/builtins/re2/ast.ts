// The syntax tree of an RE2 (Go regexp/syntax, Perl flags) regular expression.

/** A character class: sorted, merged code point ranges plus Unicode property tests, optionally negated. */
export interface CharClass {
  /** Pairs lo, hi (inclusive), sorted and non-overlapping. */
  readonly ranges: readonly number[];
  /** Unicode property classes (\p{...}) tested with JS RegExps on single code points. */
  readonly props: readonly RegExp[];
  readonly negated: boolean;
}

export type AssertKind = 'bol' | 'eol' | 'bot' | 'eot' | 'wordb' | 'nwordb';

export type Node =
  | { readonly t: 'empty' }
  | { readonly t: 'lit'; readonly cp: number }
  | { readonly t: 'class'; readonly cls: CharClass }
  | { readonly t: 'any'; readonly nl: boolean }
  | { readonly t: 'assert'; readonly kind: AssertKind }
  | { readonly t: 'cap'; readonly index: number; readonly name: string | undefined; readonly sub: Node }
  | { readonly t: 'concat'; readonly subs: readonly Node[] }
  | { readonly t: 'alt'; readonly subs: readonly Node[] }
  | {
      readonly t: 'rep';
      readonly min: number;
      /** -1 for unbounded. */
      readonly max: number;
      readonly greedy: boolean;
      readonly sub: Node;
    };

export interface Parsed {
  readonly root: Node;
  /** Number of capturing groups. */
  readonly numCap: number;
  /** Group names by index (index 0 is the whole match and has no name). */
  readonly names: readonly (string | undefined)[];
}

/** A pattern RE2 rejects; the message has Go's wording, e.g. "error parsing regexp: invalid escape sequence: `\1`". */
export class RegexSyntaxError extends Error {
  constructor(
    readonly code: string,
    readonly expr: string,
  ) {
    super(`error parsing regexp: ${code}: \`${expr}\``);
    this.name = 'RegexSyntaxError';
  }
}

export const ERR = {
  invalidCharClass: 'invalid character class',
  invalidCharRange: 'invalid character class range',
  invalidEscape: 'invalid escape sequence',
  invalidNamedCapture: 'invalid named capture',
  invalidPerlOp: 'invalid or unsupported Perl syntax',
  invalidRepeatOp: 'invalid nested repetition operator',
  invalidRepeatSize: 'invalid repeat count',
  missingBracket: 'missing closing ]',
  missingParen: 'missing closing )',
  missingRepeatArgument: 'missing argument to repetition operator',
  trailingBackslash: 'trailing backslash at end of expression',
  unexpectedParen: 'unexpected )',
  nestingDepth: 'expression nests too deeply',
  large: 'expression too large',
} as const;
