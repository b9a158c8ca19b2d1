/**
 * The console's Contexts page finds tools with `system.tools.$search`: the tools of the contexts
 * it lists, ranked; a context its filter leaves out is never searched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningConsole, startConsole } from '../../src/console/server.js';
import { testConnection } from '../harness/bus.js';
import { eventually } from '../harness/eventually.js';
import { type Instance, startInstance, uniqueBucket } from '../harness/registry.js';
import { searchContext as context } from '../harness/search.js';

describe('the console’s tool search', () => {
  let instance: Instance;
  let consoleApp: RunningConsole;
  const page = async (query: Record<string, string>) =>
    (await fetch(new URL(`/contexts?${new URLSearchParams(query)}`, consoleApp.url))).text();

  beforeAll(async () => {
    const nc = await testConnection();
    instance = await startInstance(nc, uniqueBucket());
    await instance.registry.register({
      spec: context('billing-tools', [
        ['invoice_send', 'Send an invoice to a customer'],
        ['payment_refund', 'Refund a payment to a customer'],
      ]),
    });
    await instance.registry.register({ spec: context('hr-tools', [['refund_expense', 'Refund an employee expense']]) });
    consoleApp = await startConsole(nc, { port: 0 });
  });
  afterAll(async () => {
    await consoleApp.close();
    await instance.stop();
  });

  it('ranks the tools of the contexts listed, and only theirs', async () => {
    await eventually(async () => expect(await page({ q: 'tools' })).toContain('hr-tools'));
    const all = await page({ q: 'tools', tools: 'refund' });
    expect(all).toMatch(/Tools for “refund”/);
    expect(all).toMatch(/2 of 2 matching tools of the \d+ contexts listed/);
    expect(all).toContain('data-tool="payment_refund"');
    const billing = await page({ q: 'billing', tools: 'refund' });
    expect(billing).toMatch(/1 of 1 matching tools of the 1 contexts listed/);
    expect(billing).not.toContain('data-tool="refund_expense"');
  });
});
