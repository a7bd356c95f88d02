"""`python -m giant_assets.demo` (what `make demo` runs)."""

from giant_assets.demo.pipeline import main

main()
