// Self cost per function from a callgrind dump, with V8's compiled JavaScript named: callgrind knows only
// addresses for JIT code, which node's `--perf-basic-prof` writes to /tmp/perf-<pid>.map as it compiles.
// Used by `bench/instructions.mjs --by-function` to say where two builds' instructions per request differ.
import { readFileSync } from 'node:fs';

/** The perf map of `pid`: entries sorted by start address. */
function perfMap(pid) {
  const entries = [];
  let text = '';
  try {
    text = readFileSync(`/tmp/perf-${pid}.map`, 'utf8');
  } catch {
    return entries;
  }
  for (const line of text.split('\n')) {
    const [start, size, ...name] = line.split(' ');
    if (!name.length) continue;
    entries.push({
      start: parseInt(start, 16),
      end: parseInt(start, 16) + parseInt(size, 16),
      name: name.join(' '),
    });
  }
  return entries.sort((a, b) => a.start - b.start);
}

/** The newest map entry that covers `addr` (a code address is reused once V8 frees what was there). */
function nameAt(entries, addr) {
  let lo = 0;
  let hi = entries.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (entries[mid].start <= addr) lo = mid + 1;
    else hi = mid - 1;
  }
  for (let i = hi; i >= 0 && addr - entries[i].start < 1 << 22; i--) {
    if (addr < entries[i].end) return entries[i].name;
  }
  return '(unnamed JIT code)';
}

/**
 * Self instructions per function of one dump, keyed by a name that is the same in both builds (a checkout's
 * own root is cut from script paths).
 */
export function selfCost(dumpFile, pid, roots) {
  const entries = perfMap(pid);
  const names = new Map();
  const costs = new Map();
  let fn;
  let afterCalls = false;
  const named = (v) => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(v);
    if (!m) return v;
    if (m[2] !== undefined) names.set(m[1], m[2]);
    return names.get(m[1]) ?? v;
  };
  for (const line of readFileSync(dumpFile, 'utf8').split('\n')) {
    if (line.startsWith('fn=')) {
      let name = named(line.slice(3).trim());
      if (name.startsWith('0x')) name = nameAt(entries, parseInt(name.split("'")[0], 16));
      for (const root of roots) name = name.replaceAll(root, '');
      fn = name.replace(/^JS:/, 'JS ');
    } else if (line.startsWith('cfn=')) {
      named(line.slice(4).trim());
    } else if (line.startsWith('calls=')) {
      // the next cost line is the call's inclusive cost: not this function's own
      afterCalls = true;
    } else if (/^[0-9+\-*]/.test(line)) {
      if (afterCalls) {
        afterCalls = false;
        continue;
      }
      const cost = Number(line.split(' ')[1]);
      if (fn !== undefined && Number.isFinite(cost)) costs.set(fn, (costs.get(fn) ?? 0) + cost);
    }
  }
  return costs;
}

/** The functions whose self cost per request differs most between two dumps, as table rows. */
export function differences(a, b, requests, top = 25) {
  const rows = [...new Set([...a.keys(), ...b.keys()])].map((name) => ({
    name,
    a: (a.get(name) ?? 0) / requests,
    b: (b.get(name) ?? 0) / requests,
  }));
  rows.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a));
  return rows.slice(0, top);
}
