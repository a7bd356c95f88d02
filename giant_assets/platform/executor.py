"""The code location's executor: Dagster's own two, with the run's own process as the default.

Dagster's default (``multi_or_in_process_executor``) starts one subprocess per step, and each
subprocess imports this code location again (about two seconds here) before its step starts. Our steps
either wait on a model with their own bounded concurrency (``predictions``) or are short, and most runs
are one cell's chain of assets, so one process per run is both faster and simpler. A run still gets one
subprocess per step with ``execution: {config: {multiprocess: {}}}`` in its run config (the UI's
launchpad, or ``--config-json`` on the CLI), exactly as with Dagster's default.
"""

from dagster import (
    Field,
    InitExecutorContext,
    Selector,
    executor,
    in_process_executor,
    multi_or_in_process_executor,
    multiple_process_executor_requirements,
    multiprocess_executor,
)

IN_PROCESS = {"in_process": {}}
MULTIPROCESS = {"multiprocess": {}}


@executor(
    name="in_process_or_multiprocess",
    config_schema=Field(
        Selector(
            {
                "in_process": in_process_executor.config_schema.as_field(),
                "multiprocess": multiprocess_executor.config_schema.as_field(),
            }
        ),
        default_value=IN_PROCESS,
        description="in_process (default): every step in the run's process; multiprocess: one per step",
    ),
    requirements=lambda config: multiple_process_executor_requirements() if "multiprocess" in config else [],
)
def in_process_or_multiprocess(context: InitExecutorContext):
    """Dagster's ``multi_or_in_process_executor`` with ``in_process`` as the default choice."""
    return multi_or_in_process_executor.executor_creation_fn(context)
