import type { NatsConnection } from '@nats-io/nats-core';
import { describe, expect, it } from 'vitest';
import {
  isReservedSubject,
  mountReplyPrefix,
  reservedPatterns,
  subjectMatches,
  TARGETS_INBOX_PREFIX,
} from '../../src/bus/subjects.js';

describe('isReservedSubject', () => {
  // The definition: an inbox, or a subject one of the reserved patterns matches.
  const byDefinition = (subject: string) =>
    subject.startsWith('_INBOX') || reservedPatterns.some((p) => subjectMatches(p, subject));
  const subjects = [
    '$SYS.REQ.SERVER.PING',
    '$SYS',
    '$SYSX.a',
    '$JS.API.STREAM.INFO.X',
    '$KV.matrix-tools.ctx',
    '$KV',
    '$SRV.PING',
    '_INBOX.abc.1',
    '_INBOX_agent.x',
    'system.tools',
    'system.tools.$resolve',
    'system.toolsx.$resolve',
    'system.dispatcher.$call',
    'system.dispatcher',
    'system.approvals.$ask',
    'system.sessions.$read',
    'app.weather.$forecast',
    'app.system.tools.$x',
    'bench.echo.$echo',
    'system',
    '',
  ];

  it('says what the reserved patterns say, for each kind of subject', () => {
    for (const subject of subjects) expect(isReservedSubject(subject), subject).toBe(byDefinition(subject));
    expect(subjects.filter(isReservedSubject)).toEqual([
      '$SYS.REQ.SERVER.PING',
      '$JS.API.STREAM.INFO.X',
      '$KV.matrix-tools.ctx',
      '$SRV.PING',
      '_INBOX.abc.1',
      '_INBOX_agent.x',
      'system.tools',
      'system.tools.$resolve',
      'system.dispatcher.$call',
      'system.dispatcher',
      'system.approvals.$ask',
    ]);
  });
});

describe('mountReplyPrefix', () => {
  // What it reads of a connection: the inbox prefix it was opened with (connectBus's `inboxPrefix`).
  const opened = (inboxPrefix?: string) => ({ options: { inboxPrefix } }) as unknown as NatsConnection;

  it("asks mounts for replies on the connection's own inbox prefix, else on _INBOX_targets, never on _INBOX", () => {
    expect(mountReplyPrefix(opened())).toBe(TARGETS_INBOX_PREFIX);
    expect(mountReplyPrefix(opened('_INBOX'))).toBe('_INBOX_targets');
    expect(mountReplyPrefix(opened('_INBOX_operator'))).toBe('_INBOX_operator');
    expect(isReservedSubject(`${TARGETS_INBOX_PREFIX}.x`)).toBe(true);
  });
});
