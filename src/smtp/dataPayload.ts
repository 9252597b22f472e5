import { PassThrough, type Readable } from 'node:stream';

/**
 * Reads a DATA payload into one buffer if it ends within `limit` bytes (the buffer owns its
 * memory, so it can move to a writer thread); otherwise hands back a stream of the whole
 * payload, the bytes read so far first.
 */
export function readWholeUpTo(
  input: Readable,
  limit: number,
): Promise<{ whole: Buffer } | { stream: Readable }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const stop = () => {
      input.off('data', onData);
      input.off('end', onEnd);
      input.off('error', reject);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size <= limit) return;
      stop();
      input.pause();
      const stream = new PassThrough();
      for (const c of chunks) stream.write(c);
      input.on('error', (err) => stream.destroy(err));
      input.pipe(stream);
      resolve({ stream });
    };
    const onEnd = () => {
      stop();
      const whole = Buffer.allocUnsafeSlow(size);
      let offset = 0;
      for (const c of chunks) offset += c.copy(whole, offset);
      resolve({ whole });
    };
    input.on('data', onData);
    input.on('end', onEnd);
    input.on('error', reject);
  });
}
