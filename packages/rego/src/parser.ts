// Recursive-descent parser for Rego modules and queries (v1 by default, v0 on request).
import type {
  ArithOp,
  AssignOp,
  CallExpr,
  CmpOp,
  Expr,
  Import,
  Literal,
  Loc,
  Module,
  Query,
  Rule,
  RuleAssign,
  RuleBody,
  RuleHead,
  SourceFile,
  Stmt,
  VarExpr,
  WithModifier,
} from './ast.js';
import { refComponents } from './ast.js';
import { RegoLimitError, RegoParseError } from './errors.js';
import { Lexer, type Token } from './lexer.js';
import { normalizeInt } from './value.js';

const FUTURE_KEYWORDS = ['contains', 'every', 'if', 'in'] as const;

/** A braced or bracketed text that turned out not to be a query; the caller re-parses it as a term. */
class NotAQuery extends RegoParseError {}
const KEYWORDS = new Set([
  'as',
  'default',
  'else',
  'false',
  'import',
  'package',
  'not',
  'null',
  'some',
  'true',
  'with',
]);

export interface ParseOptions {
  /** Parse as Rego v1 (keywords always on, `if`/`contains` required). */
  readonly regoV1: boolean;
  /** Maximum nesting of terms, comprehensions and bodies. */
  readonly maxNesting: number;
}

export class Parser {
  private readonly lexer: Lexer;
  private tok: Token;
  /** Line and end offset of the last consumed token. */
  private lastLine = 0;
  private lastEnd = 0;
  private readonly futureKeywords = new Map<string, Loc | undefined>();
  private regoV1 = false;
  private depth = 0;

  constructor(
    private readonly file: SourceFile,
    private readonly opts: ParseOptions,
  ) {
    this.lexer = new Lexer(file.text, file.name);
    this.tok = this.lexer.next();
    if (opts.regoV1) this.turnOnV1(undefined);
  }

  // ---- token helpers ----

  private kind(): Token['kind'] {
    return this.tok.kind;
  }

  private text(): string {
    const k = this.kind();
    return k === 'string' || k === 'rawstring' ? '' : this.tok.text;
  }

  private advance(): void {
    this.lastLine = this.tok.line;
    this.lastEnd = this.tok.end;
    if (this.kind() === 'string') this.lastEnd++;
    this.tok = this.lexer.next();
  }

  private err(msg: string, tok: Token = this.tok): RegoParseError {
    return new RegoParseError(this.file.name, tok.line, tok.col, msg);
  }

  private errAt(loc: Loc, msg: string): RegoParseError {
    return new RegoParseError(this.file.name, loc.line, loc.col, msg);
  }

  private expect(text: string, context: string): void {
    if (this.text() !== text) throw this.err(`expecting \`${text}\` ${context}`);
    this.advance();
  }

  private loc(tok: Token = this.tok): Loc {
    const start =
      tok.kind === 'string' ? tok.start - 1 : tok.kind === 'rawstring' ? tok.start - 1 : tok.start;
    return { file: this.file, line: tok.line, col: tok.col, start, end: tok.end };
  }

  private close(loc: Loc): Loc {
    loc.end = this.lastEnd;
    return loc;
  }

  private enter(): void {
    if (++this.depth > this.opts.maxNesting) {
      throw new RegoLimitError(
        'nesting_depth',
        `${this.file.name}:${this.tok.line}:${this.tok.col}: nesting exceeds the limit of ${this.opts.maxNesting}`,
      );
    }
  }

  private leave(): void {
    this.depth--;
  }

  /** Bounds operator and reference chains, which build trees as deep as they are long. */
  private checkChain(n: number): void {
    if (n > this.opts.maxNesting * 8) {
      throw new RegoLimitError(
        'nesting_depth',
        `${this.file.name}:${this.tok.line}:${this.tok.col}: expression chain exceeds the limit of ${this.opts.maxNesting * 8}`,
      );
    }
  }

  private isKeyword(t: string): boolean {
    return KEYWORDS.has(t);
  }

  private isFutureKeyword(kw: string): boolean {
    return this.futureKeywords.has(kw);
  }

  /** `import rego.v2`: `not { ... }` negates a body. */
  private notBodies = false;

  private turnOnV1(loc: Loc | undefined): void {
    this.regoV1 = true;
    for (const kw of FUTURE_KEYWORDS) this.setFutureKeyword(kw, loc);
  }

  private setFutureKeyword(kw: string, loc: Loc | undefined): void {
    const prev = this.futureKeywords.get(kw);
    if (loc !== undefined && prev !== undefined && this.regoV1) {
      throw this.errAt(loc, `this import shadows previous import of \`${kw}\``);
    }
    this.futureKeywords.set(kw, loc);
    if (kw === 'every' && !this.regoV1) this.futureKeywords.set('in', loc);
  }

  // ---- terms ----

