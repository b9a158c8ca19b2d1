/** One line per event, to stderr; the service's only output besides its replies. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Logs `level message {fields}` lines to stderr. */
export const stderrLogger: Logger = {
  info: (message, fields) => write('info', message, fields),
  error: (message, fields) => write('error', message, fields),
};

/** Logs nothing (tests, embedded use). */
export const silentLogger: Logger = { info: () => {}, error: () => {} };

function write(level: string, message: string, fields?: Record<string, unknown>): void {
  const tail = fields === undefined ? '' : ` ${JSON.stringify(fields)}`;
  process.stderr.write(`${new Date().toISOString()} ${level} ${message}${tail}\n`);
}
