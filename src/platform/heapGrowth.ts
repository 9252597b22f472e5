import v8 from 'node:v8';

/**
 * Sets how far V8 lets the heap grow past what survived a full collection before it collects
 * again (config `memory.heap_growth_percent`; 0 restores V8's own rule). The flag is one of the
 * few V8 reads afresh at every full collection, so setting it in the running process works (a
 * test shows the heap's peak change), and it applies to every isolate: the event loop's and
 * each worker thread's. Without it, relaying at full speed let the event loop's heap reach
 * about twice its live size between collections.
 */
export function applyHeapGrowth(percent: number): void {
  v8.setFlagsFromString(`--heap-growing-percent=${percent}`);
}