  private parseVar(): VarExpr {
    const t = this.tok;
    if (t.kind !== 'ident') throw this.err('expecting identifier');
    if (this.isKeyword(t.text) || (this.isFutureKeyword(t.text) && t.text !== 'contains')) {
      throw this.err(`unexpected keyword \`${t.text}\``);
    }
    const loc = this.loc();
    this.advance();
    return { k: 'var', name: t.text, loc };
  }

  private parseRefField(): Token {
    const t = this.tok;
    if (t.kind !== 'ident') throw this.err('expecting identifier');
    this.advance();
    return t;
  }

  private numberExpr(t: Token, text: string, loc: Loc): Expr {
    if (/^-?\d+$/.test(text)) return { k: 'num', v: normalizeInt(BigInt(text)), loc };
    // An integer in exponent or decimal form beyond 2^53 stays exact, as OPA keeps it (1e30 + 1).
    const exact = exactInteger(text);
    if (exact !== undefined) return { k: 'num', v: exact, loc };
    const v = Number(text);
    if (!Number.isFinite(v)) throw this.err('number out of range', t);
    return { k: 'num', v: Object.is(v, -0) ? 0 : v, loc };
  }

  private parseScalarOrVar(): Expr {
    const t = this.tok;
    switch (t.kind) {
      case 'number': {
        const loc = this.loc();
        this.advance();
        return this.numberExpr(t, t.text, loc);
      }
      case 'string':
      case 'rawstring': {
        const loc = this.loc();
        this.advance();
        loc.end = this.lastEnd;
        return { k: 'str', v: t.value ?? '', raw: t.kind === 'rawstring', loc };
      }
      case 'ident': {
        if (t.text === 'null' || t.text === 'true' || t.text === 'false') {
          const loc = this.loc();
          this.advance();
          if (t.text === 'null') return { k: 'null', loc };
          return { k: 'bool', v: t.text === 'true', loc };
        }
        return this.parseVar();
      }
      default:
        throw this.err('expecting expression');
    }
  }

  /** Primary term followed by `.field`, `[index]` and call suffixes. */
  private parseRef(): Expr {
    this.enter();
    try {
      return this.parseRefInner();
    } finally {
      this.leave();
    }
  }

  private parseRefInner(): Expr {
    const startTok = this.loc();
    const t = this.text();
    let term: Expr;
    if (t === '[' && this.kind() === 'symbol') term = this.parseArrayOrCompr();
    else if (t === '{' && this.kind() === 'symbol') term = this.parseSetObjectOrCompr();
    else if (t === 'set(' && this.kind() === 'symbol') {
      const loc = this.loc();
      this.advance();
      this.expect(')', 'while parsing empty set');
      return { k: 'set', items: [], loc: this.close(loc) };
    } else if (t === '(' && this.kind() === 'symbol') {
      this.advance();
      const e = this.parseExpr();
      this.expect(')', 'while parsing parenthesized expression');
      return e;
    } else if (t === '-' && this.kind() === 'symbol') {
      const loc = this.loc();
      this.advance();
      const e = this.parseInExpr();
      return { k: 'neg', expr: e, loc: this.close(loc) };
    } else term = this.parseScalarOrVar();

    let possibleFcn = isPath(term);
    let chain = 0;
    for (;;) {
      this.checkChain(++chain);
      const tt = this.text();
      if ((tt === '.' || tt === '[') && this.kind() === 'symbol') {
        if (this.tok.start !== this.lastEnd) {
          // A `.` or `[` on a new line starts a new literal.
          if (this.lastLine !== this.tok.line) break;
          throw this.err(`invalid whitespace before ${tt}`);
        }
        const sep = this.tok;
        if (tt === '.') {
          this.advance();
          const field = this.parseRefField();
          if (field.start !== sep.end) throw this.err('invalid whitespace between . and identifier', field);
          term = { k: 'dot', refr: term, field: field.text, loc: this.spanFrom(startTok) };
        } else {
          this.advance();
          const index = this.parseInExpr();
          possibleFcn = possibleFcn && index.k === 'str';
          this.expect(']', 'while parsing bracketed reference');
          term = { k: 'brack', refr: term, index, loc: this.spanFrom(startTok) };
        }
        continue;
      }
      if (tt === '(' && this.kind() === 'symbol' && possibleFcn) {
        this.advance();
        const params: Expr[] = [];
        if (this.text() !== ')') {
          params.push(this.parseInExpr());
          while (this.text() === ',') {
            this.advance();
            if (this.text() === ')' || this.kind() === 'eof') break;
            params.push(this.parseInExpr());
          }
        }
        this.expect(')', 'while parsing call expr');
        term = { k: 'call', fcn: term, params, loc: this.spanFrom(startTok) };
        possibleFcn = false;
        continue;
      }
      break;
    }
    return term;
  }

  private spanFrom(start: Loc): Loc {
    return { ...start, end: this.lastEnd };
  }

