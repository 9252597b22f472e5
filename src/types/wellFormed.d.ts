// ES2024's String.prototype.isWellFormed (V8 11.1, so Node.js 20); the ES2022 lib the project
// compiles against does not declare it.
interface String {
  /** False when the string holds a lone UTF-16 surrogate. */
  isWellFormed(): boolean;
}
