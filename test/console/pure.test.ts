/** The console's pure parts: escaping, the side-by-side diff, forms from schemas, the token check. */
import { describe, expect, it } from 'vitest';
import { diffLines } from '../../src/console/diff.js';
import { escapeHtml, href, html } from '../../src/console/html.js';
import { ARGS_JSON, argumentFields, argumentsFrom } from '../../src/console/schema-form.js';
import { sameSecret } from '../../src/console/secret.js';
import { cookiesOf, localPath } from '../../src/console/sign-in.js';
import type { JsonSchemaObject } from '../../src/registry/types.js';

describe('html', () => {
  it('escapes every interpolation, in text and in quoted attributes', () => {
    const hostile = `<script>alert("x")</script>' onmouseover='y`;
    const out = html`<td title="${hostile}">${hostile}</td>`.text;
    expect(out).toBe(`<td title="${escapeHtml(hostile)}">${escapeHtml(hostile)}</td>`);
    expect(out).not.toMatch(/<script|"x"|' on/);
  });

  it('nests safe markup and lists without escaping them twice, and drops null and booleans', () => {
    const items = ['a<b', 'c'].map((x) => html`<li>${x}</li>`);
    expect(html`<ul>${items}${null}${false}${undefined}</ul>`.text).toBe('<ul><li>a&lt;b</li><li>c</li></ul>');
  });

  it('builds links whose parameters are encoded and whose empty ones are left out', () => {
    expect(href('/calls', { trace: 'a&b', session: '', page: 2 })).toBe('/calls?trace=a%26b&page=2');
  });
});

describe('diffLines', () => {
  it('pairs removed and added lines as changes, keeping what is common', () => {
    const rows = diffLines(['{', '"a": 1,', '"b": 2', '}'], ['{', '"a": 1,', '"b": 3,', '"c": 4', '}']);
    expect(rows.map((r) => r.kind)).toEqual(['same', 'same', 'change', 'add', 'same']);
    expect(rows[2]).toEqual({ kind: 'change', a: '"b": 2', b: '"b": 3,' });
  });

  it('finds lines that moved apart', () => {
    const rows = diffLines(['x', 'a', 'b', 'c'], ['a', 'b', 'y', 'c']);
    expect(rows.map((r) => r.kind)).toEqual(['del', 'same', 'same', 'add', 'same']);
  });

  it('gives identical texts as all-same rows', () => {
    expect(diffLines(['a', 'b'], ['a', 'b']).every((r) => r.kind === 'same')).toBe(true);
  });
});

describe('forms from input schemas', () => {
  const schema = {
    type: 'object',
    properties: {
      city: { type: 'string' },
      days: { type: 'integer' },
      metric: { type: 'boolean' },
      units: { enum: ['c', 'f', 1] },
      where: { type: 'object' },
    },
    required: ['city'],
  } as JsonSchemaObject;

  it('makes a field for each property, marking the required ones', () => {
    const out = argumentFields(schema, new URLSearchParams()).text;
    for (const name of ['city', 'days', 'metric', 'units', 'where']) expect(out).toContain(`name="arg.${name}"`);
    expect(out).toContain('required');
    expect(out).toContain(`<option value="1" >1</option>`);
  });

  it('converts each field by its type, leaving empty ones out', () => {
    const form = new URLSearchParams({
      'arg.city': 'Oslo',
      'arg.days': '3',
      'arg.metric': 'false',
      'arg.units': '"f"',
      'arg.where': '{"lat":1}',
    });
    expect(argumentsFrom(schema, form)).toEqual({
      city: 'Oslo',
      days: 3,
      metric: false,
      units: 'f',
      where: { lat: 1 },
    });
    expect(argumentsFrom(schema, new URLSearchParams({ 'arg.city': '', 'arg.days': ' ' }))).toEqual({});
  });

  it('sends what does not convert as the text it is, for the dispatcher to refuse', () => {
    const form = new URLSearchParams({ 'arg.days': 'three', 'arg.where': '{not json' });
    expect(argumentsFrom(schema, form)).toEqual({ days: 'three', where: '{not json' });
  });

  it('takes the JSON override as text, as a model sends arguments', () => {
    expect(argumentsFrom(schema, new URLSearchParams({ [ARGS_JSON]: '{"city":"Rome"}', 'arg.city': 'Oslo' }))).toBe(
      '{"city":"Rome"}',
    );
  });
});

describe('sameSecret', () => {
  it('accepts only the exact token, whatever the lengths', () => {
    expect(sameSecret('s3cret', 's3cret')).toBe(true);
    expect(sameSecret('s3cre', 's3cret')).toBe(false);
    expect(sameSecret('', 's3cret')).toBe(false);
    expect(sameSecret('s3cret-and-more', 's3cret')).toBe(false);
  });
});

describe('sign-in', () => {
  it('returns only to a page of the console itself after signing in', () => {
    expect(localPath('/approvals?answered=a1')).toBe('/approvals?answered=a1');
    expect(localPath('/tasks/a/../b?x=1')).toBe('/tasks/b?x=1');
    // A browser drops tabs and newlines before it parses: `/<tab>/evil.example` is `//evil.example`.
    for (const elsewhere of [
      '//evil.example/',
      'https://evil.example/',
      '/\\evil.example',
      '/\t/evil.example/x',
      '/\n/evil.example/x',
      '/\r\n/evil.example',
      '/ /evil.example',
      '/\u0000/evil.example',
      'approvals',
      '',
    ])
      expect(localPath(elsewhere), JSON.stringify(elsewhere)).toBe('/approvals');
  });

  it('reads the cookies of a request by name', () => {
    const cookies = cookiesOf('matrix-console=abc; _session=x=y;bare; matrix-console-signin=');
    expect(cookies.get('matrix-console')).toBe('abc');
    expect(cookies.get('_session')).toBe('x=y');
    expect(cookies.get('matrix-console-signin')).toBe('');
    expect(cookies.has('bare')).toBe(false);
    expect(cookiesOf(undefined).size).toBe(0);
  });
});