  /** After a term and `|`: the comprehension's query, or undefined when the text is not a query. */
  private tryComprQuery(end: string): Query | undefined {
    const save = this.saveState();
    this.advance();
    try {
      return this.parseQuery(end, true);
    } catch (e) {
      if (!(e instanceof NotAQuery)) throw e;
      this.restoreState(save);
      return undefined;
    }
  }

  private parseArrayOrCompr(): Expr {
    const loc = this.loc();
    this.advance();
    if (this.text() === ']') {
      this.advance();
      return { k: 'array', items: [], loc: this.close(loc) };
    }
    // A comprehension's term is a single term; anything else makes this an array.
    const term = this.parseRef();
    if (this.text() === '|' && this.kind() === 'symbol') {
      const query = this.tryComprQuery(']');
      if (query) return { k: 'arrcompr', term, query, loc: this.close(loc) };
    }
    const items = [this.parseInExpr(false, term)];
    while (this.text() === ',') {
      this.advance();
      if (this.text() === ']' || this.kind() === 'eof') break;
      items.push(this.parseInExpr());
    }
    this.expect(']', 'while parsing array');
    return { k: 'array', items, loc: this.close(loc) };
  }

  private parseSetObjectOrCompr(): Expr {
    const loc = this.loc();
    this.advance();
    if (this.text() === '}') {
      this.advance();
      return { k: 'object', fields: [], loc: this.close(loc) };
    }
    const term = this.parseRef();
    if (this.text() === '|' && this.kind() === 'symbol') {
      const query = this.tryComprQuery('}');
      if (query) return { k: 'setcompr', term, query, loc: this.close(loc) };
    }
    const first = this.parseInExpr(false, term);
    if (this.text() !== ':') {
      const items = [first];
      while (this.text() === ',') {
        this.advance();
        if (this.text() === '}' || this.kind() === 'eof') break;
        items.push(this.parseInExpr());
      }
      this.expect('}', 'while parsing set');
      return { k: 'set', items, loc: this.close(loc) };
    }
    this.advance();
    const valueTerm = this.parseRef();
    if (this.text() === '|' && this.kind() === 'symbol') {
      const query = this.tryComprQuery('}');
      if (query) return { k: 'objcompr', key: first, value: valueTerm, query, loc: this.close(loc) };
    }
    const value = this.parseInExpr(false, valueTerm);
    const fields: (readonly [Expr, Expr])[] = [[first, value]];
    while (this.text() === ',') {
      this.advance();
      if (this.text() === '}' || this.kind() === 'eof') break;
      const k = this.parseInExpr();
      this.expect(':', 'while parsing object item');
      const v = this.parseInExpr();
      fields.push([k, v]);
    }
    this.expect('}', 'while parsing object');
    return { k: 'object', fields, loc: this.close(loc) };
  }

  // ---- operators, lowest precedence last ----

  private parseMulExpr(prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = prefix ?? this.parseRef();
    let chain = 0;
    for (;;) {
      this.checkChain(++chain);
      const t = this.text();
      if (this.kind() !== 'symbol' || (t !== '*' && t !== '/' && t !== '%')) return e;
      this.advance();
      const rhs = this.parseRef();
      e = { k: 'arith', op: t as ArithOp, lhs: e, rhs, loc: this.spanFrom(startTok) };
    }
  }

  private parseArithExpr(prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = this.parseMulExpr(prefix);
    let chain = 0;
    for (;;) {
      this.checkChain(++chain);
      const t = this.text();
      let rhs: Expr;
      let op: ArithOp;
      if (this.kind() === 'symbol' && (t === '+' || t === '-')) {
        op = t;
        this.advance();
        rhs = this.parseMulExpr();
      } else if (this.kind() === 'number' && t.startsWith('-')) {
        // `x -1` lexes the sign into the number; read it as subtraction.
        op = '-';
        const numTok = this.tok;
        const loc: Loc = { ...this.loc(), start: numTok.start + 1, col: numTok.col + 1 };
        this.advance();
        rhs = this.numberExpr(numTok, t.slice(1), loc);
      } else {
        return e;
      }
      e = { k: 'arith', op, lhs: e, rhs, loc: this.spanFrom(startTok) };
    }
  }

  private parseIntersection(prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = this.parseArithExpr(prefix);
    let chain = 0;
    while (this.text() === '&' && this.kind() === 'symbol') {
      this.checkChain(++chain);
      this.advance();
      const rhs = this.parseArithExpr();
      e = { k: 'setop', op: '&', lhs: e, rhs, loc: this.spanFrom(startTok) };
    }
    return e;
  }

  private parseUnion(noPipe: boolean, prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = this.parseIntersection(prefix);
    let chain = 0;
    while (!noPipe && this.text() === '|' && this.kind() === 'symbol') {
      this.checkChain(++chain);
      this.advance();
      const rhs = this.parseIntersection();
      e = { k: 'setop', op: '|', lhs: e, rhs, loc: this.spanFrom(startTok) };
    }
    return e;
  }

