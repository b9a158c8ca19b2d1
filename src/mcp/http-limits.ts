/**
 * How many sessions the HTTP bridge (`mcp --http`) holds and for how long: here, apart from the
 * bridge, so the CLI can show them as flag defaults without loading the MCP SDK.
 */

/** Most MCP sessions open at once (`--max-sessions`, `MATRIX_MCP_MAX_SESSIONS`). */
export const DEFAULT_MAX_SESSIONS = 256;
/** Most MCP sessions open at once under one grant (`--max-sessions-per-grant`, `MATRIX_MCP_MAX_SESSIONS_PER_GRANT`). */
export const DEFAULT_MAX_SESSIONS_PER_GRANT = 16;
/**
 * A session no request reached for this long is closed, in ms: 30 minutes (`--idle-minutes`,
 * `MATRIX_MCP_IDLE_MINUTES`).
 */
export const DEFAULT_IDLE_MS = 30 * 60_000;
