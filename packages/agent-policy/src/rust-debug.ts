/**
 * Rust's `{:?}` formatting of a string. The kata agent passes its status messages through
 * `ttrpc_error(code, msg)`, which formats `msg` with `{:?}`: the wire message is the text in double quotes,
 * with `"`, `\` and control characters escaped. Clients that match on the text see these quotes.
 */

// Characters `char::escape_debug` writes as `\u{…}`: those outside Rust's "printable" table (general
// categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than the space) and grapheme extenders.
const UNPRINTABLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}\p{Grapheme_Extend}]/u;

/** `format!("{:?}", s)` for a Rust `&str`. */
export function rustDebugString(s: string): string {
  let out = '"';
  for (const ch of s) {
    switch (ch) {
      case '\0':
        out += '\\0';
        break;
      case '\t':
        out += '\\t';
        break;
      case '\r':
        out += '\\r';
        break;
      case '\n':
        out += '\\n';
        break;
      case '\\':
        out += '\\\\';
        break;
      case '"':
        out += '\\"';
        break;
      default:
        if (ch !== ' ' && UNPRINTABLE.test(ch)) {
          out += `\\u{${ch.codePointAt(0)!.toString(16)}}`;
        } else {
          out += ch;
        }
    }
  }
  return `${out}"`;
}