  private parseBoolExpr(noPipe = false, prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = this.parseUnion(noPipe, prefix);
    let chain = 0;
    for (;;) {
      this.checkChain(++chain);
      const t = this.text();
      if (
        this.kind() !== 'symbol' ||
        (t !== '<' && t !== '<=' && t !== '==' && t !== '>=' && t !== '>' && t !== '!=')
      ) {
        return e;
      }
      this.advance();
      const rhs = this.parseUnion(noPipe);
      e = { k: 'cmp', op: t as CmpOp, lhs: e, rhs, loc: this.spanFrom(startTok) };
    }
  }

  private parseMembershipTail(startTok: Loc, first: Expr, second: Expr | undefined, noPipe: boolean): Expr {
    let e = first;
    let value = second;
    for (;;) {
      if (this.text() !== 'in') throw this.err('expecting `in` while parsing membership expression');
      this.advance();
      const collection = this.parseBoolExpr(noPipe);
      const [key, val] = value !== undefined ? [e, value] : [undefined, e];
      e = { k: 'member', key, value: val, collection, loc: this.spanFrom(startTok) };
      value = undefined;
      if (this.text() !== 'in') return e;
    }
  }

  /** Expression allowed as an item, argument or index: `in` without the `k, v in` form. */
  private parseInExpr(noPipe = false, prefix?: Expr): Expr {
    const startTok = prefix ? prefix.loc : this.loc();
    let e = this.parseBoolExpr(noPipe, prefix);
    while (this.text() === 'in' && this.isFutureKeyword('in')) {
      e = this.parseMembershipTail(startTok, e, undefined, noPipe);
    }
    return e;
  }

  /** Full expression, including `k, v in coll`. */
  parseExpr(): Expr {
    this.enter();
    try {
      const startTok = this.loc();
      let e = this.parseBoolExpr();
      if (this.text() === ',' && this.isFutureKeyword('in')) {
        const save = this.saveState();
        this.advance();
        const value = this.parseBoolExpr();
        if (this.text() === 'in') {
          e = this.parseMembershipTail(startTok, e, value, false);
        } else {
          this.restoreState(save);
        }
      }
      while (this.text() === 'in' && this.isFutureKeyword('in')) {
        e = this.parseMembershipTail(startTok, e, undefined, false);
      }
      return e;
    } finally {
      this.leave();
    }
  }

  private saveState(): { tok: Token; lexer: Lexer; lastLine: number; lastEnd: number } {
    return {
      tok: this.tok,
      lexer: Object.assign(Object.create(Object.getPrototypeOf(this.lexer)), this.lexer) as Lexer,
      lastLine: this.lastLine,
      lastEnd: this.lastEnd,
    };
  }

  private restoreState(s: { tok: Token; lexer: Lexer; lastLine: number; lastEnd: number }): void {
    this.tok = s.tok;
    Object.assign(this.lexer, s.lexer);
    this.lastLine = s.lastLine;
    this.lastEnd = s.lastEnd;
  }

  private parseAssignExpr(): Expr {
    const startTok = this.loc();
    const lhs = this.parseExpr();
    const t = this.text();
    if (this.kind() !== 'symbol' || (t !== '=' && t !== ':=')) return lhs;
    if (t === ':=' && this.regoV1 && lhs.k === 'var' && (lhs.name === 'input' || lhs.name === 'data')) {
      throw this.err(`${lhs.name} cannot be shadowed`);
    }
    this.advance();
    const rhs = this.parseExpr();
    return { k: 'assign', op: t as AssignOp, lhs, rhs, loc: this.spanFrom(startTok) };
  }

  // ---- literals and queries ----

  private parseWithModifiers(): WithModifier[] {
    const out: WithModifier[] = [];
    while (this.text() === 'with' && this.kind() === 'ident') {
      const loc = this.loc();
      this.advance();
      const refr = this.parsePathRef();
      this.expect('as', 'while parsing with-modifier expression');
      const as = this.parseInExpr();
      out.push({ refr, as, loc: this.close(loc) });
    }
    return out;
  }

  private parseEvery(): Literal {
    const loc = this.loc();
    this.advance();
    const first = this.parseVar();
    let key: VarExpr | undefined;
    let value = first;
    if (this.text() === ',') {
      this.advance();
      key = first;
      value = this.parseVar();
    }
    this.expect('in', 'while parsing `every` statement');
    const domain = this.parseBoolExpr();
    if (this.text() !== '{') throw this.err('expecting `{` while parsing `every` statement');
    this.advance();
    const query = this.parseQuery('}');
    return { k: 'every', key, value, domain, query, loc: this.close(loc) };
  }

