// tsc's diagnostics of negative.ts as JSON lines: each with its line and every text that may
// name the argument (the message chain, the code it points at, the declarations it relates to).
"use strict";
const ts = require("typescript");

const program = ts.createProgram(["negative.ts"], {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.CommonJS,
  types: ["node"],
});
const flat = (m) => ts.flattenDiagnosticMessageText(m, " ");
const out = [];
for (const d of ts.getPreEmitDiagnostics(program)) {
  if (!d.file || !d.file.fileName.endsWith("negative.ts")) {
    out.push({ line: 0, text: flat(d.messageText) });
    continue;
  }
  const line = d.file.getLineAndCharacterOfPosition(d.start).line + 1;
  const related = (d.relatedInformation || []).map(
    (r) => flat(r.messageText) + (r.file ? " " + r.file.text.slice(r.start, r.start + r.length) : ""),
  );
  const code = d.file.text.slice(d.start, d.start + d.length);
  out.push({ line, text: [flat(d.messageText), code, ...related].join(" | ") });
}
console.log(JSON.stringify(out));
