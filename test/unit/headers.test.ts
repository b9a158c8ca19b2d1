import { headers, MsgHdrsImpl } from '@nats-io/nats-core';
import { describe, expect, it } from 'vitest';
import { BadRequestError } from '../../src/bus/errors.js';
import {
  Header,
  OutgoingHeaders,
  readHeaderBlock,
  readReplyBlock,
  readRequestHeaders,
  writeContext,
} from '../../src/bus/headers.js';

const context = {
  traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
  session: 'sess-1',
  principal: 'agent:ö',
};

describe('the context headers', () => {
  it('encode to the block nats.js itself writes for the same headers', () => {
    const ours = writeContext(context, undefined, 1_800_000_000_000) as MsgHdrsImpl;
    const theirs = headers() as MsgHdrsImpl;
    theirs.set(Header.TraceParent, context.traceparent);
    theirs.set(Header.Deadline, '1800000000000');
    theirs.set(Header.Session, context.session);
    theirs.set(Header.Principal, context.principal);
    expect(ours).toBeInstanceOf(OutgoingHeaders);
    expect(Buffer.from(ours.encode()).toString()).toBe(Buffer.from(theirs.encode()).toString());
    expect(MsgHdrsImpl.decode(ours.encode()).get(Header.Principal)).toBe('agent:ö');
  });

  it('read back whatever the case of their names, first value first', () => {
    const h = headers();
    h.append('TRACEPARENT', context.traceparent);
    h.append('matrix-deadline', '1800000000000');
    h.append('Matrix-Session', 'first');
    h.append('matrix-session', 'second');
    h.append('content-type', 'application/json; charset=utf-8');
    h.append('matrix-call-id', 'call-1');
    h.append('MATRIX-PROGRESS', '1');
    expect(readRequestHeaders(h)).toEqual({
      context: { traceparent: context.traceparent, deadline: 1_800_000_000_000, session: 'first', callId: 'call-1' },
      json: true,
      progress: true,
    });
    expect(readRequestHeaders(undefined)).toEqual({ context: {}, json: false, progress: false });
  });

  it('refuse a deadline that is not a Unix time in ms, and a value that would break the block', () => {
    for (const bad of ['soon', '-5', '1.5']) {
      const h = headers();
      h.set(Header.Deadline, bad);
      expect(() => readRequestHeaders(h)).toThrow(BadRequestError);
    }
    expect(() => writeContext({ session: 'a\r\nInjected: yes' })).toThrow(/\\r or \\n/);
  });

  it('add to headers the caller made, keeping theirs', () => {
    const h = headers();
    h.set('X-Mine', '1');
    const out = writeContext({ traceparent: context.traceparent }, h, 5);
    expect(out).toBe(h);
    expect([out?.get('X-Mine'), out?.get(Header.TraceParent), out?.get(Header.Deadline)]).toEqual([
      '1',
      context.traceparent,
      '5',
    ]);
  });
});

describe('a raw header block', () => {
  const block = (h: MsgHdrsImpl) => Buffer.from(h.encode()).toString('utf8');

  it('reads as the headers nats.js parses read, names in any case, first value first', () => {
    const h = headers() as MsgHdrsImpl;
    h.append('TRACEPARENT', context.traceparent);
    h.append('matrix-deadline', '1800000000000');
    h.append('Matrix-Session', 'first');
    h.append('matrix-session', 'second');
    h.append('Matrix-Principal', 'agent:ö');
    h.append('X-Other', 'anything: at all');
    h.append('content-type', 'application/json; charset=utf-8');
    expect(readHeaderBlock(block(h))).toEqual(readRequestHeaders(MsgHdrsImpl.decode(h.encode())));
    expect(readHeaderBlock(block(h)).context).toMatchObject({
      session: 'first',
      principal: 'agent:ö',
      deadline: 1_800_000_000_000,
    });
  });

  it('refuses what nats.js cannot parse: a lone LF in a value, a name with a space; passes over a line without a colon', () => {
    expect(() => readHeaderBlock('NATS/1.0\r\ntraceparent: 00-aa\nMatrix-Principal: evil\r\n\r\n')).toThrow(
      /headers cannot be read/,
    );
    expect(() => readHeaderBlock('NATS/1.0\r\nMatrix Session: x\r\n\r\n')).toThrow(BadRequestError);
    expect(readHeaderBlock('NATS/1.0\r\nno colon here\r\nMatrix-Session: s\r\n\r\n').context).toEqual({ session: 's' });
  });
});

describe("a request's Nats-Request-Info", () => {
  const server = '{"acc":"AGENTS","user":"agent-2"}';
  const forged = '{"acc":"AGENTS","user":"agent"}';

  it('is the value of the block’s last line, and only when that line is one (where nats-server appends its own)', () => {
    const last = (block: string) => readHeaderBlock(block).requestInfo;
    expect(last(`NATS/1.0\r\nMatrix-Session: s\r\nNats-Request-Info: ${server}\r\n\r\n`)).toBe(server);
    expect(last(`NATS/1.0\r\nNats-Request-Info: ${forged}\r\nnats-request-info: ${server}\r\n\r\n`)).toBe(server);
    // nats-server 2.9.10 joins its own to a block a client left ending in one CRLF: the last line
    // is then another header's, and the client's Nats-Request-Info before it is not taken.
    expect(
      last(`NATS/1.0\r\nNats-Request-Info: ${forged}\r\nX-Mine: 1Nats-Request-Info: ${server}\r\n\r\n`),
    ).toBeUndefined();
    expect(last(`NATS/1.0\r\nNats-Request-Info: ${forged}\r\nno colon\r\n\r\n`)).toBeUndefined();
    expect(last('NATS/1.0\r\nMatrix-Session: s\r\n\r\n')).toBeUndefined();
  });

  it('is not read from a map of headers, which keeps no line order', () => {
    const h = headers();
    h.append('Nats-Request-Info', server);
    expect(readRequestHeaders(h).requestInfo).toBeUndefined();
  });
});

describe('a reply header block', () => {
  it('gives its status, the service error headers by exact name and Content-Type in any case, first value first', () => {
    expect(readReplyBlock('NATS/1.0 503\r\n\r\n')).toEqual({ code: 503 });
    const block =
      'NATS/1.0\r\nnats-service-error-code: 1\r\nNats-Service-Error-Code: 404\r\nNats-Service-Error: gone: away\r\nCONTENT-TYPE: application/json\r\ncontent-type: x\r\n\r\n';
    expect(readReplyBlock(block)).toEqual({
      code: 0,
      serviceErrorCode: '404',
      serviceError: 'gone: away',
      contentType: 'application/json',
    });
  });
});
