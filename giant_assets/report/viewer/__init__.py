"""The static trajectory viewer: what each run of an agent saw and said, item by item, in a browser."""

from giant_assets.report.viewer.pages import item_pages
from giant_assets.report.viewer.site import SiteResult, rebuild_index, served_url, write_benchmark

__all__ = ["SiteResult", "item_pages", "rebuild_index", "served_url", "write_benchmark"]
