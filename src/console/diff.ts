/**
 * Side-by-side line diff, for comparing two resolutions as JSON text. A longest common
 * subsequence over lines (two resolutions are hundreds of lines, so the table is small);
 * runs of removed and added lines are paired up as changed rows, as side-by-side viewers do.
 */

/** One row of a side-by-side diff. */
export interface DiffRow {
  kind: 'same' | 'del' | 'add' | 'change';
  /** The left line (absent for `add`). */
  a?: string;
  /** The right line (absent for `del`). */
  b?: string;
}

/** Past this many cells the LCS table is not built: the rest is shown as one changed block. */
const MAX_CELLS = 4_000_000;

/** The side-by-side diff of two texts' lines. */
export function diffLines(left: readonly string[], right: readonly string[]): DiffRow[] {
  let start = 0;
  while (start < left.length && start < right.length && left[start] === right[start]) start++;
  let endA = left.length;
  let endB = right.length;
  while (endA > start && endB > start && left[endA - 1] === right[endB - 1]) {
    endA--;
    endB--;
  }
  const rows: DiffRow[] = left.slice(0, start).map((a) => ({ kind: 'same', a, b: a }));
  const a = left.slice(start, endA);
  const b = right.slice(start, endB);
  const ops = a.length * b.length > MAX_CELLS ? blockEdit(a.length, b.length) : lcsEdit(a, b);
  rows.push(...pair(ops, a, b));
  for (const line of left.slice(endA)) rows.push({ kind: 'same', a: line, b: line });
  return rows;
}

type Edit = 'same' | 'del' | 'add';

/** The edit script from `a` to `b` by LCS: `same` advances both, `del` only a, `add` only b. */
function lcsEdit(a: readonly string[], b: readonly string[]): Edit[] {
  const n = a.length;
  const m = b.length;
  // lengths[i][j] = LCS of a[i..] and b[j..], in one flat array of (n+1)(m+1).
  const lengths = new Uint32Array((n + 1) * (m + 1));
  const at = (i: number, j: number) => i * (m + 1) + j;
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lengths[at(i, j)] =
        a[i] === b[j]
          ? (lengths[at(i + 1, j + 1)] as number) + 1
          : Math.max(lengths[at(i + 1, j)] as number, lengths[at(i, j + 1)] as number);
    }
  }
  const edits: Edit[] = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) {
      edits.push('same');
      i++;
      j++;
    } else if (j < m && (i === n || (lengths[at(i, j + 1)] as number) >= (lengths[at(i + 1, j)] as number))) {
      edits.push('add');
      j++;
    } else {
      edits.push('del');
      i++;
    }
  }
  return edits;
}

function blockEdit(n: number, m: number): Edit[] {
  return [...Array<Edit>(n).fill('del'), ...Array<Edit>(m).fill('add')];
}

/** Walks an edit script, pairing each run of deletions with the additions that follow it. */
function pair(edits: readonly Edit[], a: readonly string[], b: readonly string[]): DiffRow[] {
  const rows: DiffRow[] = [];
  let i = 0;
  let j = 0;
  let k = 0;
  while (k < edits.length) {
    if (edits[k] === 'same') {
      rows.push({ kind: 'same', a: a[i], b: b[j] });
      i++;
      j++;
      k++;
      continue;
    }
    const dels: string[] = [];
    const adds: string[] = [];
    for (; k < edits.length && edits[k] !== 'same'; k++) {
      if (edits[k] === 'del') dels.push(a[i++] as string);
      else adds.push(b[j++] as string);
    }
    for (let x = 0; x < Math.max(dels.length, adds.length); x++) {
      const left = dels[x];
      const right = adds[x];
      if (left !== undefined && right !== undefined) rows.push({ kind: 'change', a: left, b: right });
      else if (left !== undefined) rows.push({ kind: 'del', a: left });
      else rows.push({ kind: 'add', b: right as string });
    }
  }
  return rows;
}
