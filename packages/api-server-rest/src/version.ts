/**
 * `version` of `/info` and `--version`. Upstream reports
 * `Guest Components Version: <git describe>`; clients only show it, so the
 * prefix is kept and the version names this implementation.
 */
export const API_SERVER_REST_VERSION = 'Guest Components Version: broker-0.1.0';
