"""Let a process end without the interpreter's final garbage collection of everything still alive.

When CPython exits it collects every object still in memory. A Dagster process that has loaded this code
location (dagster, pandas, pydantic, the SDKs: millions of objects) spends about 0.75 s in that
collection after its run has finished, measured on every ``dagster asset materialize`` here; for a short
run that is a large share of its wall time. ``skip_final_collection`` registers an ``atexit`` hook that
freezes the heap (``gc.freeze()``) as the last thing before shutdown, so those collections skip what
exists by then. Module teardown and reference counting still run: files opened in ``with`` blocks or
held by modules are flushed and closed as usual, and atexit hooks registered earlier (Dagster's, the
logging module's) run after this one, unaffected. What is given up: ``__del__`` of objects left in
reference cycles at exit is not called, which CPython does not promise anyway.
"""

import atexit
import gc

_registered = False


def skip_final_collection() -> None:
    """Freeze the heap at exit (once per process, however often this is called)."""
    global _registered
    if not _registered:
        atexit.register(gc.freeze)
        _registered = True
