"""The TypeScript producer clients: ``akadze codegen APP --out DIR --lang typescript``.

emit.py renders a manifest into an npm package; types.py spells the types; runtime.ts is the
package's runtime (the guard, the encoder, the insert on ``pg``), copied into it as it is.
"""
