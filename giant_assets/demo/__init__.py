"""The demo at the platform's edge: the pipeline `make demo` runs and the scripted loopback model."""
