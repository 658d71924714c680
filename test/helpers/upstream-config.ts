// Upstream configuration files (test/vectors) made runnable on a test machine, in a temporary copy: the
// listen address, and absolute file paths, which move under the test's folder.

/** The listen address becomes 127.0.0.1:<port>, replacing `sockets` or added to `[http_server]`. */
export function listenOn(text: string, port: number): string {
  const withoutSockets = text.replace(/^sockets\s*=.*$/m, '');
  return withoutSockets.replace(/^\[http_server\]$/m, `[http_server]\nsockets = ["127.0.0.1:${port}"]`);
}

/** Every absolute path in a string value moves under `dir` (URLs and `^/kbs…` regexes are not paths). */
export function relocate(text: string, dir: string): string {
  return text.replace(/"(\/[^"]*)"/g, (_m, p: string) => JSON.stringify(`${dir}${p}`));
}
