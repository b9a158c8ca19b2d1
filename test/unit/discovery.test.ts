import { describe, expect, it } from 'vitest';
import { mountOf, serviceInfoOf } from '../../src/bus/discovery.js';

const endpoints = (...subjects: string[]) => subjects.map((subject, i) => ({ name: `e${i}`, subject }));

describe('mountOf: the mount a $SRV.INFO answer is', () => {
  it('is what its metadata says, when it says', () => {
    expect(
      mountOf({
        name: 'system-tools',
        id: '1',
        version: '1',
        metadata: { mount: 'system.tools' },
        endpoints: endpoints('x.y.$list'),
      }),
    ).toBe('system.tools');
  });
  it('is the subject prefix all its endpoints share, when its metadata does not say', () => {
    expect(
      mountOf({ name: 'demo-go', id: '1', version: '1', endpoints: endpoints('demo.go.echo', 'demo.go.fail') }),
    ).toBe('demo.go');
    expect(
      mountOf({ name: 'demo-go', id: '1', version: '1', metadata: {}, endpoints: endpoints('demo.go.echo') }),
    ).toBe('demo.go');
  });
  it('is its service name when the endpoints share no prefix, have none, or serve wildcards', () => {
    expect(mountOf({ name: 'mixed', id: '1', version: '1', endpoints: endpoints('a.one', 'b.two') })).toBe('mixed');
    expect(mountOf({ name: 'flat', id: '1', version: '1', endpoints: endpoints('echo') })).toBe('flat');
    expect(mountOf({ name: 'wild', id: '1', version: '1', endpoints: endpoints('wild.*.x') })).toBe('wild');
    expect(mountOf({ name: 'none', id: '1', version: '1' })).toBe('none');
  });
});

describe('serviceInfoOf: an $SRV.INFO answer as far as it is well formed', () => {
  it('reads the older micro shape (subject or subjects, no endpoints) as endpoints', () => {
    const one = serviceInfoOf({ name: 'demo-go', id: 'x', version: '1.0.0', subject: 'demo.go.echo' });
    expect(one?.endpoints).toEqual([{ name: 'echo', subject: 'demo.go.echo' }]);
    expect(one && mountOf(one)).toBe('demo.go');
    const many = serviceInfoOf({
      name: 'demo-go',
      id: 'x',
      version: '1',
      subjects: ['demo.go.echo', 'demo.go.fail', 7],
    });
    expect(many?.endpoints?.map((e) => e.name)).toEqual(['echo', 'fail']);
  });
  it('leaves endpoints out when neither shape names a subject', () => {
    expect(serviceInfoOf({ name: 'bare', id: 'x', version: '1', subject: '' })?.endpoints).toBeUndefined();
  });
});
