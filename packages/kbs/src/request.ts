// A KBS API request as the HTTP server hands it to the API and the API to a plugin: the router's view
// (method, decoded segments, query) and what the handlers read (credentials, session, body).
export interface ApiRequest {
  readonly method: string;
  /** Request target as received (path and query). */
  readonly uri: string;
  /**
   * Decoded path segments after `/kbs/v0/`; the first names the plugin. None holds `/`, `\` or NUL (the
   * server refuses such paths), so joining them with `/` gives back exactly these segments.
   */
  readonly segments: readonly string[];
  readonly query: Readonly<Record<string, string>>;
  readonly authorization: string | undefined;
  readonly sessionId: string | undefined;
  readonly body: Uint8Array;
  /** The client's address, for the verdict log. */
  readonly peer?: string | undefined;
  /** The request's id (`x-request-id`), in its access-log line and its verdict. */
  readonly requestId?: string | undefined;
}