  private parseSome(): Literal {
    const loc = this.loc();
    this.advance();
    const refs: Expr[] = [this.parseRef()];
    while (this.text() === ',') {
      this.advance();
      refs.push(this.parseRef());
    }
    if (this.text() !== 'in' || !this.isFutureKeyword('in')) {
      const vars: VarExpr[] = [];
      for (const r of refs) {
        if (r.k !== 'var') throw this.errAt(r.loc, `encountered \`${textOf(r)}\` while expecting identifier`);
        vars.push(r);
      }
      return { k: 'somevars', vars, loc: this.close(loc) };
    }
    if (refs.length > 2) {
      throw this.errAt(refs[2]!.loc, `encountered \`${textOf(refs[2]!)}\` while expecting \`in\``);
    }
    this.advance();
    const collection = this.parseBoolExpr();
    const [key, value] = refs.length === 2 ? [refs[0], refs[1]!] : [undefined, refs[0]!];
    return { k: 'somein', key, value, collection, loc: this.close(loc) };
  }

  private parseLiteral(): Literal {
    const t = this.text();
    if (this.kind() === 'ident') {
      if (t === 'some') return this.parseSome();
      if (t === 'every' && this.isFutureKeyword('every')) return this.parseEvery();
    }
    const loc = this.loc();
    let not = false;
    if (t === 'not' && this.kind() === 'ident') {
      this.advance();
      not = true;
    }
    if (not && this.notBodies && this.kind() === 'symbol' && this.text() === '{') {
      // `not { q }` holds when q has no solution: `count([true | q]) == 0`.
      const bodyLoc = this.loc();
      this.advance();
      const query = this.parseQuery('}');
      const at = this.close(bodyLoc);
      const solutions: Expr = {
        k: 'call',
        fcn: { k: 'var', name: 'count', loc: at },
        params: [{ k: 'arrcompr', term: { k: 'bool', v: true, loc: at }, query, loc: at }],
        loc: at,
      };
      const expr: Expr = { k: 'cmp', op: '==', lhs: solutions, rhs: { k: 'num', v: 0, loc: at }, loc: at };
      return { k: 'expr', expr, loc: this.close(loc) };
    }
    const expr = relationCallForm(this.parseAssignExpr());
    return { k: not ? 'not' : 'expr', expr, loc: this.close(loc) };
  }

  private parseStmt(): Stmt {
    const loc = this.loc();
    const lit = this.parseLiteral();
    const withs = this.parseWithModifiers();
    return { lit, withs, loc: this.close(loc) };
  }

  /**
   * A sequence of literals separated by `;` or newlines, ending at `end` (consumed) or at EOF for end ''.
   * With `tentative`, text that regorus would not treat as a query (a first literal that does not parse,
   * or is followed by `:` or `,`, or a lone `a | b` before the end) raises NotAQuery so the caller can
   * re-parse it as a term.
   */
  private parseQuery(end: string, tentative = false): Query {
    this.enter();
    try {
      const loc = this.loc();
      const save = tentative ? this.saveState() : undefined;
      const notAQuery = (): NotAQuery => {
        if (save) this.restoreState(save);
        return new NotAQuery(this.file.name, loc.line, loc.col, `expecting ${end}`);
      };
      const definite = this.kind() === 'ident' && (this.text() === 'some' || this.text() === 'every');
      let first: Stmt;
      try {
        first = this.parseStmt();
      } catch (e) {
        if (!tentative || e instanceof RegoLimitError || definite) throw e;
        const t = this.text();
        if (this.kind() === 'symbol' && (t === '=' || t === ':=')) throw e;
        throw notAQuery();
      }
      if (tentative) {
        const t = this.text();
        if (this.kind() === 'symbol' && (t === ':' || t === ',')) throw notAQuery();
        if (
          end !== '' &&
          t === end &&
          this.kind() === 'symbol' &&
          first.lit.k === 'expr' &&
          first.lit.expr.k === 'setop' &&
          first.lit.expr.op === '|'
        ) {
          throw notAQuery();
        }
      }
      const stmts: Stmt[] = [first];
      for (;;) {
        const t = this.text();
        if (end !== '' && t === end && this.kind() === 'symbol') break;
        if (this.kind() === 'eof') break;
        if (t === ';' && this.kind() === 'symbol') {
          this.advance();
        } else if (this.lastLine === this.tok.line) {
          break;
        }
        if (end !== '' && this.text() === end && this.kind() === 'symbol') break;
        stmts.push(this.parseStmt());
      }
      if (end !== '') this.expect(end, 'while parsing query');
      return { stmts, loc: this.close(loc) };
    } finally {
      this.leave();
    }
  }

  // ---- rules ----

  private parseRuleAssign(): RuleAssign | undefined {
    const t = this.text();
    if (this.kind() !== 'symbol' || (t !== '=' && t !== ':=')) return undefined;
    const loc = this.loc();
    this.advance();
    const value = this.parseExpr();
    return { op: t as AssignOp, value, loc: this.close(loc) };
  }

