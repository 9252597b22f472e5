/**
 * A strict reader of the Prometheus text exposition format (version 0.0.4): every line is a
 * blank line, `# HELP name text`, `# TYPE name type` or a sample `name{label="value",…} value
 * [timestamp]`; a family's TYPE comes before its samples and once only; a histogram's samples are
 * `_bucket` (with `le`, ending in `+Inf`), `_sum` and `_count`; label values are escaped as the
 * format says. Anything else throws. (The npm parser tried first accepted garbage lines and lost
 * histograms' labels.) Returns every sample as `name{k=v,…}` (labels sorted) → value.
 */
const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*';
// As Prometheus reads it (Go's ParseFloat): NaN and Inf in any case.
const VALUE =
  '(?:[-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|[-+]?[Ii][Nn][Ff]|[Nn][Aa][Nn])';
const HELP = new RegExp(`^# HELP (${NAME}) (.*)$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (${VALUE})(?: -?\\d+)?$`);
const LABEL_PAIR = new RegExp(`^(${LABEL})="((?:[^"\\\\\\n]|\\\\[\\\\"n])*)"(?:,|$)`);

function labelsOf(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let rest = text;
  while (rest.length > 0) {
    const m = LABEL_PAIR.exec(rest);
    if (!m) throw new Error(`malformed labels in: ${line}`);
    if (m[1] in labels) throw new Error(`label ${m[1]} twice in: ${line}`);
    labels[m[1]] = m[2].replace(/\\(.)/g, (_s, c: string) => (c === 'n' ? '\n' : c));
    rest = rest.slice(m[0].length);
  }
  return labels;
}

export function parseExposition(text: string): Map<string, number> {
  const types = new Map<string, string>();
  const helped = new Set<string>();
  const samples = new Map<string, number>();
  const bucketsEnded = new Map<string, boolean>();
  let current: string | null = null;
  if (!text.endsWith('\n')) throw new Error('the exposition must end with a line feed');
  for (const line of text.slice(0, -1).split('\n')) {
    if (line === '') continue;
    const help = HELP.exec(line);
    if (help) {
      if (helped.has(help[1])) throw new Error(`HELP twice for ${help[1]}`);
      helped.add(help[1]);
      continue;
    }
    const type = TYPE.exec(line);
    if (type) {
      if (types.has(type[1])) throw new Error(`TYPE twice for ${type[1]}`);
      types.set(type[1], type[2]);
      current = type[1];
      continue;
    }
    if (line.startsWith('#')) throw new Error(`not a HELP or TYPE comment: ${line}`);
    const sample = SAMPLE.exec(line);
    if (!sample) throw new Error(`not a sample line: ${line}`);
    const [, name, labelText, value] = sample;
    if (current === null) throw new Error(`a sample before any TYPE: ${line}`);
    const kind = types.get(current)!;
    const labels = labelsOf(labelText ?? '', line);
    if (kind === 'histogram') {
      const suffix = name.slice(current.length);
      if (!name.startsWith(current) || !['_bucket', '_sum', '_count'].includes(suffix))
        throw new Error(`${name} is not a sample of histogram ${current}`);
      const { le, ...rest } = labels;
      const series = `${current}${JSON.stringify(Object.entries(rest).sort())}`;
      if (suffix === '_bucket') {
        if (le === undefined) throw new Error(`a bucket without le: ${line}`);
        if (le === '+Inf') bucketsEnded.set(series, true);
        else bucketsEnded.set(series, bucketsEnded.get(series) ?? false);
      } else if (bucketsEnded.get(series) !== true) {
        throw new Error(`${name} before the +Inf bucket of its series: ${line}`);
      }
    } else if (name !== current) {
      throw new Error(`${name} under the TYPE of ${current}`);
    }
    const key = `${name}{${Object.entries(labels)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}`;
    if (samples.has(key)) throw new Error(`the same series twice: ${key}`);
    samples.set(key, /nan/i.test(value) ? NaN : Number(value.replace(/inf/i, 'Infinity')));
  }
  return samples;
}
