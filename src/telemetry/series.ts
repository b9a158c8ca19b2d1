/**
 * Which series a call is counted in. A label is never a name the caller chose: a call without a
 * valid grant is counted as `(unverified)`, a tool its session does not have as `(unknown)`,
 * whatever name either sent; only a tool the session resolved is counted by its name. And a
 * metric holds at most `MAX_SERIES_PER_METRIC` series over the process's life: past it, every
 * new combination of labels is counted in the one `(overflow)` series.
 */
import type { AttributeValue } from '@opentelemetry/api';
import type { ObservedCall } from './calls.js';

/** The tool label of calls without a valid grant. */
export const UNVERIFIED_TOOL = '(unverified)';
/** The tool label of calls naming a tool their session does not have. */
export const UNKNOWN_TOOL = '(unknown)';
/** The tool label of calls past the series bound. */
export const OVERFLOW_TOOL = '(overflow)';

/** Most series one metric holds over the process's life (the overflow series besides). */
export const MAX_SERIES_PER_METRIC = 1_000;

/** The tool label of a call: its name only when the session had that tool (the call found its target). */
export function toolLabel(event: ObservedCall): string {
  if (event.target !== undefined) return event.name;
  return event.grantFailure !== undefined ? UNVERIFIED_TOOL : UNKNOWN_TOOL;
}

/** Label sets seen, up to a bound; every set past it is mapped to one overflow set. */
export class SeriesBound {
  private readonly seen = new Set<string>();

  constructor(
    private readonly overflow: Record<string, AttributeValue>,
    readonly max = MAX_SERIES_PER_METRIC,
  ) {}

  /** `attributes` when their series is held (or room is left for it), else the overflow series' attributes. */
  admit(key: string, attributes: Record<string, AttributeValue>): Record<string, AttributeValue> {
    if (this.seen.has(key)) return attributes;
    if (this.seen.size >= this.max) return this.overflow;
    this.seen.add(key);
    return attributes;
  }

  /** Series held. */
  get size(): number {
    return this.seen.size;
  }
}
