"""Campaigns: many runs fanned out over a Dask cluster, gathered into one report."""
