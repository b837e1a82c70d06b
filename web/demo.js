// The demo: the adapter, op timings, and text streamed from a GGUF model the user picks.
import init, * as rayo from "./pkg/rayo_web.js";

const $ = (id) => document.getElementById(id);
const show = (el, e) => { el.textContent = String(e && e.message ? e.message : e); el.className = "err"; };
let model = null;

async function timeOp(name, f) {
  await f(); // the first run compiles the kernel
  const t0 = performance.now();
  await f();
  const row = $("timings").insertRow();
  row.insertCell().textContent = name;
  row.insertCell().textContent = (performance.now() - t0).toFixed(2);
  console.log(`rayo demo: ${name} ${row.cells[1].textContent} ms`);
}

const timeAll = async () => {
  const n = 1 << 20, x = new Float32Array(n).map(() => Math.random() * 2 - 1);
  const a = new Float32Array(256 * 256).map(() => Math.random());
  try {
    await timeOp("relu", () => rayo.relu(x));
    await timeOp("gelu", () => rayo.gelu(x));
    await timeOp("softmax", () => rayo.softmax(x));
    await timeOp("sum", () => rayo.sum(x));
    await timeOp("matmul 256³", () => rayo.matmul(a, a, 256, 256, 256));
    return true;
  } catch (e) { show($("timings"), e); console.log("rayo demo: " + e); return false; }
};
$("bench").onclick = timeAll;

$("file").onchange = async (ev) => {
  const f = ev.target.files[0];
  if (!f) return;
  $("info").textContent = `loading ${f.name} (${(f.size / 1e6).toFixed(1)} MB)…`;
  $("go").disabled = true;
  try {
    model = await rayo.Model.load(new Uint8Array(await f.arrayBuffer()));
    $("info").textContent = model.info();
    $("go").disabled = false;
  } catch (e) { show($("info"), e); }
};

$("go").onclick = async () => {
  const out = $("out");
  out.className = "";
  out.textContent = $("prompt").value;
  $("go").disabled = true;
  const t0 = performance.now();
  let n = 0;
  try {
    await model.generate($("prompt").value, Number($("max").value), Number($("temp").value), (t) => {
      out.textContent += t;
      n++;
      $("speed").textContent = `${(n / ((performance.now() - t0) / 1000)).toFixed(2)} pieces/s`;
    });
    const ids = model.lastTokens();
    $("speed").textContent = `${ids.length} tokens in ${((performance.now() - t0) / 1000).toFixed(1)} s (prompt included)`;
  } catch (e) { show(out, e); }
  $("go").disabled = false;
};

try {
  await init();
  $("adapter").textContent = await rayo.adapterInfo();
  console.log("rayo demo: " + $("adapter").textContent);
  // index.html?check: time the ops and report as the headless test protocol does
  if (new URLSearchParams(location.search).has("check")) console.log(`WEBGPU_RESULT ${(await timeAll()) ? "PASS" : "FAIL"} demo`);
} catch (e) { show($("adapter"), e); }
