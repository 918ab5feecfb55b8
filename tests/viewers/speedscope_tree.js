// The call tree speedscope shows for a profile, imported by speedscope's
// own importer: the release bundle of the npm package (its importers
// exist only there), evaluated in node with the module that holds them
// exposed before the app's start-up stops for want of a browser.
// usage: node speedscope_tree.js SPEEDSCOPE_DIR PROFILE
// prints one line per call, in the order speedscope walks them
// (forEachCall): "DEPTH START END NAME", times relative as it keeps them.
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, profile] = process.argv.slice(2);
const rel = path.join(dir, 'node_modules', 'speedscope', 'dist', 'release');
const js = fs.readdirSync(rel).find(f => /^speedscope-.*\.js$/.test(f));
if (!js) {
	console.error(`speedscope_tree: ${rel}: no speedscope-*.js bundle`);
	process.exit(1);
}
let src = fs.readFileSync(path.join(rel, js), 'utf8');
// The app loads its importers lazily: Promise.resolve().then(()=>(INIT(),MOD)).
const m = /Promise\.resolve\(\)\.then\(\(\)=>\((\w+)\(\),(\w+)\)\)/.exec(src);
const def = m && src.indexOf('var ' + m[1] + '=');
if (!m || def < 0 || src.indexOf('importProfileGroupFromText:', 0) < 0) {
	console.error(`speedscope_tree: ${js}: the importer module is not where ` +
		      'this version of speedscope was expected to keep it');
	process.exit(1);
}
const end = src.indexOf('});', def) + 3;
src = src.slice(0, end) + `globalThis.__htrImporters=()=>(${m[1]}(),${m[2]});` +
	src.slice(end);
try {
	(0, eval)(src);
} catch (e) {
	// The UI needs window/document; the importers do not.
}
if (typeof globalThis.__htrImporters !== 'function') {
	console.error('speedscope_tree: the bundle stopped before its importers');
	process.exit(1);
}
const mod = globalThis.__htrImporters();
// Its warnings (frames it could not close, ...) are part of the verdict.
const warn = console.warn;
let warnings = 0;
console.warn = (...a) => { warnings++; if (warnings <= 3) warn('speedscope:', ...a); };
console.log = () => {};
(async () => {
	const text = fs.readFileSync(profile, 'utf8');
	const group = await mod.importProfileGroupFromText(path.basename(profile), text);
	if (!group || !group.profiles.length)
		throw new Error('speedscope imported no profile');
	const out = [];
	for (const p of group.profiles) {
		const stack = [];
		p.forEachCall((node, t) => {
			stack.push(out.length);
			out.push([stack.length - 1, t, null, node.frame.name]);
		}, (node, t) => {
			out[stack.pop()][2] = t;
		});
	}
	process.stdout.write(out.map(r => r.join(' ')).join('\n') + '\n');
	process.stderr.write(`speedscope_tree: ${out.length} calls, ` +
			     `${group.profiles.length} profiles, ${warnings} warnings\n`);
})().catch(e => {
	console.error('speedscope_tree: ' + (e && e.message || e));
	process.exit(1);
});