  /** `a.b["c"]` with only string brackets, as in package, import and with targets. */
  private parsePathRef(): Expr {
    const startTok = this.loc();
    let refr: Expr = this.parseVar();
    for (;;) {
      const t = this.text();
      if ((t !== '.' && t !== '[') || this.kind() !== 'symbol') return refr;
      if (this.tok.start !== this.lastEnd) throw this.err(`invalid whitespace before ${t}`);
      const sep = this.tok;
      this.advance();
      if (t === '.') {
        const field = this.parseRefField();
        if (field.start !== sep.end) throw this.err('invalid whitespace between . and identifier', field);
        refr = { k: 'dot', refr, field: field.text, loc: this.spanFrom(startTok) };
      } else {
        const st = this.tok;
        if (st.kind !== 'string') throw this.err('expected string');
        const sloc = this.loc();
        this.advance();
        sloc.end = this.lastEnd;
        this.expect(']', 'while parsing bracketed reference');
        refr = {
          k: 'brack',
          refr,
          index: { k: 'str', v: st.value ?? '', raw: false, loc: sloc },
          loc: this.spanFrom(startTok),
        };
      }
    }
  }

  private parseRuleRef(): Expr {
    const startTok = this.loc();
    if (this.kind() !== 'ident') throw this.err('expecting identifier. Failed to parse rule-ref.');
    const v = this.parseVar();
    if (this.regoV1 && (v.name === 'input' || v.name === 'data')) {
      throw this.errAt(v.loc, `${v.name} cannot be shadowed`);
    }
    let term: Expr = v;
    for (;;) {
      const t = this.text();
      if ((t !== '.' && t !== '[') || this.kind() !== 'symbol') return term;
      if (this.tok.start !== this.lastEnd) throw this.err(`invalid whitespace before ${t}`);
      const sep = this.tok;
      this.advance();
      if (t === '.') {
        const field = this.parseRefField();
        if (field.start !== sep.end) throw this.err('invalid whitespace between . and identifier', field);
        term = { k: 'dot', refr: term, field: field.text, loc: this.spanFrom(startTok) };
      } else {
        const index = this.parseExpr();
        this.expect(']', 'while parsing bracketed reference');
        term = { k: 'brack', refr: term, index, loc: this.spanFrom(startTok) };
      }
    }
  }

  private parseRuleHead(): RuleHead {
    const loc = this.loc();
    const refr = this.parseRuleRef();
    const t = this.text();
    if (t === '(' && this.kind() === 'symbol') {
      this.advance();
      const args: Expr[] = [];
      if (this.text() !== ')') {
        args.push(this.parseRef());
        while (this.text() === ',') {
          this.advance();
          if (this.text() === ')' || this.kind() === 'eof') break;
          args.push(this.parseRef());
        }
      }
      this.expect(')', 'while parsing function rule args');
      const assign = this.parseRuleAssign();
      return { k: 'func', refr, args, assign, loc: this.close(loc) };
    }
    if (t === 'contains' && this.kind() === 'ident' && this.isFutureKeyword('contains')) {
      this.advance();
      const key = this.parseExpr();
      return { k: 'set', refr, key, loc: this.close(loc) };
    }
    const assign = this.parseRuleAssign();
    this.close(loc);
    const next = this.text();
    const isSetFollower = !(this.kind() === 'ident' && (this.isKeyword(next) || this.isFutureKeyword(next)));
    if (assign === undefined && isSetFollower) {
      if (refr.k === 'brack' && refr.refr.k === 'var') {
        return { k: 'set', refr: refr.refr, key: refr.index, loc };
      }
      if (refr.k === 'dot' && refr.refr.k === 'var') {
        return { k: 'set', refr, key: undefined, loc };
      }
    }
    return { k: 'compr', refr, assign, loc };
  }

  /** `if` followed by a braced query or a single literal. */
  private parseIfBody(): Query {
    if (this.text() === '{' && this.kind() === 'symbol') {
      const save = this.saveState();
      this.advance();
      try {
        return this.parseQuery('}', true);
      } catch (e) {
        if (!(e instanceof NotAQuery)) throw e;
        // `if {1 | 1}` and the like: a single literal that starts with `{`.
        this.restoreState(save);
      }
    }
    return this.singleLiteralQuery();
  }

  private singleLiteralQuery(): Query {
    const loc = this.loc();
    const stmt = this.parseStmt();
    return { stmts: [stmt], loc: this.close(loc) };
  }

