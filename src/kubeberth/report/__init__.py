"""Reports: summary tables, JSON and CSV output."""
