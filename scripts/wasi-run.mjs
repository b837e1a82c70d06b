// Runs a wasm32-wasip1 test binary under Node's WASI (cargo's runner for that target).
import { readFile } from 'node:fs/promises';
import { WASI } from 'node:wasi';
import { argv, env, exit } from 'node:process';

const [, , file, ...args] = argv;
const wasi = new WASI({
  version: 'preview1',
  args: [file, ...args],
  env,
  preopens: { '/': '/' },
  returnOnExit: true,
});
const module = await WebAssembly.compile(await readFile(file));
const instance = await WebAssembly.instantiate(module, wasi.getImportObject());
let code;
try {
  code = wasi.start(instance);
} catch (e) {
  console.error(`wasi-run: ${e}`);
  code = 101; // a trap (a panic aborts under wasip1)
}
exit(code ?? 0);
