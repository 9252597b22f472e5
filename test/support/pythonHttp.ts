import { spawn } from 'node:child_process';

/** What Python's http.client saw: the answer, or the exception it raised instead. */
export type PythonAnswer = { status: number; body: string } | { error: string };

/**
 * Sends the file's bytes as a request's body the way most Python SDKs do (http.client, which
 * urllib3 and requests build on): the whole body first, then the answer is read.
 */
const SCRIPT = `
import http.client, json, sys
spec = json.load(sys.stdin)
with open(spec['file'], 'rb') as f:
    data = f.read()
try:
    conn = http.client.HTTPConnection(spec['host'], spec['port'], timeout=60)
    conn.request(spec['method'], spec['path'], body=data, headers=spec['headers'])
    res = conn.getresponse()
    print(json.dumps({'status': res.status, 'body': res.read().decode('utf-8', 'replace')}))
except Exception as e:
    print(json.dumps({'error': repr(e)}))
`;

/** `python3` in a child process posting `bodyFile` to `url` with http.client. */
export function pythonPost(
  url: string,
  headers: Record<string, string>,
  bodyFile: string,
  method = 'POST',
): Promise<PythonAnswer> {
  const target = new URL(url);
  const spec = {
    host: target.hostname,
    port: Number(target.port),
    path: target.pathname + target.search,
    method,
    headers,
    file: bodyFile,
  };
  return new Promise((resolve, reject) => {
    const child = spawn('python3', ['-c', SCRIPT], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(stdout) as PythonAnswer);
      } catch {
        reject(new Error(`python3 exited with ${code}: ${stderr || stdout}`));
      }
    });
    child.stdin.end(JSON.stringify(spec));
  });
}
