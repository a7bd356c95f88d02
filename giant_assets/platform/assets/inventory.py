"""Asset: what the WSI root holds for the ingested items (per benchmark found / missing / unreadable)."""

import pandas as pd
from dagster import AssetExecutionContext, MetadataValue, asset

from giant_assets.multipathqa.inventory import take_inventory


@asset(group_name="ingest", kinds={"pandas"})
def slide_inventory(context: AssetExecutionContext, benchmark_items: pd.DataFrame) -> pd.DataFrame:
    """Per benchmark: questions, slides found / missing / unreadable, bytes, vendors, levels, mpp."""
    inventory = take_inventory(benchmark_items)
    problems = inventory.problems
    context.add_output_metadata(
        {
            "complete": inventory.complete,
            "questions_without_slide": len(problems),
            "summary": MetadataValue.md(inventory.summary.to_markdown(index=False)),
            "problems": MetadataValue.md(
                problems.head(200).to_markdown(index=False) if len(problems) else "none"
            ),
        }
    )
    return inventory.summary
