"""A plug-in package that cannot be imported: it needs a module nobody installed."""

import lab_missing_dependency  # noqa: F401

make_agent = None
