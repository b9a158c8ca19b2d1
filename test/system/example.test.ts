import { afterAll, describe, expect, it } from 'vitest';
import { sharedNatsUrl } from '../harness/bus.js';
import { runScript, type ServiceProcess, startScript, startService } from '../harness/service.js';

describe('the registration example, as a user runs it', () => {
  const running: ServiceProcess[] = [];
  afterAll(async () => {
    for (const p of running.reverse()) await p.stop('SIGTERM');
  });

  it('has a service register a context that an oracle then resolves and calls', async () => {
    const url = sharedNatsUrl();
    running.push(await startService(url));
    const weather = await startScript('dist/examples/weather-service.js', url, 'weather service ready');
    running.push(weather);
    const oracle = await runScript('dist/examples/oracle.js', url);
    expect(oracle.stderr).toBe('');
    expect(oracle.code).toBe(0);
    expect(oracle.stdout).toContain('contexts: actor-readonly, weather');
    expect(oracle.stdout).toContain('"weather_forecast"');
    expect(oracle.stdout).toContain('weather_forecast → isError=false\nLisbon, day 1: sunny\nLisbon, day 2: cloudy');
    expect(await weather.stop('SIGTERM')).toBe(0);
  });
});
