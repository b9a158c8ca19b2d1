/**
 * A stdio server's stderr into the host's log, capped: lines cut to a length, and at most so
 * many lines a minute; what is dropped is counted in one line when the minute ends.
 */
import type { Readable } from 'node:stream';
import type { Logger } from '../../bus/log.js';

/** Longest line logged, in characters. */
const MAX_LINE_CHARS = 1_000;
/** Most lines logged a minute per server. */
const MAX_LINES_PER_MINUTE = 100;

/** Follows one server's stderr stream. */
export class StderrLog {
  private windowStart = Date.now();
  private lines = 0;
  private dropped = 0;
  private partial = '';

  constructor(
    private readonly server: string,
    private readonly logger: Logger,
  ) {}

  /** Logs each line of `stream` until it ends. */
  follow(stream: Readable | null): void {
    if (stream === null) return;
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => {
      const text = this.partial + chunk;
      const parts = text.split('\n');
      this.partial = (parts.pop() ?? '').slice(0, MAX_LINE_CHARS);
      for (const line of parts) this.line(line);
    });
    stream.on('end', () => {
      if (this.partial !== '') this.line(this.partial);
      this.partial = '';
    });
    stream.on('error', () => undefined);
  }

  private line(text: string): void {
    const now = Date.now();
    if (now - this.windowStart >= 60_000) {
      if (this.dropped > 0)
        this.logger.info(`mcp.${this.server} stderr: ${this.dropped} lines dropped over the cap last minute`);
      this.windowStart = now;
      this.lines = 0;
      this.dropped = 0;
    }
    if (this.lines >= MAX_LINES_PER_MINUTE) {
      this.dropped++;
      return;
    }
    this.lines++;
    this.logger.info(`mcp.${this.server} stderr: ${text.slice(0, MAX_LINE_CHARS)}`);
  }
}
