/**
 * The compiler thread: writes the validators of large tool input schemas as code, compiled, for
 * `SchemaCompiler.checkSoon`, one schema at a time, so that the event loop that serves calls
 * never holds for Ajv's compile.
 */
import { serveThread } from '../worker-thread.js';
import { type ValidatorCode, validatorCode } from './schema-compiler.js';

serveThread<string, ValidatorCode>(validatorCode);