  private parseRuleBodies(): RuleBody[] {
    const bodies: RuleBody[] = [];
    const loc = this.loc();
    let hasQuery = false;
    const t = this.text();
    if (t === 'if' && this.kind() === 'ident' && this.isFutureKeyword('if')) {
      this.advance();
      const query = this.parseIfBody();
      bodies.push({ assign: undefined, isElse: false, query, loc: this.close(loc) });
      hasQuery = true;
    } else if (t === '{' && this.kind() === 'symbol') {
      if (this.regoV1) throw this.err('`if` keyword is required before rule body');
      this.advance();
      const query = this.parseQuery('}');
      bodies.push({ assign: undefined, isElse: false, query, loc: this.close(loc) });
      hasQuery = true;
    }
    if (!hasQuery) return bodies;
    if (this.text() === '{' && this.kind() === 'symbol') {
      while (this.text() === '{' && this.kind() === 'symbol') {
        const bl = this.loc();
        this.advance();
        const query = this.parseQuery('}');
        bodies.push({ assign: undefined, isElse: false, query, loc: this.close(bl) });
      }
    } else if (this.text() === 'else' && this.kind() === 'ident') {
      this.parseElseBlocks(bodies);
    }
    return bodies;
  }

  private parseElseBlocks(bodies: RuleBody[]): void {
    for (;;) {
      const loc = this.loc();
      const t = this.text();
      if (t === '{' && this.kind() === 'symbol') throw this.err('expected `else` keyword');
      if (t !== 'else' || this.kind() !== 'ident') return;
      this.advance();
      const assign = this.parseRuleAssign();
      const n = this.text();
      if (n === 'if' && this.kind() === 'ident' && this.isFutureKeyword('if')) {
        this.advance();
        const query = this.parseIfBody();
        bodies.push({ assign, isElse: true, query, loc: this.close(loc) });
      } else if (n === '{' && this.kind() === 'symbol') {
        if (this.regoV1) throw this.errAt(loc, '`if` keyword is required before rule body');
        this.advance();
        const query = this.parseQuery('}');
        bodies.push({ assign, isElse: true, query, loc: this.close(loc) });
      } else if (assign === undefined) {
        throw this.err('expected assignment or query after `else`');
      } else {
        const qloc: Loc = { ...loc, end: loc.start };
        bodies.push({ assign, isElse: true, query: { stmts: [], loc: qloc }, loc: this.close(loc) });
        return;
      }
    }
  }

  private parseDefaultRule(): Rule {
    const loc = this.loc();
    this.advance();
    const refr = this.parseRuleRef();
    const args: VarExpr[] = [];
    if (this.text() === '(' && this.kind() === 'symbol') {
      this.advance();
      if (this.text() !== ')') {
        for (;;) {
          const a = this.parseVar();
          if (a.name !== '_' && args.some((x) => x.name === a.name)) {
            throw this.errAt(a.loc, 'repeating parameter name');
          }
          args.push(a);
          if (this.text() === ')' || this.kind() === 'eof') break;
          this.expect(',', 'while parsing default rule parameters');
        }
      }
      this.expect(')', 'while parsing default rule parameters');
    }
    const t = this.text();
    if (this.kind() !== 'symbol' || (t !== '=' && t !== ':=')) {
      throw this.err('expecting `:=` while parsing default rule');
    }
    this.advance();
    const value = this.parseRef();
    return { k: 'default', refr, args, value, loc: this.close(loc) };
  }

  private parseRule(): Rule {
    if (this.text() === 'default' && this.kind() === 'ident') return this.parseDefaultRule();
    const loc = this.loc();
    const head = this.parseRuleHead();
    const bodies = this.parseRuleBodies();
    this.close(loc);
    if (head.k === 'set' && bodies.length > 1 && bodies[1]!.isElse) {
      throw this.errAt(bodies[1]!.loc, 'else cannot be used with set rules');
    }
    if (this.regoV1 && bodies.length === 0) {
      if ((head.k === 'compr' || head.k === 'func') && head.assign === undefined) {
        throw this.errAt(loc, 'rule must have a body or assignment');
      }
      if (head.k === 'set' && head.key === undefined) {
        const comps = refComponents(head.refr);
        if (comps !== undefined && comps.length === 2) {
          throw this.errAt(loc, '`contains` keyword is required for partial set rules');
        }
        throw this.errAt(loc, 'rule must have a body or assignment');
      }
    }
    return { k: 'spec', head, bodies, loc };
  }

