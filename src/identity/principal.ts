/**
 * Principals compared as a person reads them. A self-approval check or an approver's
 * `principals` glob that compares exact strings lets `Agent:Alpha`, `"agent:alpha "` or a
 * Cyrillic `аlpha` pass for `agent:alpha`; every comparison of principals goes through
 * `principalKey` instead.
 */

/**
 * Letters of other scripts that read as Latin ones (the Cyrillic and Greek lowercase lookalikes
 * of UTS #39's confusables that NFKC and case folding leave apart), to their Latin letter.
 */
const LATIN_LOOKALIKES: Readonly<Record<string, string>> = {
  // Cyrillic
  а: 'a',
  в: 'b',
  е: 'e',
  ё: 'e',
  һ: 'h',
  і: 'i',
  ї: 'i',
  ј: 'j',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  ѕ: 's',
  ԁ: 'd',
  ԛ: 'q',
  ԝ: 'w',
  ӏ: 'l',
  // Greek
  α: 'a',
  β: 'b',
  ε: 'e',
  η: 'n',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
  χ: 'x',
  γ: 'y',
  // Latin and other letters that read as others
  ı: 'i',
  ȷ: 'j',
  ſ: 's',
  ɑ: 'a',
  ɡ: 'g',
  ɦ: 'h',
  ʟ: 'l',
  // Armenian and Lisu
  հ: 'h',
  ո: 'n',
  ս: 'u',
  օ: 'o',
  ꓲ: 'l',
  ꓳ: 'o',
};

const lookalike = new RegExp(`[${Object.keys(LATIN_LOOKALIKES).join('')}]`, 'gu');

/**
 * Characters that show as nothing: zero-width spaces and joiners, the soft hyphen, BOM, … and the
 * blanks that are no white space (the braille blank).
 */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}\u2800]/gu;

/**
 * The form two principals are compared in: NFKC (full-width and compatibility forms to their
 * plain ones), invisible characters dropped, white space trimmed, lower case, the lookalikes of
 * Latin letters in other scripts as those letters, and the letters and digits that read alike
 * (`l`, `I`, `1` as `i`; `0` as `o`). Equal keys: the same principal to a reader, so one never
 * approves a call of the other, and a revocation of one reaches the other.
 */
export function principalKey(principal: string): string {
  return principal
    .normalize('NFKC')
    .replace(INVISIBLE, '')
    .trim()
    .toLowerCase()
    .replace(lookalike, (ch) => LATIN_LOOKALIKES[ch] ?? ch)
    .replace(/[l1]/g, 'i')
    .replace(/0/g, 'o');
}

/** Are these the same principal to a reader (`principalKey`)? Undefined is nobody's. */
export function samePrincipal(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && principalKey(a) === principalKey(b);
}
