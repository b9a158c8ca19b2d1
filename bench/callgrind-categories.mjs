// Where a service's instructions go, from the callgrind dumps `TRAIL_AB_CALLGRIND` leaves: each
// function's own instructions (callgrind_annotate --inclusive=no) per call, JIT code named from
// the perf map `node --perf-basic-prof` writes (/tmp/perf-<pid>.map), then summed by the room
// they run in (nats.js, msgpack, this project, V8's builtins, its compiler, …). Columns side by
// side, and the symbols whose counts differ most between the first column and the last:
//   node bench/callgrind-categories.mjs 1000 relay=/tmp/cg/cg-relay.out.3,/tmp/perf-7701.map \
//     off=/tmp/cg/cg-off.out.3,/tmp/perf-7718.map
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const [calls, ...columns] = process.argv.slice(2);
const TOP = Number(process.env.CATEGORIES_TOP ?? 30);

/** A perf map's entries (start, end, name), sorted by start. */
function jitNames(path) {
  if (path === undefined) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [start, size, ...name] = line.split(' ');
      const from = Number.parseInt(start, 16);
      return { from, to: from + Number.parseInt(size, 16), name: name.join(' ') };
    })
    .sort((a, b) => a.from - b.from);
}

function jitName(entries, address) {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid].from <= address) lo = mid + 1;
    else hi = mid - 1;
  }
  const entry = entries[hi];
  if (entry === undefined || address >= entry.to) return undefined;
  // Paths from the checkout on and no line numbers, so that two checkouts' functions pair up.
  return `JIT ${entry.name.replace(/(?:file:\/\/)?\/[^ ]*?\/(dist|node_modules)\//, '$1/').replace(/:\d+:\d+$/, '')}`;
}

/** Each function's own instructions per call, by name. */
function ownCounts(dump, map) {
  const entries = jitNames(map);
  const text = execFileSync('callgrind_annotate', ['--inclusive=no', '--threshold=100', '--auto=no', dump], {
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  const counts = new Map();
  for (const line of text.split('\n')) {
    const row = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
    // The dynamic loader's one row is its entry point, counted with all it calls (as main is).
    if (row === null || row[2].includes('PROGRAM TOTALS') || /\/ld-linux[^\]]*\]$/.test(row[2])) continue;
    const address = /^\?\?\?:0x([0-9a-f]+) \[\?\?\?\]$/.exec(row[2]);
    const name =
      (address && jitName(entries, Number.parseInt(address[1], 16))) ??
      row[2].replace(/ \[[^\]]*\]$/, '').replace(/^\?\?\?:/, '');
    counts.set(name, (counts.get(name) ?? 0) + Number(row[1].replaceAll(',', '')) / Number(calls));
  }
  return counts;
}

/** The room a function runs in; undefined for the frames counted with all they call (main, a thread's start). */
function room(name) {
  if (
    /libc-start|libc_start_call_main|\(below main\)|^main$|NodeMainInstance|SpinEventLoop|node::Start\(|clone\.S|pthread_create\.c/.test(
      name,
    )
  )
    return undefined;
  if (/nats-core|transport-node/.test(name)) return 'nats.js (JIT)';
  if (name.includes('msgpack')) return 'msgpack (JIT)';
  if (name.includes(' dist/src/') || /^JIT JS:[*^~]?validate\d+ /.test(name))
    return 'this project, its Ajv validators (JIT)';
  if (name.startsWith('JIT') && name.includes('node:')) return "Node's library (JIT)";
  if (name.startsWith('JIT')) return 'other JIT code';
  if (/compiler::|[Mm]aglev|Compil/.test(name)) return "V8's compiler";
  if (/Scaveng|Mark|Sweep|Heap::|IterateObjectCache|Evacuat|RootScavenge/.test(name)) return "V8's collector";
  if (/malloc|_int_free|^\.\/malloc/.test(name)) return 'malloc';
  if (name.startsWith('Builtins_')) return "V8's builtins";
  if (name.includes('v8::')) return "V8's runtime";
  if (/node::|uv_|uv__/.test(name)) return 'Node and libuv (native)';
  if (name.startsWith('0x')) return 'unnamed code';
  return 'other native';
}

const labelled = columns.map((column) => {
  const [label, files] = column.split('=');
  const [dump, map] = files.split(',');
  return { label, counts: ownCounts(dump, map) };
});
const rooms = labelled.map(({ counts }) => {
  const sums = new Map();
  for (const [name, count] of counts) {
    const where = room(name);
    if (where !== undefined) sums.set(where, (sums.get(where) ?? 0) + count);
  }
  return sums;
});
const pad = (value, width) => String(value).padStart(width);
const first = rooms[0];
const last = rooms.at(-1);
const byGrowth = [...new Set(rooms.flatMap((sums) => [...sums.keys()]))].sort(
  (a, b) => (last.get(b) ?? 0) - (first.get(b) ?? 0) - ((last.get(a) ?? 0) - (first.get(a) ?? 0)),
);
console.log(`${'instructions per call'.padEnd(40)}${labelled.map(({ label }) => pad(label, 10)).join('')}`);
for (const where of byGrowth)
  console.log(`${where.padEnd(40)}${rooms.map((sums) => pad(Math.round(sums.get(where) ?? 0), 10)).join('')}`);
const totals = rooms.map((sums) => Math.round([...sums.values()].reduce((a, b) => a + b, 0)));
console.log(`${'all'.padEnd(40)}${totals.map((total) => pad(total, 10)).join('')}`);

if (labelled.length > 1) {
  const a = labelled[0].counts;
  const b = labelled.at(-1).counts;
  const names = [...new Set([...a.keys(), ...b.keys()])].filter((name) => room(name) !== undefined);
  names.sort((x, y) => (b.get(y) ?? 0) - (a.get(y) ?? 0) - ((b.get(x) ?? 0) - (a.get(x) ?? 0)));
  console.log(`\nmost grown, ${labelled[0].label} → ${labelled.at(-1).label}`);
  for (const name of names.slice(0, TOP))
    console.log(
      `${pad(Math.round((b.get(name) ?? 0) - (a.get(name) ?? 0)), 8)} ${pad(Math.round(a.get(name) ?? 0), 8)} ${pad(Math.round(b.get(name) ?? 0), 8)}  ${name.slice(0, 120)}`,
    );
}
