// Paths the end-to-end tests share; each can be overridden from the environment (scripts/ci.sh).
import * as path from 'node:path';
import { EXTENSION_ROOT } from './harness';

export const PYTHON = path.resolve(EXTENSION_ROOT, process.env.MDSEARCH_PYTHON ?? '../.venv/bin/python');
/** The mdsearch program beside that Python (the project's own environment). */
export const MDSEARCH = path.join(path.dirname(PYTHON), process.platform === 'win32' ? 'mdsearch.exe' : 'mdsearch');
/** A folder of wheels holding mdsearch-ls and every dependency, installed from offline. */
export const WHEELHOUSE = path.resolve(EXTENSION_ROOT, process.env.MDSEARCH_WHEELHOUSE ?? '../dist/wheelhouse');
export const CODE_SERVER = process.env.CODE_SERVER ?? '/opt/mdsearch-code-server/node_modules/.bin/code-server';
export const VSIX = path.resolve(EXTENSION_ROOT, process.env.MDSEARCH_VSIX ?? 'mdsearch.vsix');
export const FIXTURE = path.join(EXTENSION_ROOT, 'test', 'fixtures', 'vault');
export const SCREENSHOTS = path.resolve(EXTENSION_ROOT, '..', 'docs', 'screenshots');
