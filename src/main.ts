/** `npm start`: `matrix-tools serve` with its defaults (flags pass through: `npm start -- --no-dispatcher`). */
process.argv.splice(2, 0, 'serve');
await import('./cli/main.js');
