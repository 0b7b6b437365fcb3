"""The framework kit: what every framework backend (ART, SkyRL, ...) is built from; not a backend itself.

`backend` builds a framework backend's descriptor from its package's own modules,
`driver` is every driver's opening (preflight, guarded framework imports, native
directory), `support` asks the framework in its own environment whether it can express
the contract, `rollout` is the OpenAI-compatible request path, `native_metrics` and
`native_types` read and check the framework's own records and types, `async_signals`
handles signals on a framework's event loop. docs/backends.md shows how a backend uses it.
"""
