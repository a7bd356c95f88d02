"""``dagster-daemon`` whose code server is started once (tests/support/dagster_env.py: daemon_command).

Dagster's daemon starts a new code server every 60 s (in case the code changed, which it never does in a
test), each loading the code location again (~5 s of CPU, a third of a short test's daemon cost). The
interval is a private constant of Dagster's, checked so a rename fails loudly. A script, not ``-c`` code,
so the suite's warm start (tests/support/warm_start) can take it.
"""

import sys

from dagster._daemon import controller
from dagster._daemon.cli import main

if __name__ == "__main__":
    assert controller.RELOAD_WORKSPACE_INTERVAL == 60, "Dagster renamed or changed its reload interval"
    controller.RELOAD_WORKSPACE_INTERVAL = 10**6
    sys.exit(main())