  private parseImports(): Import[] {
    const imports: Import[] = [];
    while (this.text() === 'import' && this.kind() === 'ident') {
      const loc = this.loc();
      this.advance();
      const refr = this.parsePathRef();
      const path = refComponents(refr) ?? [];
      const head = path[0] ?? '';
      if (head !== 'data' && head !== 'future' && head !== 'input' && head !== 'rego') {
        throw this.errAt(refr.loc, 'import path must begin with one of: {data, future, input, rego}');
      }
      let isFuture = false;
      if (head === 'rego') {
        if (path.length !== 2 || (path[1] !== 'v1' && path[1] !== 'v2'))
          throw this.errAt(refr.loc, 'invalid import, must be `rego.v1`');
        this.turnOnV1(loc);
        // OPA's `rego.v2` preview: v1 plus negated bodies, `not { a; b }`.
        if (path[1] === 'v2') this.notBodies = true;
        isFuture = true;
      } else if (head === 'future') {
        if (path[1] !== 'keywords') throw this.errAt(refr.loc, 'invalid import, must be `future.keywords`');
        if (path.length === 2) {
          for (const kw of FUTURE_KEYWORDS) this.setFutureKeyword(kw, loc);
        } else if (path.length === 3 && (FUTURE_KEYWORDS as readonly string[]).includes(path[2]!)) {
          this.setFutureKeyword(path[2]!, loc);
        } else if (path.length === 3 && path[2] === 'not') {
          // `not` is always a keyword; newer OPA versions accept this import as a no-op.
        } else {
          throw this.errAt(refr.loc, 'invalid future keyword');
        }
        isFuture = true;
      }
      let alias: string | undefined;
      if (this.text() === 'as' && this.kind() === 'ident') {
        if (isFuture) throw this.err('`future` imports cannot be aliased');
        this.advance();
        const v = this.parseVar();
        if (v.name === '_') throw this.errAt(v.loc, '`_` cannot be used as alias');
        alias = v.name;
      }
      const imp: Import = { refr, path, alias, loc: this.close(loc) };
      if (!isFuture) {
        for (const prev of imports) {
          const same =
            (prev.alias !== undefined && prev.alias === alias) ||
            (prev.alias === undefined && alias === undefined && prev.path.join('.') === path.join('.'));
          if (same)
            throw this.errAt(
              loc,
              'import shadows following import defined earlier: this import shadows previous import',
            );
        }
      }
      imports.push(imp);
    }
    return imports;
  }

  parseModule(): Module {
    if (this.text() !== 'package' || this.kind() !== 'ident')
      throw this.err('expecting `package` Missing package declaration.');
    this.advance();
    const pkgRefr = this.parsePathRef();
    const pkg = refComponents(pkgRefr) ?? [];
    const imports = this.parseImports();
    const rules: Rule[] = [];
    while (this.kind() !== 'eof') {
      if (this.text() === 'import' && this.kind() === 'ident') throw this.err('unexpected keyword `import`');
      rules.push(this.parseRule());
    }
    return { file: this.file, pkg, pkgRefr, imports, rules, regoV1: this.regoV1 };
  }

  parseUserQuery(): Query {
    if (this.kind() === 'eof') throw this.err('empty query');
    const q = this.parseQuery('');
    if (this.kind() !== 'eof') throw this.err('expecting EOF');
    return q;
  }
}

function isPath(e: Expr): boolean {
  let cur = e;
  for (;;) {
    if (cur.k === 'var') return true;
    if (cur.k === 'dot') cur = cur.refr;
    else if (cur.k === 'brack' && cur.index.k === 'str') cur = cur.refr;
    else return false;
  }
}

function textOf(e: Expr): string {
  return e.loc.file.text.slice(e.loc.start, e.loc.end);
}

export function parseModule(file: SourceFile, opts: ParseOptions): Module {
  return new Parser(file, opts).parseModule();
}

export function parseQuery(file: SourceFile, opts: ParseOptions): Query {
  return new Parser(file, opts).parseUserQuery();
}

/**
 * OPA's function-call form of a relation: `[path, value] := walk(x)` (or `=`, either side) is
 * `walk(x, [path, value])`, one result per pair.
 */
function relationCallForm(e: Expr): Expr {
  if (e.k !== 'assign') return e;
  const isWalk = (x: Expr): x is CallExpr =>
    x.k === 'call' && x.fcn.k === 'var' && x.fcn.name === 'walk' && x.params.length === 1;
  if (isWalk(e.rhs)) return { k: 'call', fcn: e.rhs.fcn, params: [e.rhs.params[0]!, e.lhs], loc: e.loc };
  if (e.op === '=' && isWalk(e.lhs)) {
    return { k: 'call', fcn: e.lhs.fcn, params: [e.lhs.params[0]!, e.rhs], loc: e.loc };
  }
  return e;
}

/** The exact value of a literal like `1e30` or `12.5e3` when it is an integer beyond 2^53 (exponents ≤ 400). */
function exactInteger(text: string): bigint | undefined {
  const m = /^(-?)(\d+)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text);
  if (!m) return undefined;
  const frac = m[3] ?? '';
  let digits = (m[2]! + frac).replace(/^0+(?=\d)/, '');
  let exp = Number(m[4] ?? '0') - frac.length;
  while (exp < 0 && digits.endsWith('0') && digits.length > 1) {
    digits = digits.slice(0, -1);
    exp++;
  }
  if (exp < 0 || exp > 400) return undefined;
  const v = BigInt(digits) * 10n ** BigInt(exp) * (m[1] === '-' ? -1n : 1n);
  return v > 9007199254740991n || v < -9007199254740991n ? v : undefined;
}
