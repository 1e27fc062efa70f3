// Paths the end-to-end tests share; each can be overridden from the environment (scripts/ci.sh).
import * as path from 'node:path';
import { EXTENSION_ROOT } from './harness';

export const PYTHON = path.resolve(EXTENSION_ROOT, process.env.MDSEARCH_PYTHON ?? '../.venv/bin/python');
export const CODE_SERVER = process.env.CODE_SERVER ?? '/opt/mdsearch-code-server/node_modules/.bin/code-server';
export const VSIX = path.resolve(EXTENSION_ROOT, process.env.MDSEARCH_VSIX ?? 'mdsearch.vsix');
export const FIXTURE = path.join(EXTENSION_ROOT, 'test', 'fixtures', 'vault');
export const SCREENSHOTS = path.resolve(EXTENSION_ROOT, '..', 'docs', 'screenshots');
