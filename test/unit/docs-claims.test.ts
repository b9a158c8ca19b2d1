/**
 * The README and every page of docs/ against the repository: each link leads to a file (and a
 * heading) that exists, each path names a file or folder that exists, each `npm run` script,
 * `matrix-tools` verb and flag, each tool a `matrix-tools call` names, and each `MATRIX_…`
 * variable is one the code has. A page that names something that is not there fails here, not
 * in a reader's terminal.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** README.md and every docs/*.md, as paths from the repository's root. */
const pages = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** Every file under `dir` (from the root), recursively, as paths from the root. */
function filesUnder(dir: string): string[] {
  return readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : filesUnder(path);
    return [path];
  });
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, each space a dash. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** The anchors of a page's headings (a repeated one gets -1, -2, … as GitHub numbers them). */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const m of withoutFences(text).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(m[1] as string);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    found.add(n === 0 ? base : `${base}-${n}`);
  }
  return found;
}

/** The text with its fenced blocks blanked (a `#` comment in a shell block is no heading). */
const withoutFences = (text: string) => text.replace(/^```[\s\S]*?^```/gm, '');

/** Whether a path from the root exists; `*` in its last part matches any run of characters. */
function pathExists(path: string): boolean {
  if (!path.includes('*')) return existsSync(join(root, path));
  const dir = dirname(path);
  const pattern = new RegExp(
    `^${path
      .slice(dir.length + 1)
      .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
      .replace(/\*/g, '.*')}$`,
  );
  return existsSync(join(root, dir)) && readdirSync(join(root, dir)).some((name) => pattern.test(name));
}

/** The text of the CLI's sources, where its verbs and flags are declared. */
const cliSource = [...filesUnder('src/cli'), ...filesUnder('src/mcp')]
  .filter((f) => f.endsWith('.ts'))
  .map(read)
  .join('\n');
/** Every source the docs may name a variable from: the code, tests, bench, scripts, CI, deployment. */
const allSource = [
  ...['src', 'test', 'bench', 'scripts', 'deploy', 'examples'].flatMap(filesUnder),
  '.ci/run',
  'docker-compose.yml',
  'Dockerfile',
]
  .filter((f) => !f.endsWith('.md') && !f.endsWith('.png'))
  .map(read)
  .join('\n');
const verbs = new Set([...cliSource.matchAll(/command\(\s*'([a-z-]+)'/g)].map((m) => m[1] as string));
/** Where the tools a reader can call are declared: the built-in ones and the examples'. */
const toolSource = ['src/registry/builtins.ts', ...filesUnder('examples')].map(read).join('\n');
/** Flags of the MCP Inspector, which the docs run with the CLI as its server. */
const INSPECTOR_FLAGS = ['--method'];
const scripts = Object.keys((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);

describe.each(pages)('%s', (page) => {
  const text = read(page);
  const here = dirname(page);

  it('links only to files and headings that exist', () => {
    const broken: string[] = [];
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1] as string;
      if (/^[a-z]+:/.test(target)) continue;
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const path = file === '' ? page : relative(root, join(root, here, file));
      if (!existsSync(join(root, path))) {
        broken.push(`${target}: no file ${path}`);
        continue;
      }
      if (anchor !== undefined && !(statSync(join(root, path)).isFile() && anchors(read(path)).has(anchor)))
        broken.push(`${target}: no heading #${anchor} in ${path}`);
    }
    expect(broken).toEqual([]);
  });

  it('names only paths that exist', () => {
    const paths = [
      ...text.matchAll(/(?<![\w./-])(?:src|test|bench|scripts|examples|deploy|contracts|docs|\.ci)\/[\w./*@-]*/g),
    ].map((m) => (m[0] as string).replace(/[.,]+$/, ''));
    expect(paths.filter((p) => !pathExists(p))).toEqual([]);
  });

  it('runs only npm scripts that package.json has', () => {
    const named = [...text.matchAll(/\bnpm run ([\w:-]+)/g)].map((m) => m[1] as string);
    expect(named.filter((s) => !scripts.includes(s))).toEqual([]);
  });

  it('names only matrix-tools verbs and flags the CLI declares', () => {
    const lines = [...text.matchAll(/(?:matrix-tools|cli\/main\.js) ([a-z][a-z-]*)([^\n`#|;&]*)/g)];
    const unknownVerbs = lines.map((m) => m[1] as string).filter((v) => !verbs.has(v));
    expect(unknownVerbs, 'verbs').toEqual([]);
    const flags = lines.flatMap((m) => [...(m[2] as string).matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map((f) => f[0]));
    expect(
      [...new Set(flags)].filter(
        (f) => f !== '--help' && !INSPECTOR_FLAGS.includes(f) && !new RegExp(`['\\s]${f}(?![\\w-])`).test(cliSource),
      ),
      'flags',
    ).toEqual([]);
  });

  it('calls only tools that are built in, come with examples/, or come from an MCP server it hosts', () => {
    const tools = [...text.matchAll(/matrix-tools call ([A-Za-z][A-Za-z0-9_-]*)/g)].map((m) => m[1] as string);
    // The servers of the page's own mcpServers files: their tools are `<name>_<tool>` (PROTOCOL 12).
    // And, on a page that names it, those of deploy/mcp.json (the compose stack's MCP host).
    const files = [...text.matchAll(/```json\n(\{\s*"mcpServers"[\s\S]*?)\n```/g)].map((m) => m[1] as string);
    if (text.includes('deploy/mcp.json')) files.push(read('deploy/mcp.json'));
    const hosted = files.flatMap((file) =>
      Object.keys((JSON.parse(file) as { mcpServers: Record<string, unknown> }).mcpServers),
    );
    const known = (tool: string) =>
      toolSource.includes(`'${tool}'`) || hosted.some((name) => tool.startsWith(`${name}_`));
    expect(tools.filter((tool) => !known(tool))).toEqual([]);
  });

  it('names only MATRIX_ variables the code, tests or deployment use', () => {
    const named = new Set([...text.matchAll(/\bMATRIX_[A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0]));
    expect([...named].filter((v) => !allSource.includes(v))).toEqual([]);
  });
});

it('checks the README and at least the pages the README links to', () => {
  const readme = read('README.md');
  const linked = [...readme.matchAll(/\]\((docs\/[\w-]+\.md)/g)].map((m) => m[1] as string);
  expect(linked.length).toBeGreaterThan(0);
  for (const page of linked) expect(pages).toContain(page);
  expect(
    pages.filter((p) => p !== 'README.md' && !linked.includes(p)),
    'docs pages the README does not link',
  ).toEqual([]);
});
